/* step_kernels.cuh — the device kernels of THE STEP (backend.h) outside the projections, for
 * step_cuda.cu. Every float operation is pinned.h's (fp4p_*: __fadd_rn/__fmul_rn/__fdiv_rn/
 * __fsqrt_rn, never contracted: the library is built with --fmad=false), and every reduction is
 * pinned.h's 32-lane one: lane l adds terms l, l+32, l+64, ... in increasing order from +0.0f, then
 * the xor butterfly (off = 16, 8, 4, 2, 1). A "lane" here is either a lane of a warp (reductions
 * over head_dim or hidden) or one of 32 blocks (attention's sum over positions), never anything
 * else; so exact mode gives the CPU's bits. Columns read their token, slot, position and logits row
 * from the device (st_in), so one launch sequence serves any columns of a given count: what the
 * CUDA graph of a decode step replays.
 *
 * Layouts: x, t [col][H]; q, o [col][NH*D]; k, v [col][NKV*D]; g, u [col][F];
 * KV cache [slot][layer][pos][NKV*D] halves; scores [col][NH][n_ctx]; strips [col][NH][32][D].
 * (With fused projections q/k/v share rows of qd + 2*kvd floats and g/u rows of 2F: strides below.)
 *
 * Programmatic dependent launch: step_cuda.cu launches every kernel here with programmatic stream
 * serialization, so it may be resident before its predecessor has finished; each one therefore
 * starts with STK_PDL_ENTRY (let its own successor queue, then wait for the predecessor grid and
 * its memory) before it reads or writes anything another kernel touches. */
#ifndef FP4_RT_STEP_KERNELS_CUH
#define FP4_RT_STEP_KERNELS_CUH

#include "cuda/common.cuh"
#include "fp4lane_runtime.h"
#include "runtime/pinned.h"
#include <cuda_fp16.h>
#include <stdint.h>

#define STK_LANES 32
#define STK_SCORE_WARPS 8

/* every block of every step kernel, first: no global memory is touched before this */
#define STK_PDL_ENTRY()                                                                                      \
    do {                                                                                                     \
        fp4_pdl_trigger();                                                                                   \
        fp4_pdl_wait();                                                                                      \
    } while (0)

/* the per-step column table on the device: four int32 arrays of max_cols */
typedef struct stk_cols {
    const int32_t *tok, *slot, *pos, *lrow; /* lrow: row of the column in the logits, or -1 */
} stk_cols;

static __device__ __forceinline__ float stk_warp_butterfly(float p) {
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        p = fp4p_add(p, __shfl_xor_sync(0xFFFFFFFFu, p, off));
    return p;
}

static __device__ __forceinline__ float stk_h2f(uint16_t h) {
    return __half2float(__ushort_as_half(h));
} /* exact */

/* The residual add and the RMSNorm that follows it, one block per row (fp4p_add, then
 * fp4p_rmsnorm): with t, x_row[i] = x_row[i] + t_row[i] is stored back first (THE STEP i/m); then
 * y_row = rmsnorm(x_row, w). The block stages the row in shared memory (len floats, dynamic), so
 * lane l of warp 0 sums its squares x[l], x[l+32], ... in order from shared memory instead of
 * waiting on global memory once per term; the butterfly and the scaling are pinned.h's. With lrow,
 * row r goes to row lrow[r] of y and is skipped when lrow[r] < 0 (the final norm of the columns
 * that want logits: the other columns' x is dead after the step). */
#define STK_NORM_THREADS 1024
static __global__ __launch_bounds__(STK_NORM_THREADS) void stk_add_rmsnorm(float *x, const float *t,
                                                                           const float *__restrict__ w,
                                                                           int len, float eps, float *y,
                                                                           const int32_t *lrow) {
    extern __shared__ float xs[];
    __shared__ float inv_s;
    STK_PDL_ENTRY();
    const int64_t r = blockIdx.x;
    const int64_t dst = lrow ? lrow[r] : r;
    if (dst < 0) return; /* uniform over the block */
    float *xr = x + r * len;
    const float *tr = t ? t + r * len : NULL;
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
        float v = xr[i];
        if (tr) {
            v = fp4p_add(v, tr[i]);
            xr[i] = v;
        }
        xs[i] = v;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        float p = 0.0f;
#pragma unroll 8
        for (int i = threadIdx.x; i < len; i += 32)
            p = fp4p_add(p, fp4p_mul(xs[i], xs[i]));
        p = stk_warp_butterfly(p);
        if (threadIdx.x == 0) inv_s = fp4p_div(1.0f, fp4p_sqrt(fp4p_add(fp4p_div(p, (float)len), eps)));
    }
    __syncthreads();
    const float inv = inv_s;
    float *yr = y + dst * len;
    for (int i = threadIdx.x; i < len; i += blockDim.x)
        yr[i] = fp4p_mul(fp4p_mul(xs[i], inv), w[i]);
}

