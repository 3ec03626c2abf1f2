/* step.cu — the CUDA backend: THE STEP of backend.h on the device, the twin of src/cpu's step.
 * Built into libfp4lane_cuda.so (`make cuda`) with create.cu and upload.cu (step_impl.cuh), found
 * by rt.c with dlopen; exports only fp4_rt_cuda_backend (FP4_RT_CUDA_ENTRY). The one translation
 * unit with the step's kernels (step_kernels.cuh, att_cluster.cuh, att_gemm.cuh): what creation
 * needs of them (the scratch layout, the attention plan, the norm's shared memory) it asks here.
 *
 *   step:   one H2D copy of the column table (token, slot, position, logits row), the whole step
 *           on one stream (embedding, layers, final norm, head: projections only through
 *           fp4_cuda_project, every other op from step_kernels.cuh / pinned.h), one D2H copy of
 *           the logits — or, greedy (step_greedy: fp4_rt_step_greedy), of one int32 per column from
 *           fp4_cuda_argmax_rows, FP4LANE_CUDA_NO_ARGMAX=1 taking argmax.h's on the host instead —
 *           one stream synchronization. A step whose columns all want logits (a
 *           decode step) is captured as a CUDA graph the second time its column count is seen,
 *           and replayed after that; the kernels read the columns from the device, so the graph
 *           serves any columns of that count.
 *           q/k/v and gate/up run as one projection each when their tensors can be fused (one
 *           type, one row length, one NVFP4 scale2: see upload.cu); attention is two launches
 *           per layer (step_kernels.cuh); per layer: norm, q/k/v, prep, 2 attention, o, norm,
 *           gate/up, SwiGLU, down.
 *   Gemma 3: the embedding scale, GeGLU, the post-norms and the soft-cap from gemma.cuh; a local
 *           layer rotates by its own table and attends to its window, whose rows sit in a ring
 *           (gemma.cu: the layout of the slot's rows, the rings' snapshot copies).
 *   DeepSeek-V3: latent attention (mla.cuh; mla.cu widens kv_b at creation) in place of q/k/v, prep
 *           and attention; the MLP as any model's (ffn_body), its routing and shared experts in moe.cuh.
 *   exact:  bit-identical to the CPU (projection routes of FP4_MODE_EXACT, pinned ops); kquant
 *           in exact mode has no route here (refused, docs/ROUTES.md).
 * Errors: every CUDA failure becomes FP4_ERR_CUDA with fp4_cuda_last_error()'s text in err->msg.
 * FP4LANE_CUDA_PROFILE=FILE: steps run eagerly with a cudaEvent around every op; the per-op
 * totals of the steps whose columns all want logits (decode steps) are written to FILE when the
 * backend is destroyed (create.cu; a measuring aid for bench/runtime.md). */
#include "cuda/step/step_impl.cuh"
#include "format/argmax.h"
#include "cuda/step/att_cluster.cuh"
#include "cuda/step/att_gemm.cuh"
#include "cuda/step/att_tiled.cuh"
#include "cuda/step/step_kernels.cuh"
#include "cuda/step/gemma.cuh"
#include <string.h>

/* ---- what create.cu needs of the step's kernels ---- */
extern "C" int fp4_cu_step_scratch_list(cu_state *s, buf_req *r) {
    const fp4_arch *a = &s->d.arch;
    const uint64_t mc = (uint64_t)s->max_cols, H = a->hidden, D = a->head_dim, qd = a->n_heads * D,
                   kvd = a->n_kv_heads * D, F = a->ffn, V = a->vocab, NH = a->n_heads;
    const uint64_t wide = H > qd ? H : qd;
    int n = 0;
#define REQ(ptr, nbytes) r[n++] = (buf_req){(void **)&(ptr), (uint64_t)(nbytes)}
    REQ(s->d_x, mc * H * 4);
    REQ(s->d_h, mc * wide * 4);
    REQ(s->d_q, mc * (qd + 2 * kvd) * 4); /* q, or q/k/v of one fused projection */
    REQ(s->d_k, mc * kvd * 4);
    REQ(s->d_v, mc * kvd * 4);
    REQ(s->d_o, mc * qd * 4);
    REQ(s->d_t, mc * H * 4);
    REQ(s->d_g, mc * 2 * F * 4); /* g, or g/u of one fused projection */
    REQ(s->d_u, mc * F * 4);
    REQ(s->d_hh, mc * H * 4);
    REQ(s->d_lg, (uint64_t)logit_rows(s) * V * 4);
    const uint64_t ngroups = mc * a->n_kv_heads * ((NH / a->n_kv_heads + STK_GB - 1) / STK_GB);
    const uint64_t sc = ngroups * STK_GB * (uint64_t)s->d.n_ctx * 4, ld = (uint64_t)att_gemm_ld(s->d.n_ctx);
    /* [block row][n_ctx][STK_GB]; or att_gemm.cuh's scores [head][column][ld] */
    REQ(s->d_sc, s->att_gemm && mc * NH * ld * 4 > sc ? mc * NH * ld * 4 : sc);
    if (s->att_gemm) {
        REQ(s->d_q16, mc * NH * D * 2);
        REQ(s->d_qs, mc * NH * 4);
        REQ(s->d_p, mc * NH * ld * 2);
    }
    REQ(s->d_st, mc * NH * STK_LANES * D * 4);
    REQ(s->d_den, mc * NH * STK_LANES * 4);
    REQ(s->d_bmax, mc * NH * STK_MAX_GX * 4);
    REQ(s->d_tk, mc * NH * 4); /* one per (column, KV head, head group) <= one per (column, head) */
    REQ(s->d_in, 4 * mc * 4);
    REQ(s->d_am, fp4_cuda_argmax_work_bytes(logit_rows(s)));
    s->aq_nsb = (int64_t)(F + 255) / 256;
    REQ(s->d_aq, (uint64_t)s->aq_nsb * 512); /* int16 (native) or int8 (exact) */
    REQ(s->d_ad, (uint64_t)s->aq_nsb * 4);
    REQ(s->d_tok, (uint64_t)logit_rows(s) * 8);
#undef REQ
    return n;
}

