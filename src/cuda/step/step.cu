/* step_cuda.cu — the CUDA backend: THE STEP of backend.h on the device, the twin of step_cpu.c.
 * Built into libfp4lane_cuda.so (`make cuda`), found by rt.c with dlopen; exports only
 * fp4_rt_cuda_backend (FP4_RT_CUDA_ENTRY).
 *
 *   create: memory plan (weights, KV, scratch) computed from the descriptors alone, reported
 *           (desc->on_plan) and refused when it does not fit (FP4_ERR_NOMEM, "cuda.memory-plan"),
 *           then weights uploaded once (fp4_cuda_tensor_upload*), vectors and the host's RoPE
 *           table uploaded as they are, the F16 KV cache allocated on the device.
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
 *           type, one row length, one NVFP4 scale2: see upload_fused); attention is two launches
 *           per layer (step_kernels.cuh); per layer: norm, q/k/v, prep, 2 attention, o, norm,
 *           gate/up, SwiGLU, down.
 *   exact:  bit-identical to the CPU (projection routes of FP4_MODE_EXACT, pinned ops); kquant
 *           in exact mode has no route here (refused, docs/ROUTES.md).
 * Errors: every CUDA failure becomes FP4_ERR_CUDA with fp4_cuda_last_error()'s text in err->msg.
 * FP4LANE_CUDA_PROFILE=FILE: steps run eagerly with a cudaEvent around every op; the per-op
 * totals of the steps whose columns all want logits (decode steps) are written to FILE when the
 * backend is destroyed (a measuring aid for bench/runtime.md). */
#include "cuda/common.cuh"
#include "backend/backend.h"
#include "format/argmax.h"
#include "cuda/step/att_cluster.cuh"
#include "cuda/step/att_gemm.cuh"
#include "cuda/step/step_kernels.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" fp4_status fp4_fail(fp4_error *err, fp4_status code, const char *file, const char *tensor,
                               const char *rule, const char *fmt, ...);

#define CU_MAX_GRAPHS 16 /* (column count, attention kernel) pairs; past them steps run eagerly */
#define CU_RESERVE_BYTES ((uint64_t)768 << 20) /* context, modules, graphs, allocator slack */

enum { OP_EMBED, OP_NORM, OP_QKV, OP_PREP, OP_ATTN, OP_O, OP_GATEUP, OP_SWIGLU, OP_DOWN, OP_HEAD, OP_COUNT_ };
static const char *const op_names[OP_COUNT_] = {
    "embed",  "add + rmsnorm", "proj q/k/v", "bias/rope/kv-write", "attention",
    "proj o", "proj gate/up",  "swiglu",     "proj down",          "final add + norm + head"};
#define PROF_MAX_EVENTS 4096

typedef struct cu_graph {
    int64_t n;
    int akey; /* the attention kernel the graph holds (att_wide_cs: the step's positions choose it) */
    int seen;
    cudaGraphExec_t exec;
} cu_graph;

typedef struct cu_state {
    fp4_rt_model_desc d;
    int64_t max_cols;
    cudaStream_t stream;
    fp4_cu_stager stage;       /* weights' upload staging (device.cu): create() only       */
    fp4_cuda_tensor *w;        /* n_layers * FP4_LW_COUNT_ (the projection slots)          */
    fp4_cuda_tensor *wf;       /* n_layers * 2: q/k/v and gate/up as one tensor each (rows
                                  concatenated) when fusible, else empty and w serves     */
    fp4_cuda_tensor emb, head; /* head unused when tied (emb serves both)                  */
    int emb_on_device;         /* F16/BF16/NVFP4 table: fp4_cuda_embed; else host rows     */
    float *d_vec;              /* every vector, then the RoPE tables                        */
    const float **dv;          /* n_layers * FP4_LW_COUNT_ device pointers (NULL: absent)  */
    const float *d_out_norm, *d_cos, *d_sin;
    uint16_t *d_kc, *d_vc;
    float *d_x, *d_h, *d_q, *d_k, *d_v, *d_o, *d_t, *d_g, *d_u, *d_hh, *d_lg, *d_sc, *d_st, *d_den, *d_bmax;
    unsigned *d_tk; /* attention tickets, zero between launches */
    void *d_am;     /* fp4_cuda_argmax_rows's work (zero between calls) */
    int32_t *d_tok; /* the greedy tokens of a step (logit_rows) */
    int argmax_off; /* FP4LANE_CUDA_NO_ARGMAX: step_greedy copies the logits and takes argmax.h's */
    int act_fuse;   /* 1-column steps: SwiGLU makes down's activation pass (FP4LANE_CUDA_NO_ACTFUSE: off) */
    void *d_aq;     /* ... that pass: int8 or int16 values of aq_nsb super-blocks */
    float *d_ad;    /* ... and their steps */
    int64_t aq_nsb;
    uint16_t *d_q16, *d_p; /* native prefill attention through cuBLAS (att_gemm.cuh): q and P in f16 */
    float *d_qs;
    int att_gemm; /* native mode, cuBLAS loaded, not FP4LANE_CUDA_ATT_GEMM=0 */
    int att_cl;   /* the one-launch cluster attention's cluster size (att_cluster.cuh), 0: off */
    int att_cl_bps; /* its blocks per SM at most (0: as they fit; -1: att_cluster_bps's rule) */
    int att_cl_wide; /* the cluster attention for steps of 2 to ATT_CL_WIDE_COLS columns (att_wide) */
    int att_wide_ok; /* bit cs: clusters of cs blocks run this shape and n_ctx (att_wide's sizes) */
    int32_t *d_in, *h_in; /* 4 * max_cols: token, slot, position, logits row (h_in: then the
                           * greedy tokens, max_cols more)                                */
    float *h_emb, *h_lg;  /* pinned host rows                                          */
    fp4_cuda_scratch scratch;
    cu_graph graphs[CU_MAX_GRAPHS];
    int graphs_off;
    fp4_rt_mem_plan plan;
    /* profiling */
    const char *prof_path;
    cudaEvent_t *ev;
    int n_ev, prof_op[PROF_MAX_EVENTS];
    double prof_ms[2][OP_COUNT_]; /* [0] decode steps (every column wants logits), [1] the others */
    int64_t prof_steps[2], prof_cols[2];
} cu_state;

