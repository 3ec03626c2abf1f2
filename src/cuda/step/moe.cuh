/* moe.cuh — THE STEP's k'..m' (backend.h, MoE layers) on the device, included by step.cu after its
 * helpers (proj, STK_LAUNCH, prof_mark). Per MoE layer, all on the stream, no host synchronization
 * (the chosen experts never leave the device, so a decode step is one CUDA graph):
 *   1. r = project(router, h) through fp4_cuda_project (exact: dense.pinned, the CPU's bits);
 *   2. moe_route_kernel: per column, fp4p_moe_route's bits (pinned.h) -> the K experts in selection
 *      order (d_sel) and their weights (d_rw); DeepSeek-V3's groups: moe_route_group_kernel, and its
 *      shared experts (moe_shared) into d_sh;
 *   3. gate and up of every (column, choice) pair p = c * K + j by the expert d_sel[p]
 *      (fp4_cu_moe_project: one launch; steps of 2+ columns visit the pairs in expert order from the
 *      device's group table, fp4_cu_moe_group; FP4LANE_CUDA_MOE_GROUPED: one block row per chosen
 *      expert and row tile, so each chosen expert is read once), the SwiGLU (exact: with down's Q8_K
 *      pass), down of every pair -> y[p] (exact: each the bits of that expert's own one-column
 *      projection, which the CPU's grouped multi-column projection gives too; native: SPEC §6's
 *      arithmetic, the native route's tolerance);
 *   4. moe_combine_kernel: t[c][i] = fp4p_moe_combine over the column's K rows in selection order
 *      (plus the shared experts' row, one add); the next add_norm adds t to x (one f32 add, as the
 *      CPU). */
#ifndef FP4_CUDA_STEP_MOE_CUH
#define FP4_CUDA_STEP_MOE_CUH

#include "cuda/step/moe_impl.cuh"

/* One warp per column: fp4p_moe_route's bits, its loops spread over the lanes. Lane l owns experts
 * l, l+32, ... (the lanes of pinned.h's reduction), so the softmax's sum is fp4p_sum itself: each
 * lane's partial in index order from +0.0f, then the xor butterfly. Every other step is order-free
 * where the logits are finite: the largest logit (fmaxf), the exps and divisions (element-wise),
 * and each top-k pass (a lane's first index of its largest untaken value, then the warp's largest
 * value, ties to the lower index: "the first index of the largest value not yet taken"). A column
 * with a non-finite logit (NaN compares make the sequential order matter), a softmax whose largest
 * logit is a zero (its sign would be the first zero's) or K > 32 runs fp4p_moe_route itself on lane 0. */