/* one column: the one-launch cluster attention in clusters of 16 where the device runs them (else the
 * next smaller size, else the two launches); 2 to ATT_CL_WIDE_COLS columns: att_wide's table, for
 * the cluster sizes this shape and n_ctx run */
extern "C" void fp4_cu_step_att_plan(cu_state *s) {
    const int D = (int)s->d.arch.head_dim;
    const int64_t n_ctx = s->d.n_ctx;
    s->att_cl = s->env.att_cluster ? att_cluster_pick(D, n_ctx, 16) : 0;
    s->att_cl_wide = s->att_cl && s->env.att_cluster_wide;
    s->att_wide_ok = 0;
    for (int cs = 2; cs <= 8 && s->att_cl_wide; cs *= 2)
        if (att_cluster_ok(D, n_ctx, cs) && att_cluster_fits(cs, n_ctx, D)) s->att_wide_ok |= 1 << cs;
}

extern "C" cudaError_t fp4_cu_step_norm_smem(int bytes) {
    return cudaFuncSetAttribute(stk_add_rmsnorm, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/* ---- the step body: everything enqueued on s->stream ---- */
static void prof_mark(cu_state *s, int op) {
    if (!s->prof_path || s->n_ev >= PROF_MAX_EVENTS) return;
    s->prof_op[s->n_ev] = op;
    cudaEventRecord(s->ev[s->n_ev++], s->stream);
}

static fp4_status proj(cu_state *s, const fp4_cuda_tensor *w, const float *x, int64_t n, float *y,
                       const char *name, fp4_error *err) {
    const fp4_status st = fp4_cuda_project(w, s->d.mode, x, n, y, &s->scratch, s->stream);
    if (st == FP4_ERR_CUDA)
        return fp4_fail(err, st, NULL, name, "rt.project", "projection failed on route %s: %s",
                        fp4_cuda_route_name(w, s->d.mode, n), fp4_cuda_last_error());
    if (st)
        return fp4_fail(err, st, NULL, name, "rt.project", "projection failed on route %s: %s",
                        fp4_cuda_route_name(w, s->d.mode, n), fp4_status_str(st));
    return FP4_OK;
}

/* o and down: the rank's share of a row-parallel projection in a split engine (tp.cu) */
static fp4_status rowp(cu_state *s, const fp4_cuda_tensor *w, const float *x, int64_t n, float *y,
                       const char *name, fp4_error *err) {
    if (s->tp) return fp4_cu_tp_row_parallel(s, w, x, n, y, name, err);
    return proj(s, w, x, n, y, name, err);
}

/* every step kernel: launched with programmatic stream serialization (step_kernels.cuh) */
#define STK_LAUNCH(err, rule, expr)                                                                          \
    do {                                                                                                     \
        const fp4_status st_ = (expr);                                                                       \
        if (st_ != FP4_OK) return cuda_fail(err, st_, NULL, rule, "kernel launch");                          \
    } while (0)

static unsigned blocks_for(int64_t n, int per) {
    return (unsigned)((n + per - 1) / per);
}

/* One column: a = swiglu(g, u) and the down projection into d_t, the activation pass of down made
 * by the SwiGLU kernel itself (stk_swiglu_act) where down's route starts from a given pass
 * (fp4_cu_project_pre), else stk_swiglu then the route on a. The same bytes either way. */
static fp4_status swiglu_down1(cu_state *s, const float *g, const float *u, float *a,
                               const fp4_cuda_tensor *wd, const char *name, fp4_error *err) {
    const int64_t F = s->d.arch.ffn, nsb = wd->k_pad / 256;
    const int exact = s->d.mode == FP4_MODE_EXACT;
    if (wd->type == FP4_TYPE_NVFP4_E2M1 && wd->k_pad % 256 == 0 && wd->k_pad >= F && nsb <= s->aq_nsb &&
        (!exact || wd->k_pad == F) && fp4_cu_project_has_pre(wd, s->d.mode)) {
        STK_LAUNCH(err, "rt.swiglu", gm_act_pass(s, exact, a, g, u, F, nsb));
        prof_mark(s, OP_DOWN);
        const fp4_status st = fp4_cu_project_pre(wd, s->d.mode, s->d_aq, s->d_ad, s->d_t, s->stream);
        if (st == FP4_OK) return FP4_OK;
        if (st != FP4_ERR_UNSUPPORTED)
            return cuda_fail(err, st, name, "rt.project", "projection from the fused activation pass");
        return proj(s, wd, a, 1, s->d_t, name, err); /* a is written: the route's own pass */
    }
    STK_LAUNCH(err, "rt.swiglu", gm_act(s, a, g, u, F, F, F));
    prof_mark(s, OP_DOWN);
    return proj(s, wd, a, 1, s->d_t, name, err);
}

/* x += t (t may be NULL: no add), then y = rmsnorm(x, w) row by row (rows to lrow when given) */
static fp4_status add_norm(cu_state *s, int64_t n, const float *t, const float *w, float *y,
                           const int32_t *lrow, fp4_error *err) {
    const int H = (int)s->d.arch.hidden;
    STK_LAUNCH(err, "rt.rmsnorm",
               fp4_cu_launch(dim3((unsigned)n), dim3(STK_NORM_THREADS), (size_t)H * 4, s->stream, 1,
                             stk_add_rmsnorm, s->d_x, t, w, H, s->d.arch.rms_eps, y, lrow));
    return FP4_OK;
}

/* Steps of 2 to ATT_CL_WIDE_COLS columns whose positions are all at most max_pos: the cluster kernel
 * with clusters of cs blocks instead of stk_attention's two launches; the first row that holds the
 * step wins. The rows keep only the cases where the smaller clusters were clearly faster in the
 * step itself, not only in the lab (CLAIMS attwide-1); longer contexts need more blocks a column
 * than these clusters have. */
static const struct {
    int64_t min_cols, max_cols;
    int32_t max_pos;
    int cs;
} att_wide[] = {{2, 2, 767, 8}, {3, 4, 767, 4}, {5, 8, 639, 2}};

/* the cluster size of this step's attention at 2+ columns (0: the two launches) */
static int att_wide_cs(const cu_state *s, int64_t n) {
    if (!s->att_cl_wide || n < 2 || n > ATT_CL_WIDE_COLS) return 0;
    const int32_t *pos = s->h_in + 2 * s->max_cols;
    int32_t mp = 0;
    for (int64_t c = 0; c < n; c++) mp = pos[c] > mp ? pos[c] : mp;
    for (size_t i = 0; i < sizeof att_wide / sizeof att_wide[0]; i++)
        if (n >= att_wide[i].min_cols && n <= att_wide[i].max_cols && mp <= att_wide[i].max_pos)
            return s->att_wide_ok >> att_wide[i].cs & 1 ? att_wide[i].cs : 0;
    return 0;
}

/* One layer's attention over n columns: where every run of columns (one slot, consecutive
 * positions) has ATT_GEMM_MIN_COLS or more and the native GEMM attention is on, each run through
 * cuBLAS (att_gemm.cuh); else, or where it declines (a graph capture), the pinned kernels over the
 * whole step: up to ATT_CL_MAX_COLS columns the one-launch cluster kernel (att_cluster.cuh) where the
 * device runs it, else stk_attention's two launches (the same bits either way). The runs come from
 * the host's copy of the step's columns. */
static fp4_status attention(cu_state *s, int64_t n, const stk_att_args &aa, const uint16_t *kc,
                            const uint16_t *vc, int64_t slot_stride, fp4_error *err) {
    const int64_t mc = s->max_cols;
    const int32_t *slot = s->h_in + mc, *pos = s->h_in + 2 * mc;
    int gemm = s->att_gemm && n >= ATT_GEMM_MIN_COLS && !aa.win; /* a window: the pinned kernels */
    for (int64_t c0 = 0, c1; gemm && c0 < n; c0 = c1) {
        for (c1 = c0 + 1; c1 < n && slot[c1] == slot[c0] && pos[c1] == pos[c1 - 1] + 1;) c1++;
        gemm = c1 - c0 >= ATT_GEMM_MIN_COLS;
    }
    for (int64_t c0 = 0, c1; gemm && c0 < n; c0 = c1) {
        for (c1 = c0 + 1; c1 < n && slot[c1] == slot[c0] && pos[c1] == pos[c1 - 1] + 1;) c1++;
        const att_gemm_args g = {aa.q + c0 * aa.q_cs,
                                 aa.q_cs,
                                 kc + slot[c0] * slot_stride,
                                 vc + slot[c0] * slot_stride,
                                 aa.o + c0 * aa.nh * aa.d,
                                 (__half *)s->d_q16,
                                 s->d_qs,
                                 s->d_sc,
                                 (__half *)s->d_p,
                                 att_gemm_ld(s->d.n_ctx),
                                 pos[c0],
                                 c1 - c0,
                                 aa.nh,
                                 aa.nkv,
                                 aa.d,
                                 aa.scale};
        const fp4_status st = att_gemm_run(g, s->stream);
        if (st == FP4_ERR_UNSUPPORTED && c0 == 0) gemm = 0; /* nothing launched: the pinned kernels */
        else if (st) return cuda_fail(err, st, NULL, "rt.attention", "attention through cuBLAS");
    }
    if (!gemm && s->env.att_tiled && n >= ATT_T_MIN_COLS) { /* att_tiled.cuh: one launch, unproven */
        const fp4_status st = att_tiled(aa, n, s->stream);
        if (st == FP4_OK) return FP4_OK;
        if (st != FP4_ERR_UNSUPPORTED) return cuda_fail(err, st, NULL, "rt.attention", "tiled attention");
    }
    if (!gemm && s->att_cl && n <= ATT_CL_MAX_COLS)
        STK_LAUNCH(err, "rt.attention",
                   att_cluster(aa, n, s->att_cl, att_cluster_bps(n), s->stream));
    else if (!gemm && att_wide_cs(s, n))
        STK_LAUNCH(err, "rt.attention", att_cluster(aa, n, att_wide_cs(s, n), 0, s->stream));
    else if (!gemm) STK_LAUNCH(err, "rt.attention", stk_attention(aa, n, s->stream));
    return FP4_OK;
}

#include "cuda/step/moe.cuh" /* the MoE layer: uses proj, STK_LAUNCH, prof_mark, blocks_for above */

/* the MLP of layer L over n columns: s->d_h (ffn-normed) -> s->d_t; a MoE layer's through moe.cuh */
static fp4_status ffn_body(cu_state *s, int64_t L, int64_t n, fp4_error *err) {
    if (s->moe && s->moe->router[L].d_payload) return moe_layer(s, L, n, err);
    const int64_t F = s->d.arch.ffn;
    const fp4_cuda_tensor *w = s->w + L * FP4_LW_COUNT_, *fgu = &s->wf[2 * L + 1];
    const fp4_tensor *const *hw = s->d.layer + L * FP4_LW_COUNT_;
    fp4_status st;
    prof_mark(s, OP_GATEUP);
    float *act = s->d_g; /* the down projection's input: [col][F] */
    if (fgu->d_payload) { /* one projection: [col][2F], g then u */
        if ((st = proj(s, fgu, s->d_h, n, s->d_g, hw[FP4_LW_GATE]->name, err))) return st;
        prof_mark(s, OP_SWIGLU);
        if (n == 1 && s->act_fuse) /* SwiGLU and down's activation pass in one kernel */
            return swiglu_down1(s, s->d_g, s->d_g + F, s->d_u, &w[FP4_LW_DOWN], hw[FP4_LW_DOWN]->name, err);
        STK_LAUNCH(err, "rt.swiglu", gm_act(s, s->d_u, s->d_g, s->d_g + F, F, 2 * F, n * F));
        act = s->d_u;
    } else {
        if ((st = proj(s, &w[FP4_LW_GATE], s->d_h, n, s->d_g, hw[FP4_LW_GATE]->name, err)) ||
            (st = proj(s, &w[FP4_LW_UP], s->d_h, n, s->d_u, hw[FP4_LW_UP]->name, err)))
            return st;
        prof_mark(s, OP_SWIGLU);
        if (n == 1 && s->act_fuse)
            return swiglu_down1(s, s->d_g, s->d_u, s->d_g, &w[FP4_LW_DOWN], hw[FP4_LW_DOWN]->name, err);
        STK_LAUNCH(err, "rt.swiglu", gm_act(s, s->d_g, s->d_g, s->d_u, F, F, n * F));
    }
    prof_mark(s, OP_DOWN);
    return rowp(s, &w[FP4_LW_DOWN], act, n, s->d_t, hw[FP4_LW_DOWN]->name, err);
}

#include "cuda/step/mla.cuh" /* latent attention: uses proj, STK_LAUNCH, prof_mark above */

/* DeepSeek-V3's layer: norm, latent attention (mla.cuh), norm, the MLP */
static fp4_status mla_layer_body(cu_state *s, int64_t L, int64_t n, const stk_cols *cols, fp4_error *err) {
    const float *const *v = s->dv + L * FP4_LW_COUNT_;
    fp4_status st;
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, L ? s->d_t : NULL, v[FP4_LW_ATTN_NORM], s->d_h, NULL, err)) ||
        (st = mla_attention(s, L, n, cols, err)))
        return st;
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, s->d_t, v[FP4_LW_FFN_NORM], s->d_h, NULL, err))) return st;
    return ffn_body(s, L, n, err);
}

