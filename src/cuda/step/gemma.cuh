/* gemma.cuh — the kernels Gemma 3 adds to the CUDA step (backend.h, THE STEP, Gemma 3), included by
 * step.cu alone after step_kernels.cuh: the embedding scale, the GeGLU gate (alone, and with the
 * down projection's activation pass as stk_swiglu_act makes it), the final soft-cap, and the
 * launchers step.cu calls so one layer body serves SwiGLU and GeGLU models. Every element is the
 * pinned op of src/format/pinned_gemma.h, the CPU's (src/cpu/gemma_ops.c), so exact mode keeps
 * the CPU's bits; none of these kernels reduces anything, so the split of the grid is free. The
 * post-norms run stk_add_rmsnorm in place (no add); the local layers' window and ring are in the
 * attention and prep kernels' arguments (stk_att_span, stk_prep_args.ring). */
#ifndef FP4_CUDA_STEP_GEMMA_CUH
#define FP4_CUDA_STEP_GEMMA_CUH

#include "cuda/step/step_impl.cuh"
#include "cuda/step/step_kernels.cuh"
#include "format/pinned_gemma.h"

/* x[i] = dtype(x[i] * scale) over n values (THE STEP, Gemma 3 1) */
static __global__ void gm_embed_scale(float *x, int64_t n, float scale, int dtype) {
    STK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fp4p_embed_scale(x[i], scale, dtype);
}

/* logits[i] = tanh(logits[i] / cap) * cap over n values (THE STEP, Gemma 3 3) */
static __global__ void gm_softcap(float *lg, int64_t n, float cap) {
    STK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) lg[i] = fp4p_softcap(lg[i], cap);
}

/* out[c][f] = geglu(g[c][f], u[c][f]) for f < F; g and u rows gs floats apart (stk_swiglu's layout) */
static __global__ void gm_geglu(float *out, const float *g, const float *u, int64_t F, int64_t gs,
                                int64_t n) {
    STK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t at = i / F * gs + i % F;
    out[i] = fp4p_geglu(g[at], u[at]);
}

/* stk_swiglu_act with the GeGLU gate: a = geglu(g, u) and down's activation pass (act_warp.cuh) */
template <bool EXACT>
static __global__ void gm_geglu_act(float *a, void *q, float *d, const float *g, const float *u, int64_t F,
                                    int64_t nsb) {
    STK_PDL_ENTRY();
    const int lane = threadIdx.x & 31;
    const int64_t sb = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (sb >= nsb) return;
    const int64_t k = sb * 256 + lane * 8;
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        v[j] = k + j < F ? fp4p_geglu(g[k + j], u[k + j]) : 0.0f;
        if (k + j < F) a[k + j] = v[j];
    }
    float dq;
    if constexpr (EXACT) {
        uint32_t lo, hi;
        int bsum;
        dq = fp4_q8k_warp(v, lane, &lo, &hi, &bsum);
        *reinterpret_cast<uint2 *>(static_cast<int8_t *>(q) + k) = make_uint2(lo, hi);
    } else {
        uint4 packed;
        dq = fp4_act16_warp(v, &packed);
        *reinterpret_cast<uint4 *>(static_cast<int16_t *>(q) + k) = packed;
    }
    if (lane == 0) d[sb] = dq;
}

static inline unsigned gm_blocks(int64_t n, int per) {
    return (unsigned)((n + per - 1) / per);
}

static inline int gm_gelu(const cu_state *s) {
    return s->d.arch.hidden_act == FP4_ACT_GELU_TANH;
}

/* the gate of n values: SwiGLU, or GeGLU for a gelu_pytorch_tanh model (stk_swiglu's arguments) */
static inline fp4_status gm_act(const cu_state *s, float *out, const float *g, const float *u, int64_t F,
                                int64_t gs, int64_t n) {
    const dim3 grid(gm_blocks(n, 256)), block(256);
    return gm_gelu(s) ? fp4_cu_launch(grid, block, 0, s->stream, 1, gm_geglu, out, g, u, F, gs, n)
                      : fp4_cu_launch(grid, block, 0, s->stream, 1, stk_swiglu, out, g, u, F, gs, n);
}

/* the gate and down's activation pass in one kernel (stk_swiglu_act's arguments) */
static inline fp4_status gm_act_pass(const cu_state *s, int exact, float *a, const float *g, const float *u,
                                     int64_t F, int64_t nsb) {
    const dim3 grid((unsigned)((nsb + 1) / 2)), block(64); /* 2 warps a block */
    void *q = s->d_aq;
    float *d = s->d_ad;
    const cudaStream_t st = s->stream;
    if (gm_gelu(s))
        return exact ? fp4_cu_launch(grid, block, 0, st, 1, gm_geglu_act<true>, a, q, d, g, u, F, nsb)
                     : fp4_cu_launch(grid, block, 0, st, 1, gm_geglu_act<false>, a, q, d, g, u, F, nsb);
    return exact ? fp4_cu_launch(grid, block, 0, st, 1, stk_swiglu_act<true>, a, q, d, g, u, F, nsb)
                 : fp4_cu_launch(grid, block, 0, st, 1, stk_swiglu_act<false>, a, q, d, g, u, F, nsb);
}

/* y = rmsnorm(y, w) in place over n rows of H (Gemma 3's post-norms, i and m: the add follows in
 * the next add_norm) */
static inline fp4_status gm_post_norm(const cu_state *s, int64_t n, float *y, const float *w) {
    const int H = (int)s->d.arch.hidden;
    return fp4_cu_launch(dim3((unsigned)n), dim3(STK_NORM_THREADS), (size_t)H * 4, s->stream, 1,
                         stk_add_rmsnorm, y, (const float *)NULL, w, H, s->d.arch.rms_eps, y,
                         (const int32_t *)NULL);
}

/* after the embedding: Gemma's scale of the n columns' rows in d_x */
static inline fp4_status gm_embed(const cu_state *s, int64_t n) {
    if (!s->d.arch.embed_scale) return FP4_OK;
    const int64_t m = n * s->d.arch.hidden;
    return fp4_cu_launch(dim3(gm_blocks(m, 256)), dim3(256), 0, s->stream, 1, gm_embed_scale, s->d_x, m,
                         s->emb_scale, s->emb_dtype);
}

/* after the head: the final soft-cap of the nw logit rows */
static inline fp4_status gm_softcap_rows(const cu_state *s, int64_t nw) {
    if (!(s->d.arch.final_softcap > 0)) return FP4_OK;
    const int64_t m = nw * s->d.arch.vocab;
    return fp4_cu_launch(dim3(gm_blocks(m, 256)), dim3(256), 0, s->stream, 1, gm_softcap, s->d_lg, m,
                         (float)s->d.arch.final_softcap);
}

#endif /* FP4_CUDA_STEP_GEMMA_CUH */