/* THE STEP c..g for one head of one column: bias, llama.cpp un-permute, q/k RMSNorm, RoPE, the F16
 * KV write. Block (column, head) over NH q heads, then NKV k heads, then NKV v heads; D threads. */
typedef struct stk_prep_args {
    float *q, *k, *v;
    int64_t q_cs, kv_cs;        /* floats between columns of q, of k and v (one fused q/k/v
                                   projection: all three qd + 2*kvd) */
    const float *bq, *bk, *bv;  /* NULL without qkv_bias */
    const float *qn, *kn;       /* NULL without qk_norm  */
    const float *cos_t, *sin_t; /* [n_ctx][D/2]          */
    uint16_t *kc, *vc;          /* this layer's slot 0, position 0; slot stride below */
    int64_t slot_stride;        /* halves between slots: n_layers * n_ctx * NKV*D */
    int nh, nkv, d, permuted;
    float eps;
    stk_cols cols;
} stk_prep_args;

static __global__ void stk_qkv_prep(stk_prep_args a) {
    __shared__ float buf[FP4_ARCH_MAX_HEAD_DIM];
    __shared__ float inv_s;
    STK_PDL_ENTRY();
    const int c = blockIdx.x, hb = blockIdx.y, d = threadIdx.x, D = a.d, half = D / 2;
    const int kvd = a.nkv * D;
    const int kind = hb < a.nh ? 0 : hb < a.nh + a.nkv ? 1 : 2; /* q, k, v: uniform over the block */
    const int h = kind == 0 ? hb : kind == 1 ? hb - a.nh : hb - a.nh - a.nkv;
    float *base = kind == 0 ? a.q + (int64_t)c * a.q_cs + h * D
                            : (kind == 1 ? a.k : a.v) + (int64_t)c * a.kv_cs + h * D;
    const float *bias = kind == 0 ? a.bq : kind == 1 ? a.bk : a.bv;
    float val = base[d];
    if (bias) val = fp4p_add(val, bias[h * D + d]);
    if (kind != 2) {
        if (a.permuted) { /* out[j*D/2 + i] = in[2i + j] */
            buf[d] = val;
            __syncthreads();
            val = buf[2 * (d % half) + d / half];
            __syncthreads();
        }
        const float *nw = kind == 0 ? a.qn : a.kn;
        if (nw) {
            buf[d] = val;
            __syncthreads();
            if (d < 32) {
                float p = 0.0f;
                for (int i = d; i < D; i += 32)
                    p = fp4p_add(p, fp4p_mul(buf[i], buf[i]));
                p = stk_warp_butterfly(p);
                if (d == 0) inv_s = fp4p_div(1.0f, fp4p_sqrt(fp4p_add(fp4p_div(p, (float)D), a.eps)));
            }
            __syncthreads();
            val = fp4p_mul(fp4p_mul(val, inv_s), nw[d]);
            __syncthreads();
        }
        const int64_t pos = a.cols.pos[c];
        const float *cs = a.cos_t + pos * half, *sn = a.sin_t + pos * half;
        buf[d] = val;
        __syncthreads();
        if (d < half)
            val = fp4p_sub(fp4p_mul(buf[d], cs[d]), fp4p_mul(buf[d + half], sn[d]));
        else
            val = fp4p_add(fp4p_mul(buf[d], cs[d - half]), fp4p_mul(buf[d - half], sn[d - half]));
        base[d] = val;
    }
    if (kind != 0) {
        const int64_t at = (int64_t)a.cols.slot[c] * a.slot_stride + (int64_t)a.cols.pos[c] * kvd + h * D + d;
        (kind == 1 ? a.kc : a.vc)[at] = fp4p_f32_to_f16(val);
    }
}