/* One layer; the residual add of its down projection (in d_t) is left to the next add_norm. */
static fp4_status layer_body(cu_state *s, int64_t L, int64_t n, const stk_cols *cols, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t D = a->head_dim, NH = a->n_heads, NKV = a->n_kv_heads;
    const int64_t kvd = NKV * D;
    const fp4_cuda_tensor *w = s->w + L * FP4_LW_COUNT_;
    const fp4_tensor *const *hw = s->d.layer + L * FP4_LW_COUNT_;
    const float *const *v = s->dv + L * FP4_LW_COUNT_;
    const int64_t slot_stride = s->kv_rows * kvd; /* the slot's rows (gemma.cu: local layers' rings) */
    uint16_t *kc = s->d_kc + s->kv_off[L] * kvd, *vc = s->d_vc + s->kv_off[L] * kvd;
    const int local = fp4_arch_layer_local(a, L); /* Gemma 3: own rope base, window, ring */
    fp4_status st;
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, L ? s->d_t : NULL, v[FP4_LW_ATTN_NORM], s->d_h, NULL, err))) return st;
    prof_mark(s, OP_QKV);
    const fp4_cuda_tensor *fqkv = &s->wf[2 * L];
    float *qb = s->d_q, *kb = s->d_k, *vb = s->d_v;
    int64_t q_cs = NH * D, kv_cs = kvd;
    if (fqkv->d_payload) { /* one projection; rows of q, k, v in order: [col][qd + 2*kvd] */
        if ((st = proj(s, fqkv, s->d_h, n, s->d_q, hw[FP4_LW_Q]->name, err))) return st;
        kb = s->d_q + NH * D, vb = kb + kvd, q_cs = kv_cs = NH * D + 2 * kvd;
    } else if ((st = proj(s, &w[FP4_LW_Q], s->d_h, n, s->d_q, hw[FP4_LW_Q]->name, err)) ||
               (st = proj(s, &w[FP4_LW_K], s->d_h, n, s->d_k, hw[FP4_LW_K]->name, err)) ||
               (st = proj(s, &w[FP4_LW_V], s->d_h, n, s->d_v, hw[FP4_LW_V]->name, err)))
        return st;
    prof_mark(s, OP_PREP);
    stk_prep_args pa = {qb,
                        kb,
                        vb,
                        q_cs,
                        kv_cs,
                        v[FP4_LW_Q_BIAS],
                        v[FP4_LW_K_BIAS],
                        v[FP4_LW_V_BIAS],
                        a->qk_norm ? v[FP4_LW_Q_NORM] : NULL,
                        a->qk_norm ? v[FP4_LW_K_NORM] : NULL,
                        local ? s->d_cos_l : s->d_cos,
                        local ? s->d_sin_l : s->d_sin,
                        kc,
                        vc,
                        slot_stride,
                        (int)NH,
                        (int)NKV,
                        (int)D,
                        a->qk_permuted,
                        a->rms_eps,
                        *cols,
                        s->kv_ring[L]};
    if (!a->qkv_bias) pa.bq = pa.bk = pa.bv = NULL;
    STK_LAUNCH(err, "rt.qkv-prep",
               fp4_cu_launch(dim3((unsigned)n, (unsigned)(NH + 2 * NKV)), dim3((unsigned)D), 0, s->stream, 1,
                             stk_qkv_prep, pa));
    prof_mark(s, OP_ATTN);
    stk_att_args aa = {qb,      q_cs,     kc,       vc,      slot_stride, s->d_sc,    s->d_bmax,
                       s->d_st, s->d_den, s->d_tk,  s->d_o,  s->d.n_ctx,  (int)NH,    (int)NKV,
                       (int)D,  0,        s->d.attn_scale, *cols};
    if (local) aa.win = a->sliding_window, aa.ring = s->kv_ring[L];
    if ((st = attention(s, n, aa, kc, vc, slot_stride, err))) return st;
    prof_mark(s, OP_O);
    if ((st = rowp(s, &w[FP4_LW_O], s->d_o, n, s->d_t, hw[FP4_LW_O]->name, err))) return st;
    if (v[FP4_LW_ATTN_POST_NORM])
        STK_LAUNCH(err, "rt.rmsnorm", gm_post_norm(s, n, s->d_t, v[FP4_LW_ATTN_POST_NORM]));
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, s->d_t, v[FP4_LW_FFN_NORM], s->d_h, NULL, err))) return st;
    return ffn_body(s, L, n, err);
}
static fp4_status layer(cu_state *s, int64_t L, int64_t n, const stk_cols *cols, fp4_error *err) {
    const fp4_status st = s->mla ? mla_layer_body(s, L, n, cols, err) : layer_body(s, L, n, cols, err);
    const float *pn = s->dv[L * FP4_LW_COUNT_ + FP4_LW_FFN_POST_NORM]; /* Gemma 3 */
    if (st || !pn) return st;
    STK_LAUNCH(err, "rt.rmsnorm", gm_post_norm(s, n, s->d_t, pn));
    return FP4_OK;
}