static const fp4_cuda_tensor *head_of(const cu_state *s) {
    return s->d.head == s->d.tok_embd ? &s->emb : &s->head;
}

static fp4_status cuda_fail(fp4_error *err, fp4_status st, const char *tensor, const char *rule,
                            const char *what) {
    if (st == FP4_ERR_CUDA)
        return fp4_fail(err, st, NULL, tensor, rule, "%s: %s", what, fp4_cuda_last_error());
    return fp4_fail(err, st, NULL, tensor, rule, "%s: %s", what, fp4_status_str(st));
}
#define CU_TRY(err, expr, rule)                                                                              \
    do {                                                                                                     \
        cudaError_t e_ = (expr);                                                                             \
        if (e_ != cudaSuccess) return cuda_fail(err, FP4_CUDA_FAIL(e_, #expr), NULL, rule, #expr);           \
    } while (0)

#include "cuda/step/step_upload.cuh" /* stub_of, cu_route, upload, the fused tensors */

static void cu_destroy(void *p);

static int is_proj_slot(int s) {
    return s == FP4_LW_Q || s == FP4_LW_K || s == FP4_LW_V || s == FP4_LW_O || s == FP4_LW_GATE ||
           s == FP4_LW_UP || s == FP4_LW_DOWN;
}
static int64_t vec_len(const fp4_arch *a, int slot) {
    switch (slot) {
    case FP4_LW_ATTN_NORM:
    case FP4_LW_FFN_NORM:
        return a->hidden;
    case FP4_LW_Q_NORM:
    case FP4_LW_K_NORM:
        return a->head_dim;
    case FP4_LW_Q_BIAS:
        return a->n_heads * a->head_dim;
    case FP4_LW_K_BIAS:
    case FP4_LW_V_BIAS:
        return a->n_kv_heads * a->head_dim;
    default:
        return 0;
    }
}

/* the columns of one step that may want logits (desc's max_logit_cols; the runtime splits at it) */
static int64_t logit_rows(const cu_state *s) {
    const int64_t l = s->d.max_logit_cols;
    return l >= 1 && l <= s->max_cols ? l : s->max_cols;
}

/* scratch layout: one list of (pointer, floats) so the plan and the allocation agree */
typedef struct buf_req {
    void **p;
    uint64_t bytes;
} buf_req;

static int scratch_list(cu_state *s, buf_req *r) {
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
    REQ(s->d_tok, (uint64_t)logit_rows(s) * 4);
#undef REQ
    return n;
}

static fp4_status make_plan(cu_state *s, const fp4_cuda_device_info *info, fp4_error *err) {
    const fp4_rt_model_desc *d = &s->d;
    const fp4_arch *a = &d->arch;
    fp4_rt_mem_plan *p = &s->plan;
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "%s", info->name);
    uint64_t wb = 0, b, proj_scratch = 0;
    fp4_cuda_tensor t;
    const int64_t nslot = a->n_layers * FP4_LW_COUNT_;
    for (int64_t i = 0; i <= nslot + 1; i++) {
        const fp4_tensor *w = i < nslot ? d->layer[i] : i == nslot ? d->head : d->tok_embd;
        if (i < nslot && (!is_proj_slot((int)(i % FP4_LW_COUNT_)) || !w)) continue;
        if (i == nslot && d->head == d->tok_embd) continue; /* tied: counted once, as the embedding */
        if (i == nslot + 1 && !s->emb_on_device && d->head != d->tok_embd) continue; /* host rows */
        if (stub_of(w, &t, &b))
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, w->name, "cuda.type",
                            "type %d has no CUDA layout", (int)w->type);
        if (i < nslot && frag_wanted(d->mode, d->n_slots, t.type, t.input_scale_inv)) /* its frag copy */
            wb += FP4_CU_ALIGN(frag_bytes(t.n_out + 15, t.k_pad));          /* (a fused group's tiles) */
        wb += b;
        if (i <= nslot || d->head == d->tok_embd) {
            const size_t sb = fp4_cuda_scratch_bytes(&t, s->max_cols);
            if (sb > proj_scratch) proj_scratch = sb;
        }
    }
    for (int64_t L = 0; L < a->n_layers; L++)
        for (int g = 0; g < 2; g++)
            if (fuse_stub(d, L, g, &t)) {
                const size_t sb = fp4_cuda_scratch_bytes(&t, s->max_cols);
                if (sb > proj_scratch) proj_scratch = sb;
            }
    uint64_t nvec = (uint64_t)a->hidden + (uint64_t)d->n_ctx * (uint64_t)a->head_dim; /* out_norm + cos/sin */
    for (int64_t i = 0; i < nslot; i++)
        if (d->vec[i]) nvec += (uint64_t)vec_len(a, (int)(i % FP4_LW_COUNT_));
    wb += FP4_CU_ALIGN(nvec * 4);
    p->weights_bytes = wb;
    uint64_t kvn;
    const uint64_t kvd = (uint64_t)(a->n_kv_heads * a->head_dim);
    if (__builtin_mul_overflow((uint64_t)d->n_slots * (uint64_t)a->n_layers, (uint64_t)d->n_ctx * kvd,
                               &kvn) ||
        kvn > (UINT64_MAX / 8))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "rt.kv", "KV cache size overflows");
    p->kv_bytes = 2 * FP4_CU_ALIGN(kvn * 2);
    buf_req r[32];
    const int nr = scratch_list(s, r);
    uint64_t sc = FP4_CU_ALIGN(proj_scratch);
    for (int i = 0; i < nr; i++)
        sc += FP4_CU_ALIGN(r[i].bytes);
    p->scratch_bytes = sc;
    p->total_bytes = p->weights_bytes + p->kv_bytes + p->scratch_bytes;
    size_t free_b = 0, total_b = 0;
    CU_TRY(err, cudaMemGetInfo(&free_b, &total_b), "cuda.memory-plan");
    p->available_bytes = free_b > CU_RESERVE_BYTES ? free_b - CU_RESERVE_BYTES : 0;
    const char *lim = getenv("FP4LANE_CUDA_MEM_LIMIT");
    if (lim && *lim) {
        const unsigned long long l = strtoull(lim, NULL, 10);
        if (l < p->available_bytes) p->available_bytes = l;
    }
    if (d->on_plan) d->on_plan(p, d->plan_user);
    if (p->total_bytes > p->available_bytes)
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "cuda.memory-plan",
                        "the model does not fit on %s: weights %.3f GiB + KV cache %.3f GiB + scratch %.3f "
                        "GiB = %.3f GiB, "
                        "%.3f GiB available; use a shorter --ctx, fewer sequences, or --device cpu",
                        p->device, wb / 1073741824.0, p->kv_bytes / 1073741824.0, sc / 1073741824.0,
                        p->total_bytes / 1073741824.0, p->available_bytes / 1073741824.0);
    return FP4_OK;
}