/* attention (fp4p_attend) in two launches. A block serves one column and a group of up to STK_GB
 * query heads of one KV head (GQA: the heads hk*G .. hk*G+G-1 read the same K and V rows, which the
 * block reads once for all of them). Block row y = (c * nkv + hk) * ngb + gb, ngb = ceil(G / STK_GB).
 *   stk_att_scores: s_j = fp4p_dot(q, k_j) * scale for j <= pos, one warp per position (the warps of
 *     gridDim.x blocks striding over the positions; the grid does not depend on the position: graphs
 *     replay it), and each block's maximum of its scores per head (the max is order-free).
 *   stk_att_pv: block l (0..31) of a group is lane l of the pinned reductions over positions: with
 *     m = the max of the blocks' maxima, it forms e_j = fp4p_exp(s_j - m) for j = l, l+32, ... in
 *     increasing order and adds them (den strip l) and e_j * v_j[d] (o strip l, per d), each from
 *     +0.0f; the last of the 32 blocks to finish (a ticket, reset by that block) meets the strips
 *     in the butterfly and writes o[d] = sum / den. The same operations in the same order as the
 *     four-launch version and as fp4p_attend: exact mode keeps the CPU's bits. */
#define STK_GB 4       /* query heads per attention block */
#define STK_MAX_GX 64  /* score blocks per group (their per-head maxima are kept) */
#define STK_PV_CHUNK 32 /* positions per lane staged in shared memory at a time */
typedef struct stk_att_args {
    const float *q;
    int64_t q_cs;            /* floats between the columns of q */
    const uint16_t *kc, *vc; /* this layer's slot 0, position 0 */
    int64_t slot_stride;
    float *scores;   /* [col][NH][n_ctx] */
    float *bmax;     /* [col][NH][STK_MAX_GX]: the score blocks' maxima */
    float *strips;   /* [col][NH][32][D] */
    float *den;      /* [col][NH][32] */
    unsigned *ticket; /* [col][NKV][ngb], zero between launches */
    float *o;
    int64_t n_ctx;
    int nh, nkv, d, gx;
    float scale;
    stk_cols cols;
} stk_att_args;

#define STK_MAX_DL (FP4_ARCH_MAX_HEAD_DIM / 32)
static __device__ __forceinline__ void stk_att_group(const stk_att_args &a, int y, int *c, int *hk, int *h0,
                                                     int *nhb) {
    const int G = a.nh / a.nkv, ngb = (G + STK_GB - 1) / STK_GB, gb = y % ngb;
    *hk = (y / ngb) % a.nkv;
    *c = y / (ngb * a.nkv);
    *h0 = *hk * G + gb * STK_GB;
    *nhb = G - gb * STK_GB < STK_GB ? G - gb * STK_GB : STK_GB;
}

/* NDL: an upper bound of D/32 (registers for q and k values); the step picks 2, 4 or STK_MAX_DL */
template <int NDL> static __global__ void stk_att_scores(stk_att_args a) {
    __shared__ float wmax[STK_SCORE_WARPS][STK_GB];
    STK_PDL_ENTRY();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, D = a.d, nd = D / 32;
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    const int64_t pos = a.cols.pos[c], kvd = (int64_t)a.nkv * D;
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    float qv[STK_GB][NDL], mx[STK_GB];
#pragma unroll
    for (int i = 0; i < STK_GB; i++) {
        mx[i] = __int_as_float((int)0xFF800000u); /* -inf */
#pragma unroll
        for (int m = 0; m < NDL; m++)
            qv[i][m] = i < nhb && m < nd ? q[i * D + lane + 32 * m] : 0.0f;
    }
    const uint16_t *k0 = a.kc + a.cols.slot[c] * a.slot_stride + hk * D + lane;
    float *srow = a.scores + ((int64_t)c * a.nh + h0) * a.n_ctx;
    for (int64_t j = (int64_t)blockIdx.x * STK_SCORE_WARPS + warp; j <= pos;
         j += (int64_t)gridDim.x * STK_SCORE_WARPS) {
        const uint16_t *kr = k0 + j * kvd;
        float kv[NDL];
#pragma unroll
        for (int m = 0; m < NDL; m++)
            kv[m] = m < nd ? stk_h2f(kr[32 * m]) : 0.0f;
#pragma unroll
        for (int i = 0; i < STK_GB; i++) {
            if (i >= nhb) break; /* uniform over the block */
            float p = 0.0f;
#pragma unroll
            for (int m = 0; m < NDL; m++)
                if (m < nd) p = fp4p_add(p, fp4p_mul(qv[i][m], kv[m]));
            p = fp4p_mul(stk_warp_butterfly(p), a.scale);
            if (lane == 0) srow[i * a.n_ctx + j] = p;
            mx[i] = fmaxf(mx[i], p);
        }
    }
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < STK_GB; i++)
            wmax[warp][i] = mx[i];
    __syncthreads();
    if (threadIdx.x < nhb) {
        float m = wmax[0][threadIdx.x];
        for (int w = 1; w < STK_SCORE_WARPS; w++)
            m = fmaxf(m, wmax[w][threadIdx.x]);
        a.bmax[((int64_t)c * a.nh + h0 + threadIdx.x) * STK_MAX_GX + blockIdx.x] = m;
    }
}

