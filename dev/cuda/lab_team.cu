/* lab_team.cu — the kernel lab's row-team variants (src/cuda/a16_team.cuh, round 7), 1 column:
 * exact (SPEC §4, bit-identical: the Q8_K pass, then the team kernel) and native (SPEC §6: the
 * int16 activation pass, then the team kernel). R = rows per row group, tasks = about how many
 * tasks (R rows x 4 super-blocks) a block takes, PDL = programmatic dependent launch after the
 * activation pass.
 *
 *   .30  R 2, 16 tasks, PDL   (exact: production at 1 column under 8192 rows)
 *   .31  R 2, 16 tasks, plain launch (what PDL is worth)
 *   .32  R 4, 16 tasks, PDL
 *   .33  R 2, 8 tasks, PDL    (one task per warp on most shapes)
 *   .34  R 2, 32 tasks, PDL
 *   .35  .30 with the weights read through L1 without allocating (ld.global.nc.L1::no_allocate)
 *   .36  R 4, 8 tasks, PDL
 *   exact.40  the team kernel of exact.30 alone, on activations quantized beforehand
 */
#include "lab_variants.h"
#include "cuda/a16_team.cuh"

/* The native arithmetic of the team kernel (SPEC §6; the route's is team_exact): per task and row
 * the exact int32 group dots (dp2a against the int16 activations of act16_kernel),
 * t = fma(dot0, s0, dot1 * s1), summed over the 8 lanes by a fixed butterfly, times the
 * super-block's step; the row's chain acc += v in super-block order, then * 0.5 * scale2. */
struct team_native {
    static constexpr int AV = 4; /* 16-byte activation words per lane */
    static constexpr int XB = 2; /* activation bytes per value (int16) */
    static constexpr int min_blocks(int r) { return r >= 4 ? 2 : 4; }
    static inline int nsb(const fp4_cuda_tensor *w) { return (int)(w->k_pad / 256); }
    template <int R>
    static __device__ __forceinline__ void compute(int sub, float scale2,
                                                   const team_stage<team_native, R> &st, float *cs, int cst) {
        (void)scale2;
        const fp4_q1_luts L = fp4_q1_luts_make();
        float part[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            uint32_t q1[8];
            dp2a_decode16(st.w[r], L, q1);
            int d0, d1;
            dp2a_dot32(q1, st.a[0], st.a[1], st.a[2], st.a[3], d0, d1);
            const uint32_t h2 = fp4_e4m3x2_to_h2(st.s[r]);
            const __half2 hh = *reinterpret_cast<const __half2 *>(&h2);
            /* |dot| <= 16 * 12 * 32767 < 2^24: exact in f32 */
            part[r] = __fmaf_rn((float)d0, __low2float(hh), __fmul_rn((float)d1, __high2float(hh)));
        }
        const float tot = team_reduce8<float, R>(part, sub);
        if (st.ok && sub < R) cs[(st.g * R + sub) * cst + st.sb] = __fmul_rn(tot, st.d);
    }
    static __device__ __forceinline__ float finish(const float *c, int nsb, float scale2) {
        float acc = 0.0f;
        for (int sb = 0; sb < nsb; sb++)
            acc = __fadd_rn(acc, c[sb]);
        return __fmul_rn(acc, __fmul_rn(0.5f, scale2)); /* q1 = 2 * e2m1 */
    }
};

struct team_cfg {
    int r, tasks, pdl, ldp;
};

static int team_config(int variant, team_cfg *c) {
    switch (variant) {
    case 30: *c = {2, 16, 1, 0}; return 1;
    case 31: *c = {2, 16, 0, 0}; return 1;
    case 32: *c = {4, 16, 1, 0}; return 1;
    case 33: *c = {2, 8, 1, 0}; return 1;
    case 34: *c = {2, 32, 1, 0}; return 1;
    case 35: *c = {2, 16, 1, 1}; return 1;
    case 36: *c = {4, 8, 1, 0}; return 1;
    default: return 0;
    }
}

template <class M>
static fp4_status team_launch(const team_cfg &c, const fp4_cuda_tensor *w, const void *q, const float *d,
                              float *y, cudaStream_t s) {
    if (c.ldp) return launch_team<M, 2, 1>(w, q, d, y, c.tasks, c.pdl, s);
    return c.r == 4 ? launch_team<M, 4>(w, q, d, y, c.tasks, c.pdl, s)
                    : launch_team<M, 2>(w, q, d, y, c.tasks, c.pdl, s);
}

fp4_status lab_team(int exact, int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols,
                    float *d_y, const fp4_cuda_scratch *s, cudaStream_t stream) {
    team_cfg c;
    if (n_cols != 1 || !team_config(variant, &c)) return FP4_ERR_UNSUPPORTED;
    uint8_t *base = (uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    if (exact) {
        if (w->k_pad != w->n_in || w->n_in % 256) return FP4_ERR_SHAPE;
        int8_t *q = (int8_t *)base;
        float *d = (float *)(base + FP4_CU_ALIGN((size_t)w->k_pad));
        FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w->n_in, w->k_pad, 1, q, d, NULL, 0, stream));
        return team_launch<team_exact>(c, w, q, d, d_y, stream);
    }
    int16_t *q = (int16_t *)base;
    float *d = (float *)(base + FP4_CU_ALIGN((size_t)w->k_pad * 2));
    FP4_CU_TRY(act16_pass(w, d_x, 1, q, d, stream));
    return team_launch<team_native>(c, w, q, d, d_y, stream);
}

fp4_status lab_team_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                           float *d_y, cudaStream_t stream) {
    team_cfg c;
    if (!team_config(variant - 10, &c)) return FP4_ERR_UNSUPPORTED;
    return team_launch<team_exact>(c, w, d_q, d_d, d_y, stream);
}
