/* mla.cuh — DeepSeek-V3's multi-head latent attention on the device (THE STEP, latent attention:
 * backend.h), included by step.cu after its helpers (proj, add_norm, STK_LAUNCH, prof_mark). The
 * twin of src/cpu/mla.c, the absorbed form for every column, so a prompt's bits do not depend on
 * how it is chunked, and the CPU's bits in exact mode:
 *   1. q = q_b(rmsnorm(q_a(h))) (or q_proj(h)), kv = kv_a(h): projections through fp4_cuda_project;
 *   2. mla_rmsnorm: q_a's and kv's latent part normed in place (fp4p_rmsnorm's order);
 *   3. mla_prep: the rope part of kv and of every head's q (de-interleaved first where the
 *      checkpoint's rope_interleave says), the column's cache row written (kv_lora_rank + qk_rope
 *      halves: the first fp4_arch_kv_dim in K, the rest in V, zero-padded, the CPU's pages' rows);
 *   4. mla_attend: one block per (column, head): the absorbed query [W_UK^T q_nope, q_pe], the
 *      pinned attention over the slot's rows 0..pos (fp4p_attend's order over W values, its value
 *      the first kv_lora_rank of each row), then W_UV;
 *   5. o_proj.
 * Every reduction is pinned.h's: a warp's lane l sums the terms l, l + 32, ... in order from +0,
 * then the xor butterfly (stk_warp_butterfly), which is fp4p_dot / fp4p_sum bit for bit. */
#ifndef FP4_CUDA_STEP_MLA_CUH
#define FP4_CUDA_STEP_MLA_CUH

#include "cuda/step/mla_impl.cuh"

/* fp4p_dot(a, b, n) on one warp (every lane gets it) */
static __device__ __forceinline__ float mla_warp_dot(const float *a, const float *b, int64_t n, int lane) {
    float p = 0.0f;
    for (int64_t i = lane; i < n; i += 32)
        p = fp4p_add(p, fp4p_mul(a[i], b[i]));
    return stk_warp_butterfly(p);
}