/* the pinned butterfly over 32 strips p[k * stride] (written by other blocks: read from L2) */
static __device__ __forceinline__ float stk_strip_butterfly(const float *p, int64_t stride) {
    float v[STK_LANES];
#pragma unroll
    for (int k = 0; k < STK_LANES; k++)
        v[k] = __ldcg(p + k * stride);
#pragma unroll
    for (int k = 0; k < 16; k++)
        v[k] = fp4p_add(v[k], v[k + 16]);
#pragma unroll
    for (int k = 0; k < 8; k++)
        v[k] = fp4p_add(v[k], v[k + 8]);
#pragma unroll
    for (int k = 0; k < 4; k++)
        v[k] = fp4p_add(v[k], v[k + 4]);
    v[0] = fp4p_add(v[0], v[2]);
    v[1] = fp4p_add(v[1], v[3]);
    return fp4p_add(v[0], v[1]);
}

/* D threads; block (l, group) */
static __global__ void stk_att_pv(stk_att_args a) {
    __shared__ float es[STK_GB][STK_PV_CHUNK];
    __shared__ float ms[STK_GB];
    __shared__ int last_s;
    STK_PDL_ENTRY();
    const int l = blockIdx.x, d = threadIdx.x, D = a.d;
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    const int64_t n = (int64_t)a.cols.pos[c] + 1, kvd = (int64_t)a.nkv * D;
    const int64_t ch0 = (int64_t)c * a.nh + h0; /* (column, first head of the group) */
    if (threadIdx.x < STK_GB) {
        float m = __int_as_float((int)0xFF800000u);
        if ((int)threadIdx.x < nhb)
            for (int b = 0; b < a.gx; b++)
                m = fmaxf(m, a.bmax[(ch0 + threadIdx.x) * STK_MAX_GX + b]);
        ms[threadIdx.x] = m;
    }
    __syncthreads();
    float p[STK_GB], den = 0.0f;
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        p[g] = 0.0f;
    const uint16_t *vr = a.vc + a.cols.slot[c] * a.slot_stride + hk * D + d;
    for (int64_t j0 = l; j0 < n; j0 += 32 * STK_PV_CHUNK) {
        for (int i = threadIdx.x; i < STK_GB * STK_PV_CHUNK; i += blockDim.x) {
            const int g = i / STK_PV_CHUNK, t = i % STK_PV_CHUNK;
            const int64_t j = j0 + 32 * (int64_t)t;
            es[g][t] = g < nhb && j < n ? fp4p_exp(fp4p_sub(a.scores[(ch0 + g) * a.n_ctx + j], ms[g])) : 0.0f;
        }
        __syncthreads();
        const int64_t left = (n - j0 + 31) / 32;
        const int nt = left < STK_PV_CHUNK ? (int)left : STK_PV_CHUNK;
#pragma unroll 8
        for (int t = 0; t < nt; t++) {
            const float v = stk_h2f(vr[(j0 + 32 * (int64_t)t) * kvd]);
#pragma unroll
            for (int g = 0; g < STK_GB; g++)
                if (g < nhb) p[g] = fp4p_add(p[g], fp4p_mul(es[g][t], v));
        }
        if ((int)threadIdx.x < nhb)
            for (int t = 0; t < nt; t++)
                den = fp4p_add(den, es[threadIdx.x][t]);
        __syncthreads();
    }
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        if (g < nhb) a.strips[((ch0 + g) * STK_LANES + l) * D + d] = p[g];
    if ((int)threadIdx.x < nhb) a.den[(ch0 + threadIdx.x) * STK_LANES + l] = den;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_s = atomicAdd(&a.ticket[blockIdx.y], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last_s) return;
    __threadfence();
    for (int g = 0; g < nhb; g++) {
        const float sum = stk_strip_butterfly(a.strips + (ch0 + g) * STK_LANES * D + d, D);
        const float den_g = stk_strip_butterfly(a.den + (ch0 + g) * STK_LANES, 1);
        a.o[(ch0 + g) * D + d] = fp4p_div(sum, den_g);
    }
    if (threadIdx.x == 0) a.ticket[blockIdx.y] = 0u;
}

/* out[c][f] = swiglu(g[c][f], u[c][f]) for f < F; g and u rows gs floats apart (out may be g) */
static __global__ void stk_swiglu(float *out, const float *g, const float *u, int64_t F, int64_t gs,
                                  int64_t n) {
    STK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t at = i / F * gs + i % F;
    out[i] = fp4p_swiglu(g[at], u[at]);
}

#endif