static fp4_status body(cu_state *s, int64_t n, int64_t nw, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t mc = s->max_cols;
    const stk_cols cols = {s->d_in, s->d_in + mc, s->d_in + 2 * mc, s->d_in + 3 * mc};
    fp4_status st;
    prof_mark(s, OP_EMBED);
    if (s->emb_on_device && s->tp) { /* a rank's vocabulary rows (tp.cu) */
        if ((st = fp4_cu_tp_embed(s, cols.tok, n, err))) return st;
    } else if (s->emb_on_device && (st = fp4_cuda_embed(&s->emb, cols.tok, n, s->d_x, s->stream)))
        return cuda_fail(err, st, s->d.tok_embd->name, "rt.embed", "embedding lookup");
    STK_LAUNCH(err, "rt.embed", gm_embed(s, n));
    for (int64_t L = 0; L < a->n_layers; L++)
        if ((st = layer(s, L, n, &cols, err))) return st;
    prof_mark(s, OP_HEAD);
    if (!nw) return FP4_OK; /* the last residual add only feeds the final norm */
    if ((st = add_norm(s, n, s->d_t, s->d_out_norm, s->d_hh, cols.lrow, err))) return st;
    if ((st = proj(s, head_of(s), s->d_hh, nw, s->d_lg, s->d.head->name, err))) return st;
    STK_LAUNCH(err, "rt.softcap", gm_softcap_rows(s, nw));
    return FP4_OK;
}