/* x[c * stride + i] = fp4p_rmsnorm(x[c * stride ..], w, len, eps) in place, one block per column */
static __global__ __launch_bounds__(MLA_THREADS) void mla_rmsnorm(float *x, int64_t stride, int64_t len,
                                                                  const float *w, float eps) {
    STK_PDL_ENTRY();
    __shared__ float inv;
    float *r = x + (int64_t)blockIdx.x * stride;
    if (threadIdx.x < 32) {
        const float ss = mla_warp_dot(r, r, len, threadIdx.x);
        if (threadIdx.x == 0) inv = fp4p_div(1.0f, fp4p_sqrt(fp4p_add(fp4p_div(ss, (float)len), eps)));
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
        r[i] = fp4p_mul(fp4p_mul(r[i], inv), w[i]);
}

typedef struct mla_args {
    const float *q;    /* [col][NH][dn + dr]                           */
    float *q_rw;       /* the same, written by mla_prep                 */
    float *kv;         /* [col][W]: kv_a's rows, the latent part normed */
    uint16_t *kc, *vc; /* layer L's rows of slot 0 (kd halves each)     */
    int64_t slot_stride;
    const float *cs, *sn; /* the rope table [pos][dr / 2]               */
    const float *kvb, *ukt;
    float *sc; /* scores [col][NH][n_ctx]                              */
    float *o;  /* [col][NH][dv]                                        */
    int64_t n_ctx, R, dr, dn, dv, NH, W, kd;
    int interleave;
    float scale;
    stk_cols cols;
} mla_args;

/* one cache row's value d (position j of the row run from k0 / v0) */
static __device__ __forceinline__ float mla_row(const mla_args &a, const uint16_t *k0, const uint16_t *v0,
                                                int64_t j, int64_t d) {
    return fp4p_f16_to_f32(d < a.kd ? k0[j * a.kd + d] : v0[j * a.kd + d - a.kd]);
}

/* One block per column: rope of the kv row's last dr values and of every head's q_pe (the CPU's
 * rope_part: de-interleave, then fp4p_rope; the inputs staged in shared memory first), then the
 * column's cache row. Shared memory: (NH + 1) dr floats. */
static __global__ __launch_bounds__(MLA_THREADS) void mla_prep(mla_args a) {
    STK_PDL_ENTRY();
    extern __shared__ float pe[]; /* [NH + 1][dr]: q_pe of each head, then k_pe */
    const int64_t c = blockIdx.x, qd = a.dn + a.dr, half = a.dr / 2, pos = a.cols.pos[c];
    float *kv = a.kv + c * a.W, *q = a.q_rw + c * a.NH * qd;
    for (int64_t i = threadIdx.x; i < (a.NH + 1) * a.dr; i += blockDim.x) {
        const int64_t h = i / a.dr, d = i % a.dr;
        pe[i] = h < a.NH ? q[h * qd + a.dn + d] : kv[a.R + d];
    }
    __syncthreads();
    const float *cs = a.cs + pos * half, *sn = a.sn + pos * half;
    for (int64_t i = threadIdx.x; i < (a.NH + 1) * half; i += blockDim.x) {
        const int64_t h = i / half, k = i % half;
        const float *x = pe + h * a.dr;
        const float x0 = a.interleave ? x[2 * k] : x[k], x1 = a.interleave ? x[2 * k + 1] : x[k + half];
        float *y = h < a.NH ? q + h * qd + a.dn : kv + a.R;
        y[k] = fp4p_sub(fp4p_mul(x0, cs[k]), fp4p_mul(x1, sn[k]));
        y[k + half] = fp4p_add(fp4p_mul(x1, cs[k]), fp4p_mul(x0, sn[k]));
    }
    __syncthreads();
    const int64_t at = a.cols.slot[c] * a.slot_stride + pos * a.kd;
    for (int64_t i = threadIdx.x; i < 2 * a.kd; i += blockDim.x) {
        const uint16_t v = i < a.W ? fp4p_f32_to_f16(kv[i]) : (uint16_t)0;
        if (i < a.kd)
            a.kc[at + i] = v;
        else
            a.vc[at + i - a.kd] = v;
    }
}

/* One block per (column, head): src/cpu/mla.c's mla_rows. Shared memory: W + R floats. */
static __global__ __launch_bounds__(MLA_THREADS) void mla_attend(mla_args a) {
    STK_PDL_ENTRY();
    extern __shared__ float sm[];
    __shared__ float red[MLA_THREADS / 32 + 2];
    float *qc = sm, *ol = sm + a.W;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = MLA_THREADS / 32;
    const int64_t c = blockIdx.x, h = blockIdx.y, qd = a.dn + a.dr, n = a.cols.pos[c] + 1;
    const float *q = a.q + c * a.NH * qd + h * qd, *ut = a.ukt + h * a.R * a.dn;
    for (int64_t i = warp; i < a.R; i += nw) {
        const float v = mla_warp_dot(ut + i * a.dn, q, a.dn, lane);
        if (lane == 0) qc[i] = v;
    }
    for (int64_t i = threadIdx.x; i < a.dr; i += blockDim.x)
        qc[a.R + i] = q[a.dn + i];
    __syncthreads();
    const uint16_t *k0 = a.kc + a.cols.slot[c] * a.slot_stride, *v0 = a.vc + a.cols.slot[c] * a.slot_stride;
    float *s = a.sc + (c * a.NH + h) * a.n_ctx;
    for (int64_t j = warp; j < n; j += nw) {
        float p = 0.0f;
        for (int64_t d = lane; d < a.W; d += 32)
            p = fp4p_add(p, fp4p_mul(qc[d], mla_row(a, k0, v0, j, d)));
        p = stk_warp_butterfly(p);
        if (lane == 0) s[j] = fp4p_mul(p, a.scale);
    }
    __syncthreads();
    /* the CPU's running max (first score, then every larger one): a NaN first score stays, a later
     * NaN never wins; the sign of a zero maximum does not change any exp below */
    float mx = -INFINITY;
    for (int64_t j = 1 + threadIdx.x; j < n; j += blockDim.x)
        mx = fmaxf(mx, s[j]);
    for (int off = 16; off >= 1; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = s[0];
        for (int w = 0; w < nw && m == m; w++)
            m = red[w] > m ? red[w] : m;
        red[nw] = m;
    }
    __syncthreads();
    mx = red[nw];
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        s[j] = fp4p_exp(fp4p_sub(s[j], mx));
    __syncthreads();
    if (warp == 0) {
        float p = 0.0f;
        for (int64_t j = lane; j < n; j += 32)
            p = fp4p_add(p, s[j]);
        p = stk_warp_butterfly(p);
        if (lane == 0) red[nw + 1] = p;
    }
    __syncthreads();
    const float den = red[nw + 1];
    for (int64_t d = threadIdx.x; d < a.R; d += blockDim.x) { /* the lanes of j: fp4p_attend's value sum */
        float p[32];
#pragma unroll
        for (int l = 0; l < 32; l++)
            p[l] = 0.0f;
        for (int64_t j0 = 0; j0 < n; j0 += 32)
#pragma unroll
            for (int l = 0; l < 32; l++)
                if (j0 + l < n) p[l] = fp4p_add(p[l], fp4p_mul(s[j0 + l], mla_row(a, k0, v0, j0 + l, d)));
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
#pragma unroll
            for (int l = 0; l < off; l++)
                p[l] = fp4p_add(p[l], p[l + off]);
        ol[d] = fp4p_div(p[0], den);
    }
    __syncthreads();
    const float *uv = a.kvb + (h * (a.dn + a.dv) + a.dn) * a.R;
    float *o = a.o + c * a.NH * a.dv + h * a.dv;
    for (int64_t j = warp; j < a.dv; j += nw) {
        const float v = mla_warp_dot(uv + j * a.R, ol, a.R, lane);
        if (lane == 0) o[j] = v;
    }
}

/* Layer L's attention over n columns: s->d_h (attn-normed) -> s->d_t (o_proj's output) */
static fp4_status mla_attention(cu_state *s, int64_t L, int64_t n, const stk_cols *cols, fp4_error *err) {
    const cu_mla *m = s->mla;
    const fp4_cuda_tensor *w = s->w + L * FP4_LW_COUNT_;
    const fp4_tensor *const *hw = s->d.layer + L * FP4_LW_COUNT_;
    const float *const *v = s->dv + L * FP4_LW_COUNT_;
    const int64_t per = m->NH * (m->dn + m->dv) * m->R + m->NH * m->R * m->dn; /* one layer of d_kvb */
    fp4_status st;
    prof_mark(s, OP_QKV);
    if (m->QL) {
        if ((st = proj(s, &w[FP4_LW_Q_A], s->d_h, n, m->d_qa, hw[FP4_LW_Q_A]->name, err))) return st;
        STK_LAUNCH(err, "rt.rmsnorm",
                   fp4_cu_launch(dim3((unsigned)n), dim3(MLA_THREADS), 0, s->stream, 1, mla_rmsnorm, m->d_qa,
                                 m->QL, m->QL, v[FP4_LW_Q_A_NORM], MLA_NORM_EPS));
        if ((st = proj(s, &w[FP4_LW_Q], m->d_qa, n, s->d_q, hw[FP4_LW_Q]->name, err))) return st;
    } else if ((st = proj(s, &w[FP4_LW_Q], s->d_h, n, s->d_q, hw[FP4_LW_Q]->name, err)))
        return st;
    if ((st = proj(s, &w[FP4_LW_KV_A], s->d_h, n, m->d_kva, hw[FP4_LW_KV_A]->name, err))) return st;
    prof_mark(s, OP_PREP);
    STK_LAUNCH(err, "rt.rmsnorm",
               fp4_cu_launch(dim3((unsigned)n), dim3(MLA_THREADS), 0, s->stream, 1, mla_rmsnorm, m->d_kva,
                             m->W, m->R, v[FP4_LW_KV_A_NORM], MLA_NORM_EPS));
    const mla_args a = {s->d_q,
                        s->d_q,
                        m->d_kva,
                        s->d_kc + s->kv_off[L] * m->kd,
                        s->d_vc + s->kv_off[L] * m->kd,
                        s->kv_rows * m->kd,
                        s->d_cos,
                        s->d_sin,
                        m->d_kvb + L * per,
                        m->d_kvb + L * per + m->NH * (m->dn + m->dv) * m->R,
                        s->d_sc,
                        m->d_o,
                        s->d.n_ctx,
                        m->R,
                        m->dr,
                        m->dn,
                        m->dv,
                        m->NH,
                        m->W,
                        m->kd,
                        s->d.arch.rope_interleave,
                        s->d.attn_scale,
                        *cols};
    STK_LAUNCH(err, "rt.qkv-prep",
               fp4_cu_launch(dim3((unsigned)n), dim3(MLA_THREADS), (size_t)((m->NH + 1) * m->dr * 4),
                             s->stream, 1, mla_prep, a));
    prof_mark(s, OP_ATTN);
    STK_LAUNCH(err, "rt.attention",
               fp4_cu_launch(dim3((unsigned)n, (unsigned)m->NH), dim3(MLA_THREADS),
                             (size_t)((m->W + m->R) * 4), s->stream, 1, mla_attend, a));
    prof_mark(s, OP_O);
    return proj(s, &w[FP4_LW_O], m->d_o, n, s->d_t, hw[FP4_LW_O]->name, err);
}

#endif /* FP4_CUDA_STEP_MLA_CUH */
