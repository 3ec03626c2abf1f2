/* step_kernels.cuh — the device kernels of THE STEP (backend.h) outside the projections, for
 * step.cu. Every float operation is pinned.h's (fp4p_*: __fadd_rn/__fmul_rn/__fdiv_rn/
 * __fsqrt_rn, never contracted: the library is built with --fmad=false), and every reduction is
 * pinned.h's 32-lane one: lane l adds terms l, l+32, l+64, ... in increasing order from +0.0f, then
 * the xor butterfly (off = 16, 8, 4, 2, 1). A "lane" here is either a lane of a warp (reductions
 * over head_dim or hidden) or one of 32 blocks (attention's sum over positions), never anything
 * else; so exact mode gives the CPU's bits. Columns read their token, slot, position and logits row
 * from the device (st_in), so one launch sequence serves any columns of a given count: what the
 * CUDA graph of a decode step replays.
 *
 * Layouts: x, t [col][H]; q, o [col][NH*D]; k, v [col][NKV*D]; g, u [col][F];
 * KV cache [slot][layer][pos][NKV*D] halves; scores [attention block row][n_ctx][STK_GB] (below);
 * strips [col][NH][32][D].
 * (With fused projections q/k/v share rows of qd + 2*kvd floats and g/u rows of 2F: strides below.)
 *
 * Programmatic dependent launch: step.cu launches every kernel here with programmatic stream
 * serialization, so it may be resident before its predecessor has finished; each one therefore
 * starts with STK_PDL_ENTRY (let its own successor queue, then wait for the predecessor grid and
 * its memory) before it reads or writes anything another kernel touches. */
#ifndef FP4_RT_STEP_KERNELS_CUH
#define FP4_RT_STEP_KERNELS_CUH

#include "cuda/act_warp.cuh"
#include "cuda/common.cuh"
#include "fp4lane_runtime.h"
#include "format/pinned.h"
#include <cuda_fp16.h>
#include <stdint.h>

#define STK_LANES 32

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
#define STK_NORM_PW 4 /* row elements per thread in registers (the w prefetch); the rest in a loop */
static __global__ __launch_bounds__(STK_NORM_THREADS) void stk_add_rmsnorm(float *x, const float *t,
                                                                           const float *__restrict__ w,
                                                                           int len, float eps, float *y,
                                                                           const int32_t *lrow) {
    extern __shared__ float xs[];
    __shared__ float inv_s;
    const int tid = threadIdx.x, bd = blockDim.x;
    float wr[STK_NORM_PW]; /* w is a weight (no kernel writes it): requested before the wait */
#pragma unroll
    for (int k = 0; k < STK_NORM_PW; k++)
        wr[k] = tid + k * bd < len ? __ldg(w + tid + k * bd) : 0.0f;
    STK_PDL_ENTRY();
    const int64_t r = blockIdx.x;
    const int64_t dst = lrow ? lrow[r] : r;
    if (dst < 0) return; /* uniform over the block */
    float *xr = x + r * len;
    const float *tr = t ? t + r * len : NULL;
    float xv[STK_NORM_PW], tv[STK_NORM_PW];
#pragma unroll
    for (int k = 0; k < STK_NORM_PW; k++) { /* every load first, then the adds */
        const int i = tid + k * bd;
        xv[k] = i < len ? xr[i] : 0.0f;
        tv[k] = tr && i < len ? tr[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < STK_NORM_PW; k++) {
        const int i = tid + k * bd;
        if (i < len) {
            float v = xv[k];
            if (tr) {
                v = fp4p_add(v, tv[k]);
                xr[i] = v;
            }
            xs[i] = v;
        }
    }
    for (int i = tid + STK_NORM_PW * bd; i < len; i += bd) {
        float v = xr[i];
        if (tr) {
            v = fp4p_add(v, tr[i]);
            xr[i] = v;
        }
        xs[i] = v;
    }
    __syncthreads();
    if (tid < 32) {
        float p = 0.0f;
#pragma unroll 8
        for (int i = tid; i < len; i += 32)
            p = fp4p_add(p, fp4p_mul(xs[i], xs[i]));
        p = stk_warp_butterfly(p);
        if (tid == 0) inv_s = fp4p_div(1.0f, fp4p_sqrt(fp4p_add(fp4p_div(p, (float)len), eps)));
    }
    __syncthreads();
    const float inv = inv_s;
    float *yr = y + dst * len;
#pragma unroll
    for (int k = 0; k < STK_NORM_PW; k++) {
        const int i = tid + k * bd;
        if (i < len) yr[i] = fp4p_mul(fp4p_mul(xs[i], inv), wr[k]);
    }
    for (int i = tid + STK_NORM_PW * bd; i < len; i += bd)
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
    int64_t ring; /* Gemma 3's local layer: its ring of R rows (backend.h, fp4_rt_kv_ring), each
                     position at rows p % R and p % R + R; 0: row p */
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
        const int64_t p = a.cols.pos[c], row = a.ring ? p % a.ring : p;
        const int64_t at = (int64_t)a.cols.slot[c] * a.slot_stride + row * kvd + h * D + d;
        const uint16_t hv = fp4p_f32_to_f16(val);
        (kind == 1 ? a.kc : a.vc)[at] = hv;
        if (a.ring) (kind == 1 ? a.kc : a.vc)[at + a.ring * kvd] = hv;
    }
}