/* graph of a decode step of n columns (and its attention kernel, att_wide_cs): captured the second
 * time the pair is seen, replayed after */
static fp4_status run_body(cu_state *s, int64_t n, int64_t nw, fp4_error *err) {
    if (s->prof_path || s->graphs_off || nw != n) return body(s, n, nw, err);
    cu_graph *g = NULL;
    const int akey = att_wide_cs(s, n);
    for (int i = 0; i < CU_MAX_GRAPHS && !g; i++)
        if (s->graphs[i].seen && s->graphs[i].n == n && s->graphs[i].akey == akey) g = &s->graphs[i];
    if (g && g->exec) {
        CU_TRY(err, cudaGraphLaunch(g->exec, s->stream), "cuda.graph");
        return FP4_OK;
    }
    if (!g) { /* first time: eager, remembered */
        for (int i = 0; i < CU_MAX_GRAPHS && !g; i++)
            if (!s->graphs[i].seen) g = &s->graphs[i];
        if (g) g->seen = 1, g->n = n, g->akey = akey;
        return body(s, n, nw, err);
    }
    cudaGraph_t graph = NULL;
    CU_TRY(err, cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal), "cuda.graph");
    fp4_status st = body(s, n, nw, err);
    const cudaError_t ce = cudaStreamEndCapture(s->stream, &graph);
    if (st || ce != cudaSuccess || !graph) {
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        if (st) return st;
        s->graphs_off = 1; /* capture refused: run every step eagerly */
        return body(s, n, nw, err);
    }
    const cudaError_t ie = cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    if (ie != cudaSuccess) {
        g->exec = NULL;
        return cuda_fail(err, FP4_CUDA_FAIL(ie, "cudaGraphInstantiate"), NULL, "cuda.graph",
                         "graph instantiation");
    }
    CU_TRY(err, cudaGraphLaunch(g->exec, s->stream), "cuda.graph");
    return FP4_OK;
}

