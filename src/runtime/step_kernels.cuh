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
 * KV cache [slot][layer][pos][NKV*D] halves; scores [col][NH][n_ctx]; strips [col][NH][32][D]. */
#ifndef FP4_RT_STEP_KERNELS_CUH
#define FP4_RT_STEP_KERNELS_CUH

#include "fp4lane_runtime.h"
#include "runtime/pinned.h"
#include <cuda_fp16.h>
#include <stdint.h>

#define STK_LANES 32
#define STK_SCORE_WARPS 8

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
#define STK_NORM_THREADS 256
static __global__ __launch_bounds__(STK_NORM_THREADS) void stk_add_rmsnorm(float *x, const float *t,
                                                                           const float *__restrict__ w,
                                                                           int len, float eps, float *y,
                                                                           const int32_t *lrow) {
    extern __shared__ float xs[];
    __shared__ float inv_s;
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
    const int c = blockIdx.x, hb = blockIdx.y, d = threadIdx.x, D = a.d, half = D / 2;
    const int qd = a.nh * D, kvd = a.nkv * D;
    const int kind = hb < a.nh ? 0 : hb < a.nh + a.nkv ? 1 : 2; /* q, k, v: uniform over the block */
    const int h = kind == 0 ? hb : kind == 1 ? hb - a.nh : hb - a.nh - a.nkv;
    float *base =
        kind == 0 ? a.q + (int64_t)c * qd + h * D : (kind == 1 ? a.k : a.v) + (int64_t)c * kvd + h * D;
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

/* attention (fp4p_attend), in four launches over (column, query head) */
typedef struct stk_att_args {
    const float *q;
    const uint16_t *kc, *vc; /* this layer's slot 0, position 0 */
    int64_t slot_stride;
    float *scores, *strips, *den;
    float *o;
    int64_t n_ctx;
    int nh, nkv, d;
    float scale;
    stk_cols cols;
} stk_att_args;

/* s_j = fp4p_dot(q, k_j) * scale: one warp per position j, the warps of gridDim.x blocks striding
 * over the positions 0..pos (the grid does not depend on the position: graphs replay it); the
 * lane's q values (q[lane], q[lane+32], ...) stay in registers */
#define STK_MAX_DL (FP4_ARCH_MAX_HEAD_DIM / 32)
static __global__ void stk_att_scores(stk_att_args a) {
    const int lane = threadIdx.x & 31, D = a.d, nd = D / 32;
    const int c = blockIdx.y / a.nh, hq = blockIdx.y % a.nh, hk = hq / (a.nh / a.nkv);
    const int64_t pos = a.cols.pos[c], kvd = (int64_t)a.nkv * D;
    const float *q = a.q + (int64_t)c * a.nh * D + hq * D;
    float qv[STK_MAX_DL];
#pragma unroll
    for (int m = 0; m < STK_MAX_DL; m++)
        qv[m] = m < nd ? q[lane + 32 * m] : 0.0f;
    const uint16_t *k0 = a.kc + a.cols.slot[c] * a.slot_stride + hk * D + lane;
    float *srow = a.scores + ((int64_t)c * a.nh + hq) * a.n_ctx;
    for (int64_t j = (int64_t)blockIdx.x * STK_SCORE_WARPS + (threadIdx.x >> 5); j <= pos;
         j += (int64_t)gridDim.x * STK_SCORE_WARPS) {
        const uint16_t *kr = k0 + j * kvd;
        float p = 0.0f;
#pragma unroll
        for (int m = 0; m < STK_MAX_DL; m++)
            if (m < nd) p = fp4p_add(p, fp4p_mul(qv[m], stk_h2f(kr[32 * m])));
        p = stk_warp_butterfly(p);
        if (lane == 0) srow[j] = fp4p_mul(p, a.scale);
    }
}

/* m = max s_j; e_j = fp4p_exp(s_j - m) in place; den = the pinned sum of e_j (warp 0) */
static __global__ void stk_att_softmax(stk_att_args a) {
    __shared__ float red[32];
    const int c = blockIdx.x / a.nh, hq = blockIdx.x % a.nh;
    const int64_t n = (int64_t)a.cols.pos[c] + 1;
    float *s = a.scores + ((int64_t)c * a.nh + hq) * a.n_ctx;
    float m = __int_as_float((int)0xFF800000u); /* -inf */
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        m = fmaxf(m, s[j]); /* the max is order-free */
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
        m = fmaxf(m, red[w]);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        s[j] = fp4p_exp(fp4p_sub(s[j], m));
    __syncthreads(); /* global writes of the block visible to warp 0 */
    if (threadIdx.x < 32) {
        float p = 0.0f;
#pragma unroll 8
        for (int64_t j = threadIdx.x; j < n; j += 32)
            p = fp4p_add(p, s[j]);
        p = stk_warp_butterfly(p);
        if (threadIdx.x == 0) a.den[(int64_t)c * a.nh + hq] = p;
    }
}

/* strip l (block x) of o[d]: the sum over j = l, l+32, ... of e_j * v_j[d], in order; D threads */
static __global__ void stk_att_strips(stk_att_args a) {
    const int l = blockIdx.x, d = threadIdx.x, D = a.d;
    const int c = blockIdx.y / a.nh, hq = blockIdx.y % a.nh, hk = hq / (a.nh / a.nkv);
    const int64_t n = (int64_t)a.cols.pos[c] + 1, kvd = (int64_t)a.nkv * D;
    const float *e = a.scores + ((int64_t)c * a.nh + hq) * a.n_ctx;
    const uint16_t *vr = a.vc + a.cols.slot[c] * a.slot_stride + hk * D + d;
    float p = 0.0f;
#pragma unroll 8
    for (int64_t j = l; j < n; j += STK_LANES)
        p = fp4p_add(p, fp4p_mul(e[j], stk_h2f(vr[j * kvd])));
    a.strips[(((int64_t)c * a.nh + hq) * STK_LANES + l) * D + d] = p;
}

/* o[d] = butterfly(strips) / den; D threads */
static __global__ void stk_att_out(stk_att_args a) {
    const int d = threadIdx.x, D = a.d;
    const int64_t ch = blockIdx.x; /* c * nh + hq */
    float p[STK_LANES];
#pragma unroll
    for (int l = 0; l < STK_LANES; l++)
        p[l] = a.strips[(ch * STK_LANES + l) * D + d];
#pragma unroll
    for (int off = STK_LANES / 2; off >= 1; off >>= 1)
#pragma unroll
        for (int l = 0; l < off; l++)
            p[l] = fp4p_add(p[l], p[l + off]);
    a.o[ch * D + d] = fp4p_div(p[0], a.den[ch]);
}

/* g[i] = swiglu(g[i], u[i]) */
static __global__ void stk_swiglu(float *g, const float *u, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] = fp4p_swiglu(g[i], u[i]);
}

#endif
