/* create.cu — the CUDA backend's engine: the memory plan computed from the descriptors alone
 * (weights, KV cache, scratch), reported (desc->on_plan) and refused when it does not fit
 * (FP4_ERR_NOMEM, "cuda.memory-plan"); then the weights uploaded once (upload.cu), the vectors and
 * the host's RoPE table uploaded as they are, the F16 KV cache and the step's scratch allocated on
 * the device; and the engine's end (with FP4LANE_CUDA_PROFILE, the per-op report). The
 * FP4LANE_CUDA_* variables are read once here, into the engine (env.h). */
#include "cuda/step/step_impl.cuh"
#include "cuda/step/mla_impl.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[OP_COUNT_] = {
    "embed",  "add + rmsnorm", "proj q/k/v", "bias/rope/kv-write", "attention",
    "proj o", "proj gate/up",  "swiglu",     "proj down",          "final add + norm + head"};

static int is_proj_slot(int s) {
    return s == FP4_LW_Q || s == FP4_LW_K || s == FP4_LW_V || s == FP4_LW_O || s == FP4_LW_GATE ||
           s == FP4_LW_UP || s == FP4_LW_DOWN || s == FP4_LW_Q_A || s == FP4_LW_KV_A || s == FP4_LW_SH_GATE ||
           s == FP4_LW_SH_UP || s == FP4_LW_SH_DOWN; /* DeepSeek-V3: q_a, kv_a, the shared experts */
}
static int64_t vec_len(const fp4_arch *a, int slot) {
    switch (slot) {
    case FP4_LW_ATTN_NORM:
    case FP4_LW_FFN_NORM:
    case FP4_LW_ATTN_POST_NORM:
    case FP4_LW_FFN_POST_NORM:
        return a->hidden;
    case FP4_LW_Q_NORM:
    case FP4_LW_K_NORM:
        return a->head_dim;
    case FP4_LW_Q_BIAS:
        return a->n_heads * a->head_dim;
    case FP4_LW_K_BIAS:
    case FP4_LW_V_BIAS:
        return a->n_kv_heads * a->head_dim;
    case FP4_LW_Q_A_NORM:
        return a->q_lora_rank;
    case FP4_LW_KV_A_NORM:
        return a->kv_lora_rank;
    case FP4_LW_EXP_BIAS:
        return a->n_experts;
    default:
        return 0;
    }
}

/* the RoPE table's row: head_dim, or latent attention's qk_rope_dim (the runtime's fp4_rt_rope_dim) */
static int64_t rope_dim(const fp4_arch *a) {
    return a->kv_lora_rank > 0 ? a->qk_rope_dim : a->head_dim;
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
        if (fp4_cu_step_stub(w, &t, &b))
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, w->name, "cuda.type",
                            "type %d has no CUDA layout", (int)w->type);
        if (i < nslot && fp4_cu_step_frag_wanted(&s->env, d->mode, d->n_slots, t.type, t.input_scale_inv))
            wb += FP4_CU_ALIGN(frag_bytes(t.n_out + 15, t.k_pad)); /* its frag copy (a fused group's tiles) */
        wb += b;
        if (i <= nslot || d->head == d->tok_embd) {
            const size_t sb = fp4_cuda_scratch_bytes(&t, s->max_cols);
            if (sb > proj_scratch) proj_scratch = sb;
        }
    }
    for (int64_t L = 0; L < a->n_layers; L++)
        for (int g = 0; g < 2; g++)
            if (fp4_cu_step_fuse_stub(d, s->env.no_fuse, L, g, &t)) {
                const size_t sb = fp4_cuda_scratch_bytes(&t, s->max_cols);
                if (sb > proj_scratch) proj_scratch = sb;
            }
    /* out_norm + cos/sin (and the local layers' cos/sin) */
    uint64_t nvec =
        (uint64_t)a->hidden + (uint64_t)d->n_ctx * (uint64_t)rope_dim(a) * (d->rope_cos_local ? 2 : 1);
    for (int64_t i = 0; i < nslot; i++)
        if (d->vec[i]) nvec += (uint64_t)vec_len(a, (int)(i % FP4_LW_COUNT_));
    wb += FP4_CU_ALIGN(nvec * 4);
    uint64_t moe_w, moe_sc; /* every router and expert, the MoE step's buffers (moe.cu) */
    size_t moe_ps;
    const fp4_status mst = fp4_cu_moe_plan(s, &moe_w, &moe_sc, &moe_ps, err);
    if (mst) return mst;
    wb += moe_w;
    if (moe_ps > proj_scratch) proj_scratch = moe_ps;
    uint64_t mla_w, mla_sc; /* kv_b widened, the latent attention's buffers (mla.cu) */
    const fp4_status lst = fp4_cu_mla_plan(s, &mla_w, &mla_sc, err);
    if (lst) return lst;
    wb += mla_w;
    p->weights_bytes = wb;
    uint64_t kvn;
    const uint64_t kvd = (uint64_t)fp4_arch_kv_dim(a); /* latent attention: its rows */
    if (__builtin_mul_overflow((uint64_t)d->n_slots * (uint64_t)s->kv_rows, kvd, &kvn) ||
        kvn > (UINT64_MAX / 8))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "rt.kv", "KV cache size overflows");
    p->kv_bytes = 2 * FP4_CU_ALIGN(kvn * 2);
    buf_req r[CU_MAX_BUFS];
    const int nr = fp4_cu_step_scratch_list(s, r);
    uint64_t sc = FP4_CU_ALIGN(proj_scratch) + moe_sc + mla_sc;
    for (int i = 0; i < nr; i++)
        sc += FP4_CU_ALIGN(r[i].bytes);
    p->scratch_bytes = sc;
    p->total_bytes = p->weights_bytes + p->kv_bytes + p->scratch_bytes;
    size_t free_b = 0, total_b = 0;
    CU_TRY(err, cudaMemGetInfo(&free_b, &total_b), "cuda.memory-plan");
    p->available_bytes = free_b > CU_RESERVE_BYTES ? free_b - CU_RESERVE_BYTES : 0;
    if (s->env.mem_limit < p->available_bytes) p->available_bytes = s->env.mem_limit;
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