static fp4_status cu_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out, fp4_error *err) {
    *out = NULL;
    const fp4_arch *a = &d->arch;
    if (max_cols < 1 || max_cols * (a->n_heads + 2 * a->n_kv_heads) > 65535 || d->n_ctx < 1 ||
        d->n_ctx > (1 << 30) || a->head_dim % 32 || a->head_dim > FP4_ARCH_MAX_HEAD_DIM ||
        a->n_heads % a->n_kv_heads)
        return fp4_fail(
            err, FP4_ERR_UNSUPPORTED, NULL, NULL, "cuda.shape",
            "the CUDA step needs head_dim a multiple of 32 up to %d, n_ctx <= 2^30 and at most 65535 "
            "(column, head) pairs per step (head_dim %lld)",
            FP4_ARCH_MAX_HEAD_DIM, (long long)a->head_dim);
    fp4_cuda_device_info info;
    fp4_status st = fp4_cuda_init(d->device, &info);
    if (st == FP4_ERR_NO_DEVICE || st == FP4_ERR_INVALID_ARG)
        return fp4_fail(err, FP4_ERR_NO_DEVICE, NULL, NULL, "cuda.device",
                        "no usable CUDA device %d (compute capability 8.0+); use --device cpu", d->device);
    if (st) return cuda_fail(err, st, NULL, "cuda.device", "cannot initialize the CUDA device");
    cu_state *s = (cu_state *)calloc(1, sizeof *s);
    if (!s) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    s->d = *d;
    s->max_cols = max_cols;
    const int te = (int)d->tok_embd->type;
    s->emb_on_device = te == FP4_TYPE_F16 || te == FP4_TYPE_BF16 || te == FP4_TYPE_NVFP4_E2M1;
    const char *ag = getenv("FP4LANE_CUDA_ATT_GEMM");
    s->att_gemm = d->mode == FP4_MODE_NATIVE && fp4_cu_gemm_available() && !(ag && !strcmp(ag, "0"));
    const char *ac = getenv("FP4LANE_CUDA_ATT_CLUSTER"); /* 0 off, 8 or 16 the cluster size (default 16) */
    const int want_cl = ac && !strcmp(ac, "8") ? 8 : 16;
    s->att_cl = ac && !strcmp(ac, "0") ? 0 : att_cluster_pick((int)a->head_dim, d->n_ctx, want_cl);
    const char *ab = getenv("FP4LANE_CUDA_ATT_CLUSTER_BPS"); /* 0, 1 or 2; unset: the rule */
    s->att_cl_bps = ab && ab[0] >= '0' && ab[0] <= '2' && !ab[1] ? ab[0] - '0' : -1;
    const char *aw = getenv("FP4LANE_CUDA_ATT_CLUSTER_WIDE"); /* 0: off; 2, 4, 8, 16: that size always */
    const int want_w = aw ? atoi(aw) : -1;
    s->att_cl_wide = !s->att_cl || want_w == 0 ? 0
                     : want_w >= 2 && want_w <= 16 ? att_cluster_pick((int)a->head_dim, d->n_ctx, want_w)
                                                   : -1; /* the table */
    for (int cs = 2; cs <= 8 && s->att_cl_wide < 0; cs *= 2)
        if (att_cluster_ok((int)a->head_dim, d->n_ctx, cs) &&
            att_cluster_fits(cs, d->n_ctx, (int)a->head_dim))
            s->att_wide_ok |= 1 << cs;
    if ((st = make_plan(s, &info, err))) {
        free(s);
        return st;
    }
    const int64_t nslot = a->n_layers * FP4_LW_COUNT_;
    s->w = (fp4_cuda_tensor *)calloc((size_t)nslot, sizeof *s->w);
    s->dv = (const float **)calloc((size_t)nslot, sizeof *s->dv);
    s->wf = (fp4_cuda_tensor *)calloc((size_t)(2 * a->n_layers), sizeof *s->wf);
    if (!s->w || !s->dv || !s->wf) {
        cu_destroy(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    *out = s; /* from here cu_destroy frees what exists; the caller gets NULL on failure */
#define FAIL(x)                                                                                              \
    do {                                                                                                     \
        st = (x);                                                                                            \
        cu_destroy(s);                                                                                       \
        *out = NULL;                                                                                         \
        return st;                                                                                           \
    } while (0)
    cudaError_t ce = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaStreamCreateWithFlags"), NULL, "cuda.alloc", "stream"));
    if ((size_t)a->hidden * 4 > 48 * 1024) { /* the norm's row in shared memory */
        ce = cudaFuncSetAttribute(stk_add_rmsnorm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)a->hidden * 4);
        if (ce != cudaSuccess)
            FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaFuncSetAttribute(stk_add_rmsnorm)"), NULL,
                           "cuda.shape", "hidden size above the shared memory of one block"));
    }
    /* weights: the fused groups first, then every projection slot no group took; NVFP4 ones
     * through one staging (pinned buffers, device-side scale check: device.cu), closed after */
    if ((st = fp4_cu_stager_open(&s->stage, FP4_CU_STAGE_BYTES)))
        FAIL(cuda_fail(err, st, NULL, "cuda.alloc", "upload staging"));
    for (int64_t L = 0; L < a->n_layers; L++)
        for (int g = 0; g < 2; g++) {
            const fp4_tensor *parts[3];
            const int np = fuse_parts(d, L, g, parts);
            if (np && (st = upload_fused(&s->stage, parts, np, &s->wf[2 * L + g])))
                FAIL(cuda_fail(err, st, parts[0]->name, "cuda.upload", "cannot upload a fused projection"));
        }
    for (int64_t i = 0; i < nslot; i++) {
        if (!is_proj_slot((int)(i % FP4_LW_COUNT_)) || !d->layer[i]) continue;
        const int sl = (int)(i % FP4_LW_COUNT_);
        const int g = sl == FP4_LW_GATE || sl == FP4_LW_UP ? 1 : sl == FP4_LW_O || sl == FP4_LW_DOWN ? -1 : 0;
        if (g >= 0 && s->wf[2 * (i / FP4_LW_COUNT_) + g].d_payload) continue;
        if ((st = upload(&s->stage, d->layer[i], &s->w[i])))
            FAIL(cuda_fail(err, st, d->layer[i]->name, "cuda.upload", "cannot upload this weight"));
    }
    for (int64_t i = 0; i < nslot + 2 * a->n_layers; i++) { /* native mode: the frag copies */
        fp4_cuda_tensor *t = i < nslot ? &s->w[i] : &s->wf[i - nslot];
        if (!t->d_payload || !frag_wanted(d->mode, d->n_slots, t->type, t->input_scale_inv)) continue;
        if ((st = fp4_cuda_tensor_make_frag(t)) && st != FP4_ERR_UNSUPPORTED)
            FAIL(cuda_fail(err, st, i < nslot ? d->layer[i]->name : NULL, "cuda.upload",
                           "cannot make the tensor-core copy of a projection"));
    }
    if ((s->emb_on_device || d->head == d->tok_embd) && (st = upload(&s->stage, d->tok_embd, &s->emb)))
        FAIL(cuda_fail(err, st, d->tok_embd->name, "cuda.upload", "cannot upload the embedding table"));
    if (d->head != d->tok_embd && (st = upload(&s->stage, d->head, &s->head)))
        FAIL(cuda_fail(err, st, d->head->name, "cuda.upload", "cannot upload the LM head"));
    if (d->invariant) { /* a drafting lane: no route whose k-column call rounds otherwise than 1-column */
        for (int64_t i = 0; i < nslot; i++) s->w[i].flags |= FP4_CUDA_TENSOR_INVARIANT;
        for (int64_t i = 0; i < 2 * a->n_layers; i++) s->wf[i].flags |= FP4_CUDA_TENSOR_INVARIANT;
        s->emb.flags |= FP4_CUDA_TENSOR_INVARIANT;
        s->head.flags |= FP4_CUDA_TENSOR_INVARIANT;
    }
    fp4_cu_stager_close(&s->stage);
    /* vectors and RoPE tables, one block */
    uint64_t nvec = (uint64_t)a->hidden;
    for (int64_t i = 0; i < nslot; i++)
        if (d->vec[i]) nvec += (uint64_t)vec_len(a, (int)(i % FP4_LW_COUNT_));
    const uint64_t nrope = (uint64_t)d->n_ctx * (uint64_t)(a->head_dim / 2);
    ce = cudaMalloc((void **)&s->d_vec, (nvec + 2 * nrope) * 4);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMalloc(vectors)"), NULL, "cuda.alloc", "vectors"));
    float *pv = s->d_vec;
    ce = cudaMemcpy(pv, d->out_norm_f32, (size_t)a->hidden * 4, cudaMemcpyHostToDevice);
    s->d_out_norm = pv;
    pv += a->hidden;
    for (int64_t i = 0; i < nslot && ce == cudaSuccess; i++) {
        if (!d->vec[i]) continue;
        const int64_t n = vec_len(a, (int)(i % FP4_LW_COUNT_));
        ce = cudaMemcpy(pv, d->vec[i], (size_t)n * 4, cudaMemcpyHostToDevice);
        s->dv[i] = pv;
        pv += n;
    }
    if (ce == cudaSuccess) ce = cudaMemcpy(pv, d->rope_cos, nrope * 4, cudaMemcpyHostToDevice);
    s->d_cos = pv;
    if (ce == cudaSuccess) ce = cudaMemcpy(pv + nrope, d->rope_sin, nrope * 4, cudaMemcpyHostToDevice);
    s->d_sin = pv + nrope;
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMemcpy(vectors)"), NULL, "cuda.upload", "vectors"));
    /* KV cache */
    const uint64_t kvn = (uint64_t)d->n_slots * a->n_layers * d->n_ctx * (a->n_kv_heads * a->head_dim);
    ce = cudaMalloc((void **)&s->d_kc, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&s->d_vc, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMemset(s->d_kc, 0, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMemset(s->d_vc, 0, kvn * 2);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMalloc(KV cache)"), NULL, "cuda.alloc", "KV cache"));
    /* scratch */
    buf_req r[32];
    const int nr = scratch_list(s, r);
    for (int i = 0; i < nr; i++) {
        ce = cudaMalloc(r[i].p, r[i].bytes ? r[i].bytes : 16);
        if (ce != cudaSuccess)
            FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMalloc(scratch)"), NULL, "cuda.alloc", "scratch"));
    }
    ce = cudaMemset(s->d_tk, 0, (size_t)(max_cols * a->n_heads) * 4);
    if (ce == cudaSuccess) ce = cudaMemset(s->d_am, 0, fp4_cuda_argmax_work_bytes(logit_rows(s)));
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMemset(tickets)"), NULL, "cuda.alloc", "scratch"));
    size_t psb = 0;
    for (int64_t i = 0; i < 2 * a->n_layers; i++)
        if (s->wf[i].d_payload && fp4_cuda_scratch_bytes(&s->wf[i], max_cols) > psb)
            psb = fp4_cuda_scratch_bytes(&s->wf[i], max_cols);
    for (int64_t i = 0; i < nslot; i++)
        if (s->w[i].d_payload)
            psb = fp4_cuda_scratch_bytes(&s->w[i], max_cols) > psb
                      ? fp4_cuda_scratch_bytes(&s->w[i], max_cols)
                      : psb;
    if (fp4_cuda_scratch_bytes(head_of(s), max_cols) > psb)
        psb = fp4_cuda_scratch_bytes(head_of(s), max_cols);
    if ((st = fp4_cuda_scratch_alloc(psb, &s->scratch)))
        FAIL(cuda_fail(err, st, NULL, "cuda.alloc", "projection scratch"));
    if (d->mode == FP4_MODE_NATIVE) fp4_cu_gemm_warm(); /* where the GEMM route is on, cuBLAS loads
                                                            here, not in the first prefill */
    ce = cudaHostAlloc((void **)&s->h_in, (size_t)(5 * max_cols) * 4, cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&s->h_lg, (size_t)(logit_rows(s) * a->vocab) * 4, cudaHostAllocDefault);
    if (ce == cudaSuccess && !s->emb_on_device)
        ce = cudaHostAlloc((void **)&s->h_emb, (size_t)(max_cols * a->hidden) * 4, cudaHostAllocDefault);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaHostAlloc"), NULL, "cuda.alloc", "pinned host buffers"));
    const char *na = getenv("FP4LANE_CUDA_NO_ARGMAX");
    s->argmax_off = na && *na && strcmp(na, "0");
    const char *nf = getenv("FP4LANE_CUDA_NO_ACTFUSE");
    s->act_fuse = !(nf && *nf && strcmp(nf, "0"));
    s->prof_path = getenv("FP4LANE_CUDA_PROFILE");
    if (s->prof_path && *s->prof_path) {
        s->ev = (cudaEvent_t *)calloc(PROF_MAX_EVENTS, sizeof *s->ev);
        for (int i = 0; s->ev && i < PROF_MAX_EVENTS && ce == cudaSuccess; i++)
            ce = cudaEventCreate(&s->ev[i]);
        if (!s->ev || ce != cudaSuccess)
            FAIL(
                cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaEventCreate"), NULL, "cuda.alloc", "profiling events"));
    } else
        s->prof_path = NULL;
#undef FAIL
    return FP4_OK;
}

static void cu_destroy(void *p) {
    cu_state *s = (cu_state *)p;
    if (!s) return;
    if (s->stream) cudaStreamSynchronize(s->stream);
    fp4_cu_stager_close(&s->stage);
    FILE *f = s->prof_path && (s->prof_steps[0] || s->prof_steps[1]) ? fopen(s->prof_path, "w") : NULL;
    for (int k = 0; f && k < 2; k++) { /* decode steps first (the section earlier tools read), then prefill */
        const int64_t n = s->prof_steps[k];
        if (!n) continue;
        double tot = 0;
        for (int i = 0; i < OP_COUNT_; i++)
            tot += s->prof_ms[k][i];
        if (k == 0)
            fprintf(f, "# %lld steps, %.3f ms per step (eager, events between ops)\n", (long long)n, tot / n);
        else
            fprintf(f, "# prefill: %lld steps of %lld columns in all, %.3f ms per step, %.1f columns/s "
                       "(eager)\n",
                    (long long)n, (long long)s->prof_cols[1], tot / n,
                    tot > 0 ? 1e3 * (double)s->prof_cols[1] / tot : 0.0);
        for (int i = 0; i < OP_COUNT_; i++)
            fprintf(f, "%-20s %9.4f ms/step %6.2f %%\n", op_names[i], s->prof_ms[k][i] / n,
                    tot > 0 ? 100.0 * s->prof_ms[k][i] / tot : 0.0);
    }
    if (f) fclose(f);
    if (s->ev) {
        for (int i = 0; i < PROF_MAX_EVENTS; i++)
            if (s->ev[i]) cudaEventDestroy(s->ev[i]);
        free(s->ev);
    }
    for (int i = 0; i < CU_MAX_GRAPHS; i++)
        if (s->graphs[i].exec) cudaGraphExecDestroy(s->graphs[i].exec);
    if (s->w)
        for (int64_t i = 0; i < s->d.arch.n_layers * FP4_LW_COUNT_; i++)
            fp4_cuda_tensor_free(&s->w[i]);
    if (s->wf)
        for (int64_t i = 0; i < 2 * s->d.arch.n_layers; i++)
            fp4_cuda_tensor_free(&s->wf[i]);
    fp4_cuda_tensor_free(&s->emb);
    fp4_cuda_tensor_free(&s->head);
    fp4_cuda_scratch_free(&s->scratch);
    buf_req r[32];
    const int nr = scratch_list(s, r);
    for (int i = 0; i < nr; i++)
        if (*r[i].p) cudaFree(*r[i].p);
    if (s->d_vec) cudaFree(s->d_vec);
    if (s->d_kc) cudaFree(s->d_kc);
    if (s->d_vc) cudaFree(s->d_vc);
    if (s->h_in) cudaFreeHost(s->h_in);
    if (s->h_lg) cudaFreeHost(s->h_lg);
    if (s->h_emb) cudaFreeHost(s->h_emb);
    if (s->stream) cudaStreamDestroy(s->stream);
    free(s->w);
    free(s->wf);
    free(s->dv);
    free(s);
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
        const unsigned blocks = (unsigned)((nsb + 1) / 2); /* 2 warps a block */
        STK_LAUNCH(err, "rt.swiglu",
                   exact ? fp4_cu_launch(dim3(blocks), dim3(64), 0, s->stream, 1, stk_swiglu_act<true>, a,
                                         (void *)s->d_aq, s->d_ad, g, u, F, nsb)
                         : fp4_cu_launch(dim3(blocks), dim3(64), 0, s->stream, 1, stk_swiglu_act<false>, a,
                                         (void *)s->d_aq, s->d_ad, g, u, F, nsb));
        prof_mark(s, OP_DOWN);
        const fp4_status st = fp4_cu_project_pre(wd, s->d.mode, s->d_aq, s->d_ad, s->d_t, s->stream);
        if (st == FP4_OK) return FP4_OK;
        if (st != FP4_ERR_UNSUPPORTED)
            return cuda_fail(err, st, name, "rt.project", "projection from the fused activation pass");
        return proj(s, wd, a, 1, s->d_t, name, err); /* a is written: the route's own pass */
    }
    STK_LAUNCH(err, "rt.swiglu",
               fp4_cu_launch(dim3(blocks_for(F, 256)), dim3(256), 0, s->stream, 1, stk_swiglu, a, g, u, F, F,
                             F));
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
 * step wins. attn_lab (s11-call2, µs a layer at positions 511 / 767 / 1023 / 2047 / 3967): 2 columns,
 * clusters of 8 10.87 / 13.23 / 15.26 / 24.13 / 42.66 against the two launches' 15.24 / 16.27 /
 * 17.56 / 25.21 / 39.62; 4 columns, of 4 15.60 / 20.00 / 24.66 / 43.25 against 20.84 / 25.05 / 27.04
 * / 40.73; 8 columns, of 2 26.25 / 36.24 and of 4 26.07 / 32.97 / 40.16 against 29.95 / 35.78 /
 * 41.73. The step gains less than the lab says: 8 sequences at positions 512-575 with clusters of 2
 * 1 757 against 1 698 tok/s (s11-call2/3, fp4lane bench, A faster), but at 900-963 clusters of 4
 * 1 601 against 1 612 (s11-call3, B faster) where the lab had them 1.6 µs ahead. So the rows keep the
 * lab's margins of 3 µs and more: up to position 767 at 2-4 columns and 639 at 5-8 (2 and 4
 * sequences at 512-575, s11-call5: 590.5 / 574.9 and 1 072.2 / 1 031.6 tok/s, A faster). Longer
 * contexts need more blocks a column than these clusters have. */
static const struct {
    int64_t min_cols, max_cols;
    int32_t max_pos;
    int cs;
} att_wide[] = {{2, 2, 767, 8}, {3, 4, 767, 4}, {5, 8, 639, 2}};

/* the cluster size of this step's attention at 2+ columns (0: the two launches) */
static int att_wide_cs(const cu_state *s, int64_t n) {
    if (!s->att_cl_wide || n < 2 || n > ATT_CL_WIDE_COLS) return 0;
    if (s->att_cl_wide > 0) return s->att_cl_wide; /* FP4LANE_CUDA_ATT_CLUSTER_WIDE's size */
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
    int gemm = s->att_gemm && n >= ATT_GEMM_MIN_COLS;
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
    if (!gemm && s->att_cl && n <= ATT_CL_MAX_COLS)
        STK_LAUNCH(err, "rt.attention",
                   att_cluster(aa, n, s->att_cl, s->att_cl_bps < 0 ? att_cluster_bps(n) : s->att_cl_bps,
                               s->stream));
    else if (!gemm && att_wide_cs(s, n))
        STK_LAUNCH(err, "rt.attention", att_cluster(aa, n, att_wide_cs(s, n), 0, s->stream));
    else if (!gemm) STK_LAUNCH(err, "rt.attention", stk_attention(aa, n, s->stream));
    return FP4_OK;
}

/* One layer; the residual add of its down projection (in d_t) is left to the next add_norm. */
static fp4_status layer(cu_state *s, int64_t L, int64_t n, const stk_cols *cols, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t D = a->head_dim, NH = a->n_heads, NKV = a->n_kv_heads, F = a->ffn;
    const int64_t kvd = NKV * D;
    const fp4_cuda_tensor *w = s->w + L * FP4_LW_COUNT_;
    const fp4_tensor *const *hw = s->d.layer + L * FP4_LW_COUNT_;
    const float *const *v = s->dv + L * FP4_LW_COUNT_;
    const int64_t slot_stride = a->n_layers * s->d.n_ctx * kvd;
    uint16_t *kc = s->d_kc + L * s->d.n_ctx * kvd, *vc = s->d_vc + L * s->d.n_ctx * kvd;
    fp4_status st;
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, L ? s->d_t : NULL, v[FP4_LW_ATTN_NORM], s->d_h, NULL, err))) return st;
    prof_mark(s, OP_QKV);
    const fp4_cuda_tensor *fqkv = &s->wf[2 * L], *fgu = &s->wf[2 * L + 1];
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
                        s->d_cos,
                        s->d_sin,
                        kc,
                        vc,
                        slot_stride,
                        (int)NH,
                        (int)NKV,
                        (int)D,
                        a->qk_permuted,
                        a->rms_eps,
                        *cols};
    if (!a->qkv_bias) pa.bq = pa.bk = pa.bv = NULL;
    STK_LAUNCH(err, "rt.qkv-prep",
               fp4_cu_launch(dim3((unsigned)n, (unsigned)(NH + 2 * NKV)), dim3((unsigned)D), 0, s->stream, 1,
                             stk_qkv_prep, pa));
    prof_mark(s, OP_ATTN);
    stk_att_args aa = {qb,      q_cs,     kc,       vc,      slot_stride, s->d_sc,    s->d_bmax,
                       s->d_st, s->d_den, s->d_tk,  s->d_o,  s->d.n_ctx,  (int)NH,    (int)NKV,
                       (int)D,  0,        s->d.attn_scale, *cols};
    if ((st = attention(s, n, aa, kc, vc, slot_stride, err))) return st;
    prof_mark(s, OP_O);
    if ((st = proj(s, &w[FP4_LW_O], s->d_o, n, s->d_t, hw[FP4_LW_O]->name, err))) return st;
    prof_mark(s, OP_NORM);
    if ((st = add_norm(s, n, s->d_t, v[FP4_LW_FFN_NORM], s->d_h, NULL, err))) return st;
    prof_mark(s, OP_GATEUP);
    float *act = s->d_g; /* the down projection's input: [col][F] */
    if (fgu->d_payload) { /* one projection: [col][2F], g then u */
        if ((st = proj(s, fgu, s->d_h, n, s->d_g, hw[FP4_LW_GATE]->name, err))) return st;
        prof_mark(s, OP_SWIGLU);
        if (n == 1 && s->act_fuse) /* SwiGLU and down's activation pass in one kernel */
            return swiglu_down1(s, s->d_g, s->d_g + F, s->d_u, &w[FP4_LW_DOWN], hw[FP4_LW_DOWN]->name, err);
        STK_LAUNCH(err, "rt.swiglu",
                   fp4_cu_launch(dim3(blocks_for(n * F, 256)), dim3(256), 0, s->stream, 1, stk_swiglu, s->d_u,
                                 (const float *)s->d_g, (const float *)(s->d_g + F), F, 2 * F, n * F));
        act = s->d_u;
    } else {
        if ((st = proj(s, &w[FP4_LW_GATE], s->d_h, n, s->d_g, hw[FP4_LW_GATE]->name, err)) ||
            (st = proj(s, &w[FP4_LW_UP], s->d_h, n, s->d_u, hw[FP4_LW_UP]->name, err)))
            return st;
        prof_mark(s, OP_SWIGLU);
        if (n == 1 && s->act_fuse)
            return swiglu_down1(s, s->d_g, s->d_u, s->d_g, &w[FP4_LW_DOWN], hw[FP4_LW_DOWN]->name, err);
        STK_LAUNCH(err, "rt.swiglu",
                   fp4_cu_launch(dim3(blocks_for(n * F, 256)), dim3(256), 0, s->stream, 1, stk_swiglu, s->d_g,
                                 (const float *)s->d_g, (const float *)s->d_u, F, F, n * F));
    }
    prof_mark(s, OP_DOWN);
    return proj(s, &w[FP4_LW_DOWN], act, n, s->d_t, hw[FP4_LW_DOWN]->name, err);
}