/* a step up to its last kernel (step_impl.cuh) */
extern "C" fp4_status fp4_cu_step_enqueue(cu_state *s, const fp4_rt_col *cols, int64_t n, int have_out,
                                          int64_t *nw_out, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t mc = s->max_cols, H = a->hidden;
    if (n <= 0 || n > mc)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "%lld columns (1..%lld)",
                        (long long)n, (long long)mc);
    int64_t nw = 0;
    for (int64_t c = 0; c < n; c++) {
        if (cols[c].token < 0 || cols[c].token >= a->vocab || cols[c].slot < 0 ||
            cols[c].slot >= s->d.n_slots || cols[c].pos < 0 || cols[c].pos >= s->d.n_ctx)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step",
                            "column %lld: token %d slot %d position %lld out of range", (long long)c,
                            cols[c].token, cols[c].slot, (long long)cols[c].pos);
        s->h_in[c] = cols[c].token, s->h_in[mc + c] = cols[c].slot,
        s->h_in[2 * mc + c] = (int32_t)cols[c].pos;
        s->h_in[3 * mc + c] = cols[c].want_logits ? (int32_t)nw++ : -1;
        if (!s->emb_on_device) {
            const fp4_status st =
                fp4_tensor_dequant_rows(s->d.tok_embd, cols[c].token, cols[c].token + 1, s->h_emb + c * H);
            if (st)
                return fp4_fail(err, st, NULL, s->d.tok_embd->name, "rt.embed",
                                "cannot read embedding row %d", cols[c].token);
        }
    }
    if (nw && !have_out)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "logits wanted but no buffer given");
    if (nw > logit_rows(s))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step",
                        "%lld columns want logits (at most %lld a step)", (long long)nw,
                        (long long)logit_rows(s));
    s->n_ev = 0;
    CU_TRY(err, cudaSetDevice(s->d.device), "cuda.step"); /* current device is per thread */
    CU_TRY(err, cudaMemcpyAsync(s->d_in, s->h_in, (size_t)(4 * mc) * 4, cudaMemcpyHostToDevice, s->stream),
           "cuda.step");
    if (!s->emb_on_device)
        CU_TRY(err, cudaMemcpyAsync(s->d_x, s->h_emb, (size_t)(n * H) * 4, cudaMemcpyHostToDevice, s->stream),
               "cuda.step");
    const fp4_status st = run_body(s, n, nw, err);
    if (st) {
        cudaStreamSynchronize(s->stream);
        (void)cudaGetLastError();
        return st;
    }
    *nw_out = nw;
    return FP4_OK;
}