#define MOE_ROUTE_MAX_K 32
static __global__ __launch_bounds__(32) void moe_route_kernel(const float *rl, float *rs, int64_t E, int K,
                                                              int routing, int norm, int32_t *sel,
                                                              float *rw) {
    STK_PDL_ENTRY();
    const unsigned full = 0xFFFFFFFFu;
    const int lane = threadIdx.x;
    const int64_t c = blockIdx.x;
    const float *r = rl + c * E;
    float *sc = rs + c * E, *w = rw + c * K;
    int32_t *idx = sel + c * K;
    int bad = 0;
    float mx = -INFINITY;
    for (int64_t i = lane; i < E; i += 32) {
        const float v = r[i];
        if (!isfinite(v))
            bad = 1;
        else
            mx = fmaxf(mx, v);
    }
    bad = __any_sync(full, bad);
    for (int off = 16; off >= 1; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(full, mx, off));
    if (bad || K > MOE_ROUTE_MAX_K || (routing == FP4_MOE_SOFTMAX_TOPK && mx == 0.0f)) {
        if (lane == 0) fp4p_moe_route(r, E, K, routing, norm, sc, (int *)idx, w);
        return;
    }
    const float *v = r; /* the values the top k is taken of */
    if (routing == FP4_MOE_SOFTMAX_TOPK) {
        float part = 0.0f;
        for (int64_t i = lane; i < E; i += 32) {
            const float e = fp4p_exp(fp4p_sub(r[i], mx));
            sc[i] = e;
            part = fp4p_add(part, e);
        }
        for (int off = 16; off >= 1; off >>= 1)
            part = fp4p_add(part, __shfl_xor_sync(full, part, off));
        for (int64_t i = lane; i < E; i += 32)
            sc[i] = fp4p_div(sc[i], part);
        v = sc; /* each lane reads back only what it wrote */
    }
    __shared__ int tk[MOE_ROUTE_MAX_K];
    __shared__ float tv[MOE_ROUTE_MAX_K];
    for (int j = 0; j < K; j++) {
        float bv = 0.0f;
        int bi = -1;
        for (int64_t i = lane; i < E; i += 32) {
            int taken = 0;
            for (int t = 0; t < j; t++)
                taken |= tk[t] == (int)i;
            if (taken) continue;
            const float x = v[i];
            if (bi < 0 || x > bv) bv = x, bi = (int)i;
        }
        for (int off = 16; off >= 1; off >>= 1) {
            const float ov = __shfl_xor_sync(full, bv, off);
            const int oi = __shfl_xor_sync(full, bi, off);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
        }
        if (lane == 0) tk[j] = bi, tv[j] = bv;
        __syncwarp();
    }
    /* the k weights: lane j holds choice j; the pinned sums over k <= 32 terms are one term a lane */
    float wj = 0.0f;
    if (routing == FP4_MOE_SOFTMAX_TOPK) {
        wj = lane < K ? tv[lane] : 0.0f;
        if (norm) {
            float t = fp4p_add(0.0f, wj);
            for (int off = 16; off >= 1; off >>= 1)
                t = fp4p_add(t, __shfl_xor_sync(full, t, off));
            wj = fp4p_div(wj, t);
        }
    } else {
        wj = lane < K ? fp4p_exp(fp4p_sub(tv[lane], tv[0])) : 0.0f;
        float t = fp4p_add(0.0f, wj);
        for (int off = 16; off >= 1; off >>= 1)
            t = fp4p_add(t, __shfl_xor_sync(full, t, off));
        wj = fp4p_div(wj, t);
    }
    if (lane < K) idx[lane] = tk[lane], w[lane] = wj;
}

/* DeepSeek-V3's routing (fp4p_moe_route_group: sigmoid scores, the bias for selection, the top
 * groups): one thread per column runs pinned.h's function itself, so its bits are the CPU's in
 * every case (NaN and ties included). rs: each column's scratch of 2 E + n_group floats, then its
 * topk_group group indices. */
static __global__ void moe_route_group_kernel(const float *rl, float *rs, int64_t rs_stride,
                                              const float *bias, int64_t E, int K, int64_t n_group,
                                              int64_t topk_group, int norm, float scale, int32_t *sel,
                                              float *rw, int64_t n) {
    STK_PDL_ENTRY();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    float *sc = rs + c * rs_stride;
    fp4p_moe_route_group(rl + c * E, bias, E, K, n_group, topk_group, norm, scale, sc,
                         (int *)(sc + 2 * E + n_group), (int *)(sel + c * K), rw + c * K);
}

/* t[c][i] = fp4p_moe_combine(w[c], y[c * K ..], K, H, i), plus the shared experts' sh[c][i] where
 * given (DeepSeek-V3: routed + shared, one add, then the residual's) */
static __global__ void moe_combine_kernel(float *t, const float *rw, const float *y, int K, int64_t H,
                                          int64_t n, const float *sh) {
    STK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * H) return;
    const int64_t c = i / H;
    const float v = fp4p_moe_combine(rw + c * K, y + c * K * H, K, H, i % H);
    t[i] = sh ? fp4p_add(v, sh[i]) : v;
}

/* a rank of the split step (tp.cu) holds experts [x0, x0 + EL): selg keeps the chosen experts, sel
 * gets the local ones (a pair whose expert another rank holds runs local expert 0, its output then
 * replaced by the owner's: fp4_cu_tp_moe_pick) */
static __global__ void moe_local_kernel(int32_t *sel, int32_t *selg, int64_t pairs, int64_t x0, int64_t EL) {
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pairs) return;
    const int32_t g = sel[p];
    selg[p] = g;
    sel[p] = g >= x0 && g < x0 + EL ? (int32_t)(g - x0) : 0;
}

static fp4_status moe_fail(fp4_status st, const char *name, fp4_error *err) {
    if (st == FP4_ERR_CUDA)
        return fp4_fail(err, st, NULL, name, "rt.project", "expert projection failed: %s",
                        fp4_cuda_last_error());
    return fp4_fail(err, st, NULL, name, "rt.project", "expert projection failed: %s", fp4_status_str(st));
}