static fp4_status body(cu_state *s, int64_t n, int64_t nw, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t mc = s->max_cols;
    const stk_cols cols = {s->d_in, s->d_in + mc, s->d_in + 2 * mc, s->d_in + 3 * mc};
    fp4_status st;
    prof_mark(s, OP_EMBED);
    if (s->emb_on_device && (st = fp4_cuda_embed(&s->emb, cols.tok, n, s->d_x, s->stream)))
        return cuda_fail(err, st, s->d.tok_embd->name, "rt.embed", "embedding lookup");
    for (int64_t L = 0; L < a->n_layers; L++)
        if ((st = layer(s, L, n, &cols, err))) return st;
    prof_mark(s, OP_HEAD);
    if (!nw) return FP4_OK; /* the last residual add only feeds the final norm */
    if ((st = add_norm(s, n, s->d_t, s->d_out_norm, s->d_hh, cols.lrow, err))) return st;
    return proj(s, head_of(s), s->d_hh, nw, s->d_lg, s->d.head->name, err);
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

/* the step; logits (host rows) or, greedy, tokens (one per want_logits column) */
static fp4_status cu_step_impl(cu_state *s, const fp4_rt_col *cols, int64_t n, float *logits, int32_t *tokens,
                               fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    const int64_t mc = s->max_cols, H = a->hidden, V = a->vocab;
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
    if (nw && !logits && !tokens)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "logits wanted but no buffer given");
    const int on_device = tokens && !s->argmax_off; /* only the tokens cross to the host */
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
    fp4_status st = run_body(s, n, nw, err);
    if (st) {
        cudaStreamSynchronize(s->stream);
        (void)cudaGetLastError();
        return st;
    }
    int32_t *h_tok = s->h_in + 4 * mc;
    if (nw && on_device) {
        if ((st = fp4_cuda_argmax_rows(s->d_lg, nw, V, V, s->d_am, s->d_tok, s->stream)))
            return cuda_fail(err, st, NULL, "rt.greedy", "argmax of the logits");
        CU_TRY(err, cudaMemcpyAsync(h_tok, s->d_tok, (size_t)nw * 4, cudaMemcpyDeviceToHost, s->stream),
               "cuda.step");
    } else if (nw)
        CU_TRY(err,
               cudaMemcpyAsync(s->h_lg, s->d_lg, (size_t)(nw * V) * 4, cudaMemcpyDeviceToHost, s->stream),
               "cuda.step");
    if (s->prof_path) prof_mark(s, OP_COUNT_);
    CU_TRY(err, cudaStreamSynchronize(s->stream), "cuda.step"); /* the one host synchronization of the step */
    if (nw && on_device) memcpy(tokens, h_tok, (size_t)nw * 4);
    else if (nw && tokens)
        for (int64_t k = 0; k < nw; k++)
            tokens[k] = fp4_rt_greedy_argmax(s->h_lg + k * V, V);
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

static fp4_status cu_step(void *p, const fp4_rt_col *cols, int64_t n, float *logits, fp4_error *err) {
    return cu_step_impl((cu_state *)p, cols, n, logits, NULL, err);
}
static fp4_status cu_step_greedy(void *p, const fp4_rt_col *cols, int64_t n, int32_t *tokens,
                                 fp4_error *err) {
    return cu_step_impl((cu_state *)p, cols, n, NULL, tokens, err);
}

static fp4_status kv_copy(cu_state *s, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v, int to_host) {
    const fp4_arch *a = &s->d.arch;
    const int64_t kvd = a->n_kv_heads * a->head_dim;
    if (slot < 0 || slot >= s->d.n_slots || n_pos < 0 || n_pos > s->d.n_ctx) return FP4_ERR_INVALID_ARG;
    cudaError_t e0 = cudaSetDevice(s->d.device);
    if (e0 == cudaSuccess) e0 = cudaStreamSynchronize(s->stream);
    if (e0 != cudaSuccess) return FP4_CUDA_FAIL(e0, "cudaStreamSynchronize(KV cache)");
    for (int64_t L = 0; L < a->n_layers; L++) {
        const int64_t off = ((int64_t)slot * a->n_layers + L) * s->d.n_ctx * kvd;
        const size_t bytes = sizeof(uint16_t) * (size_t)(n_pos * kvd);
        cudaError_t e;
        if (to_host) {
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
static fp4_status cu_kv_read(void *p, int32_t slot, int64_t n_pos, uint16_t *k, uint16_t *v) {
    return kv_copy((cu_state *)p, slot, n_pos, k, v, 1);
}
static fp4_status cu_kv_write(void *p, int32_t slot, int64_t n_pos, const uint16_t *k, const uint16_t *v) {
    return kv_copy((cu_state *)p, slot, n_pos, (uint16_t *)k, (uint16_t *)v, 0);
}

/* Columns per step: the runtime's 64, or 512 in native mode where the native GEMM route is on
 * (unless FP4LANE_CUDA_GEMM=0, a16_gemm.cu: it widens each weight once per call, so a prefill wants few,
 * wide calls), fewer where the attention scores buffer (columns x heads x n_ctx floats) would pass
 * 512 MiB or the (column, head) grid rows 65535; never below 64. */
#define CU_STEP_COLS 512
#define CU_SCORES_BYTES ((uint64_t)512 << 20)
static int64_t cu_step_cols(const fp4_rt_model_desc *d) {
    const fp4_arch *a = &d->arch;
    if (d->mode != FP4_MODE_NATIVE || !fp4_cu_gemm_available()) return 64;
    int64_t mc = CU_STEP_COLS;
    const uint64_t per_col = (uint64_t)a->n_heads * (uint64_t)(d->n_ctx > 0 ? d->n_ctx : 1) * 4;
    if ((uint64_t)mc * per_col > CU_SCORES_BYTES) mc = (int64_t)(CU_SCORES_BYTES / per_col);
    const int64_t heads = a->n_heads + 2 * a->n_kv_heads;
    if (heads > 0 && mc * heads > 65535) mc = 65535 / heads;
    return mc < 64 ? 64 : mc;
}

static const fp4_rt_backend_ops cu_ops = {
    FP4_RT_BACKEND_ABI, "cuda", cu_route, cu_create, cu_destroy, cu_step, cu_kv_read, cu_kv_write,
    cu_step_cols, cu_step_greedy,
};

extern "C" __attribute__((visibility("default"))) const fp4_rt_backend_ops *
fp4_rt_cuda_backend(uint32_t abi) {
    return abi == FP4_RT_BACKEND_ABI ? &cu_ops : NULL;
}