/* the step; logits (host rows) or, greedy, tokens (one per want_logits column) */
static fp4_status cu_step_impl(cu_state *s, const fp4_rt_col *cols, int64_t n, float *logits, int32_t *tokens,
                               fp4_error *err) {
    const int64_t mc = s->max_cols, V = s->d.arch.vocab;
    int64_t nw = 0;
    fp4_status st = fp4_cu_step_enqueue(s, cols, n, logits || tokens, &nw, err);
    if (st) return st;
    const int on_device = tokens && !s->argmax_off; /* only the tokens cross to the host */
    int32_t *h_tok = s->h_in + 4 * mc;
    if (nw && on_device) {
        if ((st = fp4_cuda_argmax_rows(s->d_lg, nw, V, V, s->d_am, s->d_tok, s->d_tok + nw, s->stream)))
            return cuda_fail(err, st, NULL, "rt.greedy", "argmax of the logits");
        CU_TRY(err, cudaMemcpyAsync(h_tok, s->d_tok, (size_t)nw * 8, cudaMemcpyDeviceToHost, s->stream),
               "cuda.step"); /* the tokens and their flags in one copy */
    } else if (nw)
        CU_TRY(err,
               cudaMemcpyAsync(s->h_lg, s->d_lg, (size_t)(nw * V) * 4, cudaMemcpyDeviceToHost, s->stream),
               "cuda.step");
    if (s->prof_path) prof_mark(s, OP_COUNT_);
    CU_TRY(err, cudaStreamSynchronize(s->stream), "cuda.step"); /* the one host synchronization of the step */
    if (nw && on_device) /* a row holding NaN or an infinity: -1 (backend.h, step_greedy) */
        for (int64_t k = 0; k < nw; k++)
            tokens[k] = h_tok[nw + k] ? -1 : h_tok[k];
    else if (nw && tokens)
        for (int64_t k = 0; k < nw; k++)
            tokens[k] = fp4_rt_nonfinite_index(s->h_lg + k * V, V) >= 0
                            ? -1
                            : fp4_rt_greedy_argmax(s->h_lg + k * V, V);
    else if (nw)
        memcpy(logits, s->h_lg, (size_t)(nw * V) * 4);
    if (s->prof_path && s->n_ev > 1) { /* decode steps (every column wants logits) apart */
        const int k = nw == n ? 0 : 1;
        for (int i = 0; i + 1 < s->n_ev; i++) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, s->ev[i], s->ev[i + 1]) == cudaSuccess && s->prof_op[i] < OP_COUNT_)
                s->prof_ms[k][s->prof_op[i]] += ms;
        }
        s->prof_steps[k]++, s->prof_cols[k] += n;
    }
    return FP4_OK;
}

/* the ops of either handle: this engine's, or the split's (tp.cu), told apart by is_tp */
static int is_split(const void *p) {
    return *(const int *)p != 0;
}
static fp4_status cu_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err) {
    if (d->tp > 1) return fp4_cu_tp_create(d, max_cols, out, err);
    return fp4_cu_step_create(d, max_cols, out, err);
}
static void cu_destroy(void *p) {
    if (p && is_split(p)) fp4_cu_tp_destroy(p);
    else fp4_cu_step_destroy(p);
}
static fp4_status cu_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err) {
    if (is_split(p)) return fp4_cu_tp_step(p, cols, n, logits, err);
    return cu_step_impl((cu_state *)p, cols, n, logits, NULL, err);
}
static fp4_status cu_step_greedy(void *p, const fp4_rt_col *cols, int64_t n, int32_t *tokens,
                                 fp4_error *err) {
    if (is_split(p)) return fp4_cu_tp_step_greedy(p, cols, n, tokens, err);
    return cu_step_impl((cu_state *)p, cols, n, NULL, tokens, err);
}

extern "C" fp4_status fp4_cu_step_warm_step(cu_state *s, int64_t n, fp4_error *err) {
    fp4_rt_col *cols = (fp4_rt_col *)calloc((size_t)n, sizeof *cols);
    if (!cols) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t c = 0; c < n; c++)
        cols[c].pos = c, cols[c].want_logits = c == n - 1;
    int32_t tok = 0;
    const fp4_status st = cu_step_impl(s, cols, n, NULL, &tok, err);
    free(cols);
    return st;
}