/* parts w[0..nw) of every pair (xdiv: pairs per input column) -> y[0..nw); grp: the group table
 * (NULL: one column, one pair a block row) */
static fp4_status moe_project(cu_state *s, const fp4_cu_moe_part *const *w, int nw, const int32_t *grp,
                              int64_t pairs, int64_t xdiv, const float *x, float *const *y, const char *name,
                              fp4_error *err) {
    const cu_moe *m = s->moe;
    const int how = grp ? m->how : FP4_CU_MOE_PAIRS;
    const fp4_status st =
        fp4_cu_moe_project(w, nw, m->d_sel, grp, how, pairs, xdiv, x, y, m->d_q, m->q_bytes, s->stream);
    return st ? moe_fail(st, name, err) : FP4_OK;
}

/* SwiGLU of every pair's g and u, then its down projection -> d_y: where down is exact NVFP4 and
 * act_fuse is on, the SwiGLU kernel makes down's Q8_K pass too (stk_swiglu_act over the pairs'
 * rows as one run of super-blocks: FE % 256 == 0, so no super-block spans two pairs), one launch
 * fewer; else stk_swiglu, then down's own pass. The same bytes either way. */
static fp4_status moe_swiglu_down(cu_state *s, const fp4_cu_moe_part *wd, const int32_t *grp, int64_t P,
                                  const char *name, fp4_error *err) {
    const cu_moe *m = s->moe;
    const int64_t FE = m->FE;
    if (s->act_fuse && wd->type == FP4_TYPE_NVFP4_E2M1 && !wd->native && FE % 256 == 0) {
        int8_t *q;
        float *d;
        fp4_cu_moe_act_planes(wd, P, m->d_q, &q, &d);
        const int64_t nsb = P * FE / 256;
        STK_LAUNCH(err, "rt.swiglu",
                   fp4_cu_launch(dim3((unsigned)((nsb + 1) / 2)), dim3(64), 0, s->stream, 1,
                                 stk_swiglu_act<true>, m->d_g, (void *)q, d, (const float *)m->d_g,
                                 (const float *)m->d_u, P * FE, nsb));
        prof_mark(s, OP_DOWN);
        const fp4_status st = fp4_cu_moe_project_pre(wd, m->d_sel, grp, grp ? m->how : FP4_CU_MOE_PAIRS, P, q,
                                                     d, m->d_y, s->stream);
        return st ? moe_fail(st, name, err) : FP4_OK;
    }
    STK_LAUNCH(err, "rt.swiglu",
               fp4_cu_launch(dim3(blocks_for(P * FE, 256)), dim3(256), 0, s->stream, 1, stk_swiglu, m->d_g,
                             (const float *)m->d_g, (const float *)m->d_u, FE, FE, P * FE));
    prof_mark(s, OP_DOWN);
    float *y = m->d_y;
    return moe_project(s, &wd, 1, grp, P, 1, m->d_g, &y, name, err);
}

/* DeepSeek-V3's shared experts: one SwiGLU MLP of n_shared * moe_ffn over every column -> m->d_sh
 * (the CPU's shared_experts: gate, up, SwiGLU, down through the step's projection routes) */
static fp4_status moe_shared(cu_state *s, int64_t L, int64_t n, fp4_error *err) {
    const cu_moe *m = s->moe;
    const fp4_cuda_tensor *w = s->w + L * FP4_LW_COUNT_;
    const fp4_tensor *const *hw = s->d.layer + L * FP4_LW_COUNT_;
    const int64_t FS = s->d.arch.n_shared_experts * s->d.arch.moe_ffn;
    fp4_status st;
    if ((st = proj(s, &w[FP4_LW_SH_GATE], s->d_h, n, m->d_sg, hw[FP4_LW_SH_GATE]->name, err)) ||
        (st = proj(s, &w[FP4_LW_SH_UP], s->d_h, n, m->d_su, hw[FP4_LW_SH_UP]->name, err)))
        return st;
    STK_LAUNCH(err, "rt.swiglu",
               fp4_cu_launch(dim3(blocks_for(n * FS, 256)), dim3(256), 0, s->stream, 1, stk_swiglu, m->d_sg,
                             (const float *)m->d_sg, (const float *)m->d_su, FS, FS, n * FS));
    return proj(s, &w[FP4_LW_SH_DOWN], m->d_sg, n, m->d_sh, hw[FP4_LW_SH_DOWN]->name, err);
}