extern "C" fp4_status fp4_cu_step_create(const fp4_rt_model_desc *d, int64_t max_cols, void **out,
                                         fp4_error *err) {
    return fp4_cu_step_create_as(d, max_cols, NULL, out, err);
}

extern "C" fp4_status fp4_cu_step_create_as(const fp4_rt_model_desc *d, int64_t max_cols,
                                            struct cu_tp_rank *tp, void **out, fp4_error *err) {
    *out = NULL;
    const fp4_arch *a = &d->arch;
    const int mla = a->kv_lora_rank > 0; /* its heads are mla.cuh's, of any width */
    if (max_cols < 1 || max_cols * (a->n_heads + 2 * a->n_kv_heads) > 65535 || d->n_ctx < 1 ||
        d->n_ctx > (1 << 30) || (!mla && a->head_dim % 32) || a->head_dim > FP4_ARCH_MAX_HEAD_DIM ||
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
    s->tp = tp; /* a rank of the split step: its experts (moe.cu) and, at step time, its gathers */
    s->max_cols = max_cols;
    const int te = (int)d->tok_embd->type;
    s->emb_on_device = te == FP4_TYPE_F16 || te == FP4_TYPE_BF16 || te == FP4_TYPE_NVFP4_E2M1;
    fp4_cu_env_read(&s->env); /* every knob of this engine, now */
    s->att_gemm = d->mode == FP4_MODE_NATIVE && fp4_cu_gemm_available() && s->env.att_gemm;
    fp4_cu_step_att_plan(s);
    if ((st = fp4_cu_step_kv_layout(s))) /* the rows of each layer (gemma.cu) */
        st = fp4_fail(err, st, NULL, NULL, "rt.kv", "KV cache layout: %s", fp4_status_str(st));
    fp4_cu_step_prep_start(s); /* cuBLAS's handle beside the plan and the upload (warm.cu) */
    if (st || (st = make_plan(s, &info, err))) {
        fp4_cu_step_prep_join(s);
        free(s->kv_off), free(s->kv_ring), free(s);
        return st;
    }
    const int64_t nslot = a->n_layers * FP4_LW_COUNT_;
    s->w = (fp4_cuda_tensor *)calloc((size_t)nslot, sizeof *s->w);
    s->dv = (const float **)calloc((size_t)nslot, sizeof *s->dv);
    s->wf = (fp4_cuda_tensor *)calloc((size_t)(2 * a->n_layers), sizeof *s->wf);
    if (!s->w || !s->dv || !s->wf) {
        fp4_cu_step_destroy(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    *out = s; /* from here fp4_cu_step_destroy frees what exists; the caller gets NULL on failure */
#define FAIL(x)                                                                                              \
    do {                                                                                                     \
        st = (x);                                                                                            \
        fp4_cu_step_destroy(s);                                                                              \
        *out = NULL;                                                                                         \
        return st;                                                                                           \
    } while (0)
    cudaError_t ce = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaStreamCreateWithFlags"), NULL, "cuda.alloc", "stream"));
    if ((size_t)a->hidden * 4 > 48 * 1024) { /* the norm's row in shared memory */
        ce = fp4_cu_step_norm_smem((int)a->hidden * 4);
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
            const int np = fp4_cu_step_fuse_parts(d, s->env.no_fuse, L, g, parts);
            if (np && (st = fp4_cu_step_upload_fused(&s->stage, parts, np, &s->wf[2 * L + g])))
                FAIL(cuda_fail(err, st, parts[0]->name, "cuda.upload", "cannot upload a fused projection"));
        }
    for (int64_t i = 0; i < nslot; i++) {
        if (!is_proj_slot((int)(i % FP4_LW_COUNT_)) || !d->layer[i]) continue;
        const int sl = (int)(i % FP4_LW_COUNT_);
        const int g = sl == FP4_LW_GATE || sl == FP4_LW_UP                   ? 1
                      : sl == FP4_LW_Q || sl == FP4_LW_K || sl == FP4_LW_V ? 0
                                                                           : -1;
        if (g >= 0 && s->wf[2 * (i / FP4_LW_COUNT_) + g].d_payload) continue;
        if ((st = fp4_cu_step_upload(&s->stage, d->layer[i], &s->w[i])))
            FAIL(cuda_fail(err, st, d->layer[i]->name, "cuda.upload", "cannot upload this weight"));
    }
    for (int64_t i = 0; i < nslot + 2 * a->n_layers; i++) { /* native mode: the frag copies */
        fp4_cuda_tensor *t = i < nslot ? &s->w[i] : &s->wf[i - nslot];
        if (!t->d_payload ||
            !fp4_cu_step_frag_wanted(&s->env, d->mode, d->n_slots, t->type, t->input_scale_inv))
            continue;
        if ((st = fp4_cuda_tensor_make_frag(t)) && st != FP4_ERR_UNSUPPORTED)
            FAIL(cuda_fail(err, st, i < nslot ? d->layer[i]->name : NULL, "cuda.upload",
                           "cannot make the tensor-core copy of a projection"));
    }
    if ((st = fp4_cu_moe_create(s, err)) || (st = fp4_cu_mla_create(s, err))) FAIL(st);
    if ((s->emb_on_device || d->head == d->tok_embd) &&
        (st = fp4_cu_step_upload(&s->stage, d->tok_embd, &s->emb)))
        FAIL(cuda_fail(err, st, d->tok_embd->name, "cuda.upload", "cannot upload the embedding table"));
    if (d->head != d->tok_embd && (st = fp4_cu_step_upload(&s->stage, d->head, &s->head)))
        FAIL(cuda_fail(err, st, d->head->name, "cuda.upload", "cannot upload the LM head"));
    if (d->invariant) { /* a drafting lane: no route whose k-column call rounds otherwise than 1-column */
        for (int64_t i = 0; i < nslot; i++)
            s->w[i].flags |= FP4_CUDA_TENSOR_INVARIANT;
        for (int64_t i = 0; i < 2 * a->n_layers; i++)
            s->wf[i].flags |= FP4_CUDA_TENSOR_INVARIANT;
        s->emb.flags |= FP4_CUDA_TENSOR_INVARIANT;
        s->head.flags |= FP4_CUDA_TENSOR_INVARIANT;
    }
    /* FP4LANE_CUDA_DECODE where set: the item kernel's variant bits travel with the tensors */
    for (int64_t i = 0; s->env.decode >= 0 && i < nslot + 2 * a->n_layers; i++)
        (i < nslot ? &s->w[i] : &s->wf[i - nslot])->flags |=
            (uint32_t)s->env.decode << FP4_CU_DEC_SHIFT | FP4_CU_DEC_SET;
    fp4_cu_stager_close(&s->stage);
    /* vectors and RoPE tables, one block */
    uint64_t nvec = (uint64_t)a->hidden;
    for (int64_t i = 0; i < nslot; i++)
        if (d->vec[i]) nvec += (uint64_t)vec_len(a, (int)(i % FP4_LW_COUNT_));
    const uint64_t nrope = (uint64_t)d->n_ctx * (uint64_t)(rope_dim(a) / 2);
    ce = cudaMalloc((void **)&s->d_vec, (nvec + (d->rope_cos_local ? 4 : 2) * nrope) * 4);
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
    if (d->rope_cos_local) { /* Gemma 3's local layers */
        s->d_cos_l = pv + 2 * nrope, s->d_sin_l = pv + 3 * nrope;
        if (ce == cudaSuccess)
            ce = cudaMemcpy(pv + 2 * nrope, d->rope_cos_local, nrope * 4, cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
            ce = cudaMemcpy(pv + 3 * nrope, d->rope_sin_local, nrope * 4, cudaMemcpyHostToDevice);
    }
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMemcpy(vectors)"), NULL, "cuda.upload", "vectors"));
    /* KV cache */
    const uint64_t kvn = (uint64_t)d->n_slots * s->kv_rows * fp4_arch_kv_dim(a);
    ce = cudaMalloc((void **)&s->d_kc, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&s->d_vc, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMemset(s->d_kc, 0, kvn * 2);
    if (ce == cudaSuccess) ce = cudaMemset(s->d_vc, 0, kvn * 2);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaMalloc(KV cache)"), NULL, "cuda.alloc", "KV cache"));
    /* scratch */
    buf_req r[CU_MAX_BUFS];
    const int nr = fp4_cu_step_scratch_list(s, r);
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
    if (fp4_cu_moe_proj_scratch(s) > psb) psb = fp4_cu_moe_proj_scratch(s);
    if (fp4_cuda_scratch_bytes(head_of(s), max_cols) > psb)
        psb = fp4_cuda_scratch_bytes(head_of(s), max_cols);
    if ((st = fp4_cuda_scratch_alloc(psb, &s->scratch)))
        FAIL(cuda_fail(err, st, NULL, "cuda.alloc", "projection scratch"));
    fp4_cu_step_prep_join(s);
    if (d->mode == FP4_MODE_NATIVE)
        fp4_cu_gemm_warm(); /* where the GEMM route is on, cuBLAS loads here, not in the first prefill
                             * (made already where the thread of warm.cu ran) */
    ce = cudaHostAlloc((void **)&s->h_in, (size_t)(6 * max_cols) * 4, cudaHostAllocDefault);
    if (ce == cudaSuccess)
        ce = cudaHostAlloc((void **)&s->h_lg, (size_t)(logit_rows(s) * a->vocab) * 4, cudaHostAllocDefault);
    if (ce == cudaSuccess && !s->emb_on_device)
        ce = cudaHostAlloc((void **)&s->h_emb, (size_t)(max_cols * a->hidden) * 4, cudaHostAllocDefault);
    if (ce != cudaSuccess)
        FAIL(cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaHostAlloc"), NULL, "cuda.alloc", "pinned host buffers"));
    s->argmax_off = s->env.no_argmax;
    s->act_fuse = !s->env.no_actfuse;
    s->prof_path = s->env.profile;
    if (s->prof_path) {
        s->ev = (cudaEvent_t *)calloc(PROF_MAX_EVENTS, sizeof *s->ev);
        for (int i = 0; s->ev && i < PROF_MAX_EVENTS && ce == cudaSuccess; i++)
            ce = cudaEventCreate(&s->ev[i]);
        if (!s->ev || ce != cudaSuccess)
            FAIL(
                cuda_fail(err, FP4_CUDA_FAIL(ce, "cudaEventCreate"), NULL, "cuda.alloc", "profiling events"));
    }
    if ((st = fp4_cu_step_warm(s, err))) FAIL(st);
#undef FAIL
    return FP4_OK;
}

extern "C" void fp4_cu_step_destroy(void *p) {
    cu_state *s = (cu_state *)p;
    if (!s) return;
    fp4_cu_step_prep_join(s);
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
            fprintf(f,
                    "# prefill: %lld steps of %lld columns in all, %.3f ms per step, %.1f columns/s "
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
    fp4_cu_moe_free(s);
    fp4_cu_mla_free(s);
    fp4_cuda_tensor_free(&s->emb);
    fp4_cuda_tensor_free(&s->head);
    fp4_cuda_scratch_free(&s->scratch);
    buf_req r[CU_MAX_BUFS];
    const int nr = fp4_cu_step_scratch_list(s, r);
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
    free(s->kv_off), free(s->kv_ring);
    free(s);
}