/* attention (fp4p_attend) in two launches (stk_attention below). A block serves one column and a
 * group of up to STK_GB query heads of one KV head (GQA: the heads hk*G .. hk*G+G-1 read the same K
 * and V rows, which the block reads once for all of them). Block row y = (c * nkv + hk) * ngb + gb,
 * ngb = ceil(G / STK_GB). Neither grid depends on a position (graphs replay them); every block reads
 * its column's position from the device.
 *   stk_att_scores: s_j = fp4p_dot(q, k_j) * scale for j <= pos. A team of 4 threads computes one
 *     position: team thread t holds pinned lanes 8t..8t+7 of the dot (d = 8t+i+32m: one 16-byte K
 *     load per m), adds its lanes' products in increasing m from +0.0f, and the butterfly's steps
 *     16 and 8 are xor shuffles between team threads 2 and 1 apart (lane 8t+i meets 8(t^2)+i, then
 *     8(t^1)+i), steps 4, 2, 1 are in registers: the pinned dot. The teams of gridDim.x blocks
 *     stride over the positions; each block writes its maximum per head (the max is order-free).
 *   stk_att_pv: block l (0..31) of a group is lane l of the pinned reductions over positions: with
 *     m = the max of the blocks' maxima, it forms e_j = fp4p_exp(s_j - m) for j = l, l+32, ... in
 *     increasing order and adds them (den strip l) and e_j * v_j[d] (o strip l, per d; thread d),
 *     each from +0.0f. The V rows and scores of lane l come through shared memory, STK_PV_STAGES
 *     chunks of rows in flight (16-byte cp.async: a position's STK_GB scores sit side by side), so
 *     the adds never wait on one load at a time. Everything another kernel wrote is read through L2
 *     (cp.async.cg, __ldcg), never a possibly stale L1 line. The last
 *     of the 32 blocks to finish (a ticket, reset by that block) meets the strips in the butterfly
 *     and writes o[d] = sum / den. The same operations in the same order as fp4p_attend: exact
 *     mode keeps the CPU's bits. */
