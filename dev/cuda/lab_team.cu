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

template <bool EXACT>
static fp4_status team_launch(const team_cfg &c, const fp4_cuda_tensor *w, const void *q, const float *d,
                              float *y, cudaStream_t s) {
    if (c.ldp) return launch_team<EXACT, 2, 1>(w, q, d, y, c.tasks, c.pdl, s);
    return c.r == 4 ? launch_team<EXACT, 4>(w, q, d, y, c.tasks, c.pdl, s)
                    : launch_team<EXACT, 2>(w, q, d, y, c.tasks, c.pdl, s);
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
        return team_launch<true>(c, w, q, d, d_y, stream);
    }
    int16_t *q = (int16_t *)base;
    float *d = (float *)(base + FP4_CU_ALIGN((size_t)w->k_pad * 2));
    FP4_CU_TRY(act16_pass(w, d_x, 1, q, d, stream));
    return team_launch<false>(c, w, q, d, d_y, stream);
}

fp4_status lab_team_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                           float *d_y, cudaStream_t stream) {
    team_cfg c;
    if (!team_config(variant - 10, &c)) return FP4_ERR_UNSUPPORTED;
    return team_launch<true>(c, w, d_q, d_d, d_y, stream);
}