/* the MoE layer L over n columns: s->d_h (ffn-normed) -> s->d_t. Gate and up in one launch unless
 * FP4LANE_CUDA_NO_FUSE (no_fuse) keeps them apart; steps of 2+ columns visit the pairs in expert
 * order, one pair a block row (fp4_cu_moe_group's table; FP4LANE_CUDA_MOE_GROUPED: by expert). */
static fp4_status moe_layer(cu_state *s, int64_t L, int64_t n, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const cu_moe *m = s->moe;
    const int64_t E = m->E, K = m->K, H = a->hidden, P = n * K;
    const fp4_tensor *const *mw = s->d.moe + L * FP4_MOE_STRIDE(E);
    const fp4_cu_moe_part *pt = m->part + 3 * L;
    const int32_t *grp = n > 1 ? m->d_grp : NULL;
    fp4_status st;
    prof_mark(s, OP_GATEUP);
    if ((st = proj(s, &m->router[L], s->d_h, n, m->d_rl, mw[FP4_MOE_ROUTER]->name, err))) return st;
    const int group = a->moe_routing == FP4_MOE_SIGMOID_GROUP;
    if (group)
        STK_LAUNCH(err, "rt.moe-route",
                   fp4_cu_launch(dim3(blocks_for(n, 32)), dim3(32), 0, s->stream, 1, moe_route_group_kernel,
                                 (const float *)m->d_rl, m->d_rs, 2 * E + a->moe_n_group + a->moe_topk_group,
                                 s->dv[L * FP4_LW_COUNT_ + FP4_LW_EXP_BIAS], E, (int)K, a->moe_n_group,
                                 a->moe_topk_group, (int)a->moe_norm_topk, (float)a->routed_scaling, m->d_sel,
                                 m->d_rw, n));
    else
        STK_LAUNCH(err, "rt.moe-route",
                   fp4_cu_launch(dim3((unsigned)n), dim3(32), 0, s->stream, 1, moe_route_kernel,
                                 (const float *)m->d_rl, m->d_rs, E, (int)K, (int)a->moe_routing,
                                 (int)a->moe_norm_topk, m->d_sel, m->d_rw));
    const int split = m->EL < E;
    if (split) { /* plain launch: the route kernel's successor reads what it wrote */
        moe_local_kernel<<<blocks_for(P, 256), 256, 0, s->stream>>>(m->d_sel, m->d_selg, P, m->x0, m->EL);
        const cudaError_t ce = cudaGetLastError();
        if (ce != cudaSuccess)
            return cuda_fail(err, FP4_CUDA_FAIL(ce, "moe_local_kernel"), NULL, "rt.tp", "launch");
    }
    const int shared = a->n_shared_experts > 0;
    if (shared && (st = moe_shared(s, L, n, err))) return st;
    if (grp && (st = fp4_cu_moe_group(m->d_sel, P, E, m->d_grp, s->stream)))
        return cuda_fail(err, st, NULL, "rt.moe-route", "expert groups");
    const fp4_cu_moe_part *gu[2] = {&pt[0], &pt[1]};
    float *gy[2] = {m->d_g, m->d_u};
    const char *gname = mw[FP4_MOE_AT(0, FP4_MOE_GATE)]->name;
    if (!s->env.no_fuse) {
        if ((st = moe_project(s, gu, 2, grp, P, K, s->d_h, gy, gname, err))) return st;
    } else if ((st = moe_project(s, gu, 1, grp, P, K, s->d_h, gy, gname, err)) ||
               (st = moe_project(s, gu + 1, 1, grp, P, K, s->d_h, gy + 1, gname, err)))
        return st;
    prof_mark(s, OP_SWIGLU);
    if ((st = moe_swiglu_down(s, &pt[2], grp, P, mw[FP4_MOE_AT(0, FP4_MOE_DOWN)]->name, err))) return st;
    if (split && (st = fp4_cu_tp_moe_pick(s, m->d_selg, m->d_y, P, err))) return st;
    STK_LAUNCH(err, "rt.moe-combine",
               fp4_cu_launch(dim3(blocks_for(n * H, 256)), dim3(256), 0, s->stream, 1, moe_combine_kernel,
                             s->d_t, (const float *)m->d_rw, (const float *)m->d_y, (int)K, H, n,
                             (const float *)(shared ? m->d_sh : NULL)));
    return FP4_OK;
}

#endif /* FP4_CUDA_STEP_MOE_CUH */