#define STK_GB 4           /* query heads per attention block */
#define STK_MAX_GX 64      /* score blocks per group (their per-head maxima are kept) */
#define STK_SC_THREADS 256 /* score block: 64 teams of 4 threads */
#define STK_SC_TEAMS (STK_SC_THREADS / 4)
#define STK_SC_RESIDENT 2        /* score blocks resident per SM (launch bounds; the grid planner) */
#define STK_PV_STAGES 4          /* chunks of a lane's rows in flight */
#define STK_PV_STAGE_HALVES 4096 /* V halves per chunk: 4096 / max(D, 64) rows */
typedef struct stk_att_args {
    const float *q;
    int64_t q_cs;            /* floats between the columns of q */
    const uint16_t *kc, *vc; /* this layer's slot 0, position 0 */
    int64_t slot_stride;
    float *scores;    /* [block row][n_ctx][STK_GB]: a group's heads side by side per position */
    float *bmax;      /* [col][NH][STK_MAX_GX]: the score blocks' maxima */
    float *strips;    /* [col][NH][32][D] */
    float *den;       /* [col][NH][32] */
    unsigned *ticket; /* [col][NKV][ngb], zero between launches */
    float *o;
    int64_t n_ctx;
    int nh, nkv, d, gx;
    float scale;
    stk_cols cols;
    int64_t win, ring; /* Gemma 3's local layer: the window W and its ring (stk_att_span); 0, 0 else */
} stk_att_args;

/* The run of cache rows column c attends to: its first row (from the slot's start of the layer)
 * in *row0, and the index of its last position in the run (returned). Without a window the run
 * is positions 0 .. p; a local layer's is max(0, p - W + 1) .. p, one run in its ring (backend.h,
 * THE STEP, Gemma 3 h). The kernels' lanes count from the run's start, as fp4p_attend's do over
 * the rows the CPU hands it, so the bits are a full cache's. */
static __device__ __forceinline__ int64_t stk_att_span(const stk_att_args &a, int c, int64_t *row0) {
    const int64_t p = a.cols.pos[c], first = a.win && p >= a.win ? p - a.win + 1 : 0;
    *row0 = a.ring ? first % a.ring : first;
    return p - first;
}

#define STK_MAX_DL (FP4_ARCH_MAX_HEAD_DIM / 32)
static __device__ __forceinline__ void stk_att_group(const stk_att_args &a, int y, int *c, int *hk, int *h0,
                                                     int *nhb) {
    const int G = a.nh / a.nkv, ngb = (G + STK_GB - 1) / STK_GB, gb = y % ngb;
    *hk = (y / ngb) % a.nkv;
    *c = y / (ngb * a.nkv);
    *h0 = *hk * G + gb * STK_GB;
    *nhb = G - gb * STK_GB < STK_GB ? G - gb * STK_GB : STK_GB;
}

static __device__ __forceinline__ float stk_neg_inf() {
    return __int_as_float((int)0xFF800000u);
}

/* one position's scores for the block's heads: k holds this team thread's K halves d = 8t+i+32m;
 * p[g][i] is head g's pinned lane 8t+i, adding in increasing m from +0.0f */
template <int NDL>
static __device__ __forceinline__ void stk_score_row(const stk_att_args &a, const float *qs, const uint4 *k,
                                                     int nhb, int t, bool valid, int64_t j, float *srow,
                                                     float *mx) {
    const int D = a.d, nd = D / 32;
    float p[STK_GB][8];
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            p[g][i] = 0.0f;
#pragma unroll
    for (int m = 0; m < NDL; m++) {
        if (m >= nd) break;
        float kf[8];
        fp4_widen8<false>(k[m], kf);
#pragma unroll
        for (int g = 0; g < STK_GB; g++) {
            if (g >= nhb) break; /* uniform over the block */
            const float4 qa = *reinterpret_cast<const float4 *>(qs + g * D + 32 * m + 8 * t);
            const float4 qb = *reinterpret_cast<const float4 *>(qs + g * D + 32 * m + 8 * t + 4);
            const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
                p[g][i] = fp4p_add(p[g][i], fp4p_mul(qv[i], kf[i]));
        }
    }
#pragma unroll
    for (int g = 0; g < STK_GB; g++) {
        if (g >= nhb) break;
#pragma unroll
        for (int i = 0; i < 8; i++) /* step 16: lane 8t+i meets 8(t^2)+i */
            p[g][i] = fp4p_add(p[g][i], __shfl_xor_sync(0xFFFFFFFFu, p[g][i], 2));
#pragma unroll
        for (int i = 0; i < 8; i++) /* step 8: 8(t^1)+i */
            p[g][i] = fp4p_add(p[g][i], __shfl_xor_sync(0xFFFFFFFFu, p[g][i], 1));
#pragma unroll
        for (int i = 0; i < 4; i++) /* steps 4, 2, 1: in registers */
            p[g][i] = fp4p_add(p[g][i], p[g][i + 4]);
        p[g][0] = fp4p_add(p[g][0], p[g][2]);
        p[g][1] = fp4p_add(p[g][1], p[g][3]);
        const float s = fp4p_mul(fp4p_add(p[g][0], p[g][1]), a.scale);
        if (valid) {
            if (t == g) srow[j * STK_GB + g] = s;
            mx[g] = fmaxf(mx[g], s);
        }
    }
}