static fp4_status kv_copy(cu_state *s, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host) {
    const fp4_arch *a = &s->d.arch;
    const int64_t kvd = fp4_arch_kv_dim(a); /* latent attention: its rows (mla.cuh) */
    if (slot < 0 || slot >= s->d.n_slots || n_pos < 0 || n_pos > s->d.n_ctx) return FP4_ERR_INVALID_ARG;
    cudaError_t e0 = cudaSetDevice(s->d.device);
    if (e0 == cudaSuccess) e0 = cudaStreamSynchronize(s->stream);
    if (e0 != cudaSuccess) return FP4_CUDA_FAIL(e0, "cudaStreamSynchronize(KV cache)");
    for (int64_t L = 0; L < a->n_layers; L++) {
        const int64_t off = ((int64_t)slot * s->kv_rows + s->kv_off[L]) * kvd;
        const size_t bytes = sizeof(uint16_t) * (size_t)(n_pos * kvd);
        cudaError_t e;
        if (s->kv_ring[L]) /* Gemma 3's local layer: its window (gemma.cu) */
            e = fp4_cu_step_kv_ring_copy(s, slot, L, n_pos, k + L * n_pos * kvd, v + L * n_pos * kvd,
                                         to_host);
        else if (to_host) {
            e = cudaMemcpyAsync(k + L * n_pos * kvd, s->d_kc + off, bytes, cudaMemcpyDeviceToHost, s->stream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(v + L * n_pos * kvd, s->d_vc + off, bytes, cudaMemcpyDeviceToHost,
                                    s->stream);
        } else {
            e = cudaMemcpyAsync(s->d_kc + off, k + L * n_pos * kvd, bytes, cudaMemcpyHostToDevice, s->stream);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(s->d_vc + off, v + L * n_pos * kvd, bytes, cudaMemcpyHostToDevice,
                                    s->stream);
        }
        if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "cudaMemcpyAsync(KV cache)");
    }
    const cudaError_t e = cudaStreamSynchronize(s->stream);
    return e == cudaSuccess ? FP4_OK : FP4_CUDA_FAIL(e, "cudaStreamSynchronize(KV cache)");
}
extern "C" fp4_status fp4_cu_step_kv(cu_state *s, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v,
                                     int to_host) {
    return kv_copy(s, slot, n_pos, k, v, to_host);
}
static fp4_status cu_kv_read(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v) {
    if (is_split(p)) return fp4_cu_tp_kv_copy(p, slot, n_pos, k, v, 1);
    return kv_copy((cu_state *)p, slot, n_pos, k, v, 1);
}
static fp4_status cu_kv_write(void *p, int32_t slot, int64_t n_pos, const uint16_t *k, const uint16_t *v) {
    if (is_split(p)) return fp4_cu_tp_kv_copy(p, slot, n_pos, (uint16_t *)k, (uint16_t *)v, 0);
    return kv_copy((cu_state *)p, slot, n_pos, (uint16_t *)k, (uint16_t *)v, 0);
}

/* Columns per step: the runtime's 64, or 512 in native mode where the native GEMM route is on
 * (unless FP4LANE_CUDA_GEMM=0, a16_gemm.cu: it widens each weight once per call, so a prefill wants few,
 * wide calls) and in exact mode unless FP4LANE_CUDA_IMMA=0 (the projections on a16_imma.cu: a
 * weight tile read once per 128 columns), fewer where the attention scores buffer (columns x heads x
 * n_ctx floats) would pass 512 MiB or the (column, head) grid rows 65535; never below 64. */
#define CU_STEP_COLS 512
#define CU_SCORES_BYTES ((uint64_t)512 << 20)
static int64_t cu_step_cols(const fp4_rt_model_desc *d) {
    const fp4_arch *a = &d->arch;
    if (d->tp > 1) return 64; /* the split's gathers hold columns x rows x super-blocks (tp.cu) */
    if (d->mode == FP4_MODE_NATIVE ? !fp4_cu_gemm_available() : !fp4_cu_env_imma()) return 64;
    int64_t mc = CU_STEP_COLS;
    const uint64_t per_col = (uint64_t)a->n_heads * (uint64_t)(d->n_ctx > 0 ? d->n_ctx : 1) * 4;
    if ((uint64_t)mc * per_col > CU_SCORES_BYTES) mc = (int64_t)(CU_SCORES_BYTES / per_col);
    const int64_t heads = a->n_heads + 2 * a->n_kv_heads;
    if (heads > 0 && mc * heads > 65535) mc = 65535 / heads;
    return mc < 64 ? 64 : mc;
}

static const fp4_rt_backend_ops cu_ops = {
    FP4_RT_BACKEND_ABI, "cuda",      fp4_cu_step_route, cu_create, cu_destroy, cu_step,
    cu_kv_read,         cu_kv_write, cu_step_cols,      cu_step_greedy,
};

extern "C" __attribute__((visibility("default"))) const fp4_rt_backend_ops *
fp4_rt_cuda_backend(uint32_t abi) {
    return abi == FP4_RT_BACKEND_ABI ? &cu_ops : NULL;
}
