/* lab_attn_old.cuh — the decode step's attention kernels before round 3 (d07eabb's
 * step_kernels.cuh: one warp per score position, 2-byte V loads per thread and position), kept
 * for attn_lab's before/after timing only; include after cuda/step/step_kernels.cuh (same args). */
#ifndef FP4_LAB_ATTN_OLD_CUH
#define FP4_LAB_ATTN_OLD_CUH
#define OLD_SCORE_WARPS 8
#define OLD_PV_CHUNK 32
template <int NDL> static __global__ void old_att_scores(stk_att_args a) {
    __shared__ float wmax[OLD_SCORE_WARPS][STK_GB];
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
    for (int64_t j = (int64_t)blockIdx.x * OLD_SCORE_WARPS + warp; j <= pos;
         j += (int64_t)gridDim.x * OLD_SCORE_WARPS) {
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
        for (int w = 1; w < OLD_SCORE_WARPS; w++)
            m = fmaxf(m, wmax[w][threadIdx.x]);
        a.bmax[((int64_t)c * a.nh + h0 + threadIdx.x) * STK_MAX_GX + blockIdx.x] = m;
    }
}

static __global__ void old_att_pv(stk_att_args a) {
    __shared__ float es[STK_GB][OLD_PV_CHUNK];
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
    for (int64_t j0 = l; j0 < n; j0 += 32 * OLD_PV_CHUNK) {
        for (int i = threadIdx.x; i < STK_GB * OLD_PV_CHUNK; i += blockDim.x) {
            const int g = i / OLD_PV_CHUNK, t = i % OLD_PV_CHUNK;
            const int64_t j = j0 + 32 * (int64_t)t;
            es[g][t] = g < nhb && j < n ? fp4p_exp(fp4p_sub(a.scores[(ch0 + g) * a.n_ctx + j], ms[g])) : 0.0f;
        }
        __syncthreads();
        const int64_t left = (n - j0 + 31) / 32;
        const int nt = left < OLD_PV_CHUNK ? (int)left : OLD_PV_CHUNK;
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

#endif