/* the block's maximum per head from each thread's mx (the max is order-free): the warp's by xor
 * shuffles, then thread g < STK_GB takes head g's over the NW warps (wmax: NW x STK_GB shared
 * floats); other threads get -inf. Every thread of the block calls it (a barrier inside). */
template <int NW>
static __device__ __forceinline__ float stk_block_head_max(float (&mx)[STK_GB], float (*wmax)[STK_GB]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int g = 0; g < STK_GB; g++) {
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
            mx[g] = fmaxf(mx[g], __shfl_xor_sync(0xFFFFFFFFu, mx[g], off));
        if (lane == 0) wmax[warp][g] = mx[g];
    }
    __syncthreads();
    float m = stk_neg_inf();
    if ((int)threadIdx.x < STK_GB) {
        m = wmax[0][threadIdx.x];
        for (int w = 1; w < NW; w++)
            m = fmaxf(m, wmax[w][threadIdx.x]);
    }
    return m;
}

/* NDL: an upper bound of D/32 (16-byte K loads per team thread); the step picks 2, 4 or STK_MAX_DL */
template <int NDL>
static __global__ __launch_bounds__(STK_SC_THREADS,
                                    NDL <= 4 ? STK_SC_RESIDENT : 1) void stk_att_scores(stk_att_args a) {
    __shared__ __align__(16) float qs[STK_GB * FP4_ARCH_MAX_HEAD_DIM];
    __shared__ float wmax[STK_SC_THREADS / 32][STK_GB];
    STK_PDL_ENTRY();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = lane & 3, D = a.d, nd = D / 32;
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    int64_t row0;
    const int64_t pos = stk_att_span(a, c, &row0), kvd = (int64_t)a.nkv * D;
    const float *q = a.q + (int64_t)c * a.q_cs + (int64_t)h0 * D;
    for (int i = threadIdx.x; i < STK_GB * D; i += blockDim.x)
        qs[i] = i < nhb * D ? __ldcg(q + i) : 0.0f;
    __syncthreads();
    float mx[STK_GB];
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        mx[g] = stk_neg_inf();
    const uint16_t *k0 = a.kc + a.cols.slot[c] * a.slot_stride + row0 * kvd + hk * D + 8 * t;
    float *srow = a.scores + (int64_t)blockIdx.y * a.n_ctx * STK_GB;
    /* warp-uniform trip counts (the shuffles need the whole warp): jb is the warp's first position,
     * a team past pos reduces row pos and drops the result; the next trip's K row is loaded before
     * this trip's is reduced */
    const int64_t step = (int64_t)gridDim.x * STK_SC_TEAMS,
                  jb0 = (int64_t)blockIdx.x * STK_SC_TEAMS + 8 * warp;
    uint4 kn[NDL];
    if (jb0 <= pos) {
        const int64_t j = jb0 + (lane >> 2);
        const uint16_t *r = k0 + (j <= pos ? j : pos) * kvd;
#pragma unroll
        for (int m = 0; m < NDL; m++)
            if (m < nd) kn[m] = __ldcg(reinterpret_cast<const uint4 *>(r + 32 * m));
    }
    for (int64_t jb = jb0; jb <= pos; jb += step) {
        const int64_t j = jb + (lane >> 2), jn = j + step;
        uint4 k[NDL];
#pragma unroll
        for (int m = 0; m < NDL; m++)
            k[m] = kn[m];
        if (jb + step <= pos) {
            const uint16_t *r = k0 + (jn <= pos ? jn : pos) * kvd;
#pragma unroll
            for (int m = 0; m < NDL; m++)
                if (m < nd) kn[m] = __ldcg(reinterpret_cast<const uint4 *>(r + 32 * m));
        }
        stk_score_row<NDL>(a, qs, k, nhb, t, j <= pos, j, srow, mx);
    }
    const float m = stk_block_head_max<STK_SC_THREADS / 32>(mx, wmax);
    if ((int)threadIdx.x < nhb) a.bmax[((int64_t)c * a.nh + h0 + threadIdx.x) * STK_MAX_GX + blockIdx.x] = m;
}

/* rows of V per pipeline chunk, and the dynamic shared memory of stk_att_pv */
static __host__ __device__ __forceinline__ int stk_pv_rows(int D) {
    return STK_PV_STAGE_HALVES / (D > 64 ? D : 64);
}
static __host__ __device__ __forceinline__ int stk_pv_stage_bytes(int D) {
    return stk_pv_rows(D) * (D * 2 + STK_GB * 4);
}

/* lane l's chunk k (rows u = k*R .. k*R+R-1, positions l + 32u) into its stage: V rows, scores */
static __device__ __forceinline__ void stk_pv_issue(const stk_att_args &a, unsigned char *stage,
                                                    const uint16_t *vl, const float *sl, int64_t nu,
                                                    int64_t k) {
    const int D = a.d, R = stk_pv_rows(D), per = D / 8;
    const int64_t u0 = k * R;
    if (u0 < nu) {
        const int rows = nu - u0 < R ? (int)(nu - u0) : R;
        const int64_t kvd = (int64_t)a.nkv * D;
        uint16_t *vs = reinterpret_cast<uint16_t *>(stage);
        for (int i = threadIdx.x; i < rows * per; i += blockDim.x) {
            const int r = i / per, p = i - r * per;
            fp4_cp_async16(vs + r * D + 8 * p, vl + (u0 + r) * 32 * kvd + 8 * p);
        }
        float *ss = reinterpret_cast<float *>(stage + R * D * 2);
        for (int r = threadIdx.x; r < rows; r += blockDim.x) /* a position's STK_GB scores: 16 bytes */
            fp4_cp_async16(ss + r * STK_GB, sl + (u0 + r) * 32 * STK_GB);
    }
    fp4_cp_async_commit(); /* an empty group past the last chunk keeps the count */
}

/* the pinned butterfly of 32 lane partials held in registers (fp4p_butterfly's pairs) */
static __device__ __forceinline__ float stk_butterfly32(float (&v)[STK_LANES]) {
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

/* the pinned butterfly over 32 strips p[k * stride] (written by other blocks: read from L2) */
static __device__ __forceinline__ float stk_strip_butterfly(const float *p, int64_t stride) {
    float v[STK_LANES];
#pragma unroll
    for (int k = 0; k < STK_LANES; k++)
        v[k] = __ldcg(p + k * stride);
    return stk_butterfly32(v);
}

/* D threads; block (l, group); stk_pv_stage_bytes(D) * NS bytes of dynamic shared memory */
template <int NS> static __global__ __launch_bounds__(FP4_ARCH_MAX_HEAD_DIM) void stk_att_pv(stk_att_args a) {
    extern __shared__ __align__(16) unsigned char pv_smem[];
    __shared__ float ms[STK_GB], dens[STK_GB];
    __shared__ int last_s;
    STK_PDL_ENTRY();
    const int l = blockIdx.x, d = threadIdx.x, D = a.d, R = stk_pv_rows(D), SB = stk_pv_stage_bytes(D);
    int c, hk, h0, nhb;
    stk_att_group(a, blockIdx.y, &c, &hk, &h0, &nhb);
    int64_t row0;
    const int64_t n = stk_att_span(a, c, &row0) + 1, nu = (n - l + 31) / 32; /* lane l's positions */
    const int64_t ch0 = (int64_t)c * a.nh + h0; /* (column, first head of the group) */
    const int64_t nchunk = (nu + R - 1) / R;
    const uint16_t *vl = a.vc + a.cols.slot[c] * a.slot_stride + (row0 + l) * (int64_t)a.nkv * D + hk * D;
    const float *sl = a.scores + ((int64_t)blockIdx.y * a.n_ctx + l) * STK_GB;
#pragma unroll
    for (int k = 0; k < NS - 1; k++)
        stk_pv_issue(a, pv_smem + k * SB, vl, sl, nu, k);
    if (threadIdx.x < 32) { /* the max of the score blocks' maxima, per head (order-free) */
#pragma unroll
        for (int g = 0; g < STK_GB; g++) {
            float m = stk_neg_inf();
            if (g < nhb)
                for (int b = threadIdx.x; b < a.gx; b += 32)
                    m = fmaxf(m, __ldcg(a.bmax + (ch0 + g) * STK_MAX_GX + b));
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
            if (threadIdx.x == 0) ms[g] = m;
        }
    }
    float p[STK_GB], den = 0.0f;
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        p[g] = 0.0f;
    const int dg = d & 3; /* thread d < nhb keeps head d's den strip */
    for (int64_t k = 0; k < nchunk; k++) {
        fp4_cp_async_wait<NS - 2>();
        __syncthreads(); /* chunk k is in; every thread is done with chunk k-1's stage */
        stk_pv_issue(a, pv_smem + ((k + NS - 1) % NS) * SB, vl, sl, nu, k + NS - 1);
        unsigned char *stage = pv_smem + (k % NS) * SB;
        const int rows = nu - k * R < R ? (int)(nu - k * R) : R;
        float *es = reinterpret_cast<float *>(stage + R * D * 2);
        for (int i = threadIdx.x; i < rows * STK_GB; i += blockDim.x) {
            const int g = i % STK_GB;
            es[i] = g < nhb ? fp4p_exp(fp4p_sub(es[i], ms[g])) : 0.0f;
        }
        __syncthreads();
        const uint16_t *vs = reinterpret_cast<const uint16_t *>(stage) + d;
#pragma unroll 8
        for (int r = 0; r < rows; r++) {
            const float v = stk_h2f(vs[r * D]);
            const float4 e4 = reinterpret_cast<const float4 *>(es)[r];
            const float e[STK_GB] = {e4.x, e4.y, e4.z, e4.w};
#pragma unroll
            for (int g = 0; g < STK_GB; g++)
                if (g < nhb) p[g] = fp4p_add(p[g], fp4p_mul(e[g], v));
            den = fp4p_add(den, dg == 0 ? e4.x : dg == 1 ? e4.y : dg == 2 ? e4.z : e4.w);
        }
    }
#pragma unroll
    for (int g = 0; g < STK_GB; g++)
        if (g < nhb) a.strips[((ch0 + g) * STK_LANES + l) * D + d] = p[g];
    if (d < nhb) a.den[(ch0 + d) * STK_LANES + l] = den;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_s = atomicAdd(&a.ticket[blockIdx.y], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last_s) return;
    __threadfence();
    for (int g = d >> 5; g < nhb; g += blockDim.x >> 5) { /* warp g: head g's den strips, a warp's
                                                             butterfly (lane l holds strip l) */
        const float v = stk_warp_butterfly(__ldcg(a.den + (ch0 + g) * STK_LANES + (d & 31)));
        if ((d & 31) == 0) dens[g] = v;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < STK_GB; g += 2) { /* two heads' strips in flight at a time */
        if (g >= nhb) break;              /* uniform over the block */
        const int g2 = g + 1 < nhb ? g + 1 : g;
        const float s1 = stk_strip_butterfly(a.strips + (ch0 + g) * STK_LANES * D + d, D);
        const float s2 = stk_strip_butterfly(a.strips + (ch0 + g2) * STK_LANES * D + d, D);
        a.o[(ch0 + g) * D + d] = fp4p_div(s1, dens[g]);
        if (g2 != g) a.o[(ch0 + g2) * D + d] = fp4p_div(s2, dens[g2]);
    }
    if (threadIdx.x == 0) a.ticket[blockIdx.y] = 0u;
}

/* The attention grids of n columns: groups (block rows) and score blocks per group (at most
 * STK_SC_RESIDENT per SM in all but at least one per group, at most STK_MAX_GX, no more than n_ctx
 * needs); they depend on n, the shape, n_ctx and the SM count only. */
static inline int64_t stk_att_groups(int64_t n, int nh, int nkv) {
    return n * nkv * ((nh / nkv + STK_GB - 1) / STK_GB);
}
static inline int stk_att_gx(int64_t groups, int64_t n_ctx, int sms) {
    const int64_t want = STK_SC_RESIDENT * (int64_t)sms / groups; /* one wave */
    const int64_t need = (n_ctx + STK_SC_TEAMS - 1) / STK_SC_TEAMS;
    const int64_t gx = want < need ? want : need;
    return gx < 1 ? 1 : gx > STK_MAX_GX ? STK_MAX_GX : (int)gx;
}

/* The two launches of one layer's attention over n columns (a.gx is set here). */
static inline fp4_status stk_attention(stk_att_args a, int64_t n, cudaStream_t stream) {
    const int64_t groups = stk_att_groups(n, a.nh, a.nkv);
    const int gx = stk_att_gx(groups, a.n_ctx, fp4_cu_sm_count());
    a.gx = gx;
    const dim3 sg((unsigned)gx, (unsigned)groups), sb(STK_SC_THREADS);
    fp4_status st = a.d <= 64    ? fp4_cu_launch(sg, sb, 0, stream, 1, stk_att_scores<2>, a)
                    : a.d <= 128 ? fp4_cu_launch(sg, sb, 0, stream, 1, stk_att_scores<4>, a)
                                 : fp4_cu_launch(sg, sb, 0, stream, 1, stk_att_scores<STK_MAX_DL>, a);
    if (st) return st;
    return fp4_cu_launch(dim3(STK_LANES, (unsigned)groups), dim3((unsigned)a.d),
                         (size_t)STK_PV_STAGES * stk_pv_stage_bytes(a.d), stream, 1,
                         stk_att_pv<STK_PV_STAGES>, a);
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

/* One column: a[f] = swiglu(g[f], u[f]) for f < F (stk_swiglu's values) and, in the same kernel, a's
 * activation pass for the down projection (act_warp.cuh, the operations of q8k.cu / act16_kernel):
 * EXACT the Q8_K int8 values in element order, else int16, and one step a super-block, for nsb
 * super-blocks (zeros past F). One warp per super-block: the bytes of stk_swiglu followed by the
 * separate pass, one launch and one f32 round trip fewer. */
template <bool EXACT>
static __global__ void stk_swiglu_act(float *a, void *q, float *d, const float *g, const float *u, int64_t F,
                                      int64_t nsb) {
    STK_PDL_ENTRY();
    const int lane = threadIdx.x & 31;
    const int64_t sb = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (sb >= nsb) return;
    const int64_t k = sb * 256 + lane * 8;
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        v[j] = k + j < F ? fp4p_swiglu(g[k + j], u[k + j]) : 0.0f;
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

#endif
