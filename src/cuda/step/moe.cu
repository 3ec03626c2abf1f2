/* moe.cu — the CUDA step's mixture-of-experts layers at creation: their place in the memory plan
 * (every router and every expert, computed from the descriptors before anything is allocated), the
 * refusals of what the device step does not run (naming the tensor), the upload (each layer's
 * gate, up and down of all experts as one allocation per part: moe_experts.cuh), the per-step
 * buffers, and their end. The layer itself is moe.cuh (step.cu). */
#include "cuda/step/moe_impl.cuh"
#include <stdlib.h>
#include <string.h>

static const fp4_tensor *const *layer_moe(const fp4_rt_model_desc *d, int64_t L) {
    const fp4_tensor *const *mw = d->moe ? d->moe + L * FP4_MOE_STRIDE(d->arch.n_experts) : NULL;
    return mw && mw[FP4_MOE_ROUTER] ? mw : NULL;
}
static int64_t rows_of(const fp4_tensor *t) {
    int64_t r = 1;
    for (int i = 1; i < t->n_dims; i++)
        r *= t->ne[i];
    return r;
}
static float isi_of(const fp4_tensor *t) {
    return t->type == FP4_TYPE_NVFP4_E2M1 ? t->nvfp4.input_scale_inv : 0.0f;
}

/* part (0 gate, 1 up, 2 down) of layer L: one type and shape over the experts [x0, x1) the engine
 * holds (all of them but on a rank of the split step), with a route */
static fp4_status part_stub(const fp4_rt_model_desc *d, int64_t L, int part, int64_t x0, int64_t x1,
                            fp4_cu_moe_part *o, fp4_error *err) {
    const fp4_tensor *const *mw = layer_moe(d, L);
    const fp4_tensor *t0 = mw[FP4_MOE_AT(x0, part + 1)];
    for (int64_t e = x0; e < x1; e++) {
        const fp4_tensor *t = mw[FP4_MOE_AT(e, part + 1)];
        if (!t || t->n_dims < 1)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, t0 ? t0->name : NULL, "cuda.moe-expert",
                            "layer %lld: expert %lld has no %s tensor", (long long)L, (long long)e,
                            part == 0   ? "gate"
                            : part == 1 ? "up"
                                        : "down");
        if (!fp4_cu_moe_route_name(t->type, t->ne[0], isi_of(t)))
            return fp4_fail(
                err, FP4_ERR_REFUSED_ROUTE, NULL, t->name, "route.moe-cuda-lane",
                "no CUDA route for this expert (type %d, n_in %lld%s): the CUDA step runs experts "
                "in NVFP4 W4A16 (n_in a multiple of 256) and F16/BF16; use --device cpu",
                (int)t->type, (long long)t->ne[0], isi_of(t) > 0.0f ? ", W4A4" : "");
        if (!t0 || t->type != t0->type || t->ne[0] != t0->ne[0] || rows_of(t) != rows_of(t0) ||
            isi_of(t) != isi_of(t0) ||
            (t->type == FP4_TYPE_NVFP4_E2M1 && (t->nvfp4.n_out != rows_of(t) || t->nvfp4.n_in != t->ne[0])))
            return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "cuda.moe-expert",
                            "the experts of one layer differ in type or shape (this one against %s)",
                            t0 ? t0->name : "?");
    }
    if (fp4_cu_moe_part_stub(t0->type, rows_of(t0), t0->ne[0], isi_of(t0), x1 - x0, o))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, t0->name, "route.moe-cuda-lane", "no CUDA layout");
    o->native = d->mode == FP4_MODE_NATIVE && o->type == FP4_TYPE_NVFP4_E2M1; /* SPEC §6's arithmetic */
    return FP4_OK;
}

static uint64_t part_bytes(const fp4_cu_moe_part *p) {
    return FP4_CU_ALIGN((uint64_t)(p->n_experts * (p->e_pbytes + p->e_sbytes)));
}

/* a column's routing scratch in floats: E, or fp4p_moe_route_group's 2 E + n_group and then its
 * topk_group group indices (DeepSeek-V3) */
static uint64_t route_scratch(const fp4_arch *a) {
    const uint64_t E = (uint64_t)a->n_experts;
    if (a->moe_routing != FP4_MOE_SIGMOID_GROUP) return E;
    return 2 * E + (uint64_t)(a->moe_n_group + a->moe_topk_group);
}

/* the per-step buffers: one list, so the plan and the allocation agree */
static int step_bufs(cu_state *s, cu_moe *m, const fp4_cu_moe_part *parts, buf_req *r) {
    const fp4_arch *a = &s->d.arch;
    const uint64_t mc = (uint64_t)s->max_cols, E = (uint64_t)m->E, K = (uint64_t)m->K, FE = (uint64_t)m->FE,
                   H = (uint64_t)a->hidden, FS = (uint64_t)(a->n_shared_experts * a->moe_ffn);
    m->q_bytes = 0;
    for (int i = 0; i < 3; i++) { /* gate and up read the columns, down the pairs */
        const size_t b = fp4_cu_moe_scratch_bytes(&parts[i], (int64_t)(i < 2 ? mc : mc * K));
        if (b > m->q_bytes) m->q_bytes = b;
    }
    int n = 0;
    r[n++] = (buf_req){(void **)&m->d_rl, mc * E * 4};
    r[n++] = (buf_req){(void **)&m->d_rs, mc * route_scratch(a) * 4};
    r[n++] = (buf_req){(void **)&m->d_sel, mc * K * 4};
    r[n++] = (buf_req){(void **)&m->d_rw, mc * K * 4};
    r[n++] =
        (buf_req){(void **)&m->d_grp, (uint64_t)fp4_cu_moe_group_ints((int64_t)(mc * K), (int64_t)E) * 4};
    r[n++] = (buf_req){(void **)&m->d_g, mc * K * FE * 4};
    r[n++] = (buf_req){(void **)&m->d_u, mc * K * FE * 4};
    r[n++] = (buf_req){(void **)&m->d_y, mc * K * H * 4};
    r[n++] = (buf_req){&m->d_q, m->q_bytes};
    r[n++] = (buf_req){(void **)&m->d_sg, mc * FS * 4}; /* DeepSeek-V3's shared experts (0 without) */
    r[n++] = (buf_req){(void **)&m->d_su, mc * FS * 4};
    r[n++] = (buf_req){(void **)&m->d_sh, FS ? mc * H * 4 : 0};
    if (m->EL < m->E) r[n++] = (buf_req){(void **)&m->d_selg, mc * K * 4};
    return n;
}

extern "C" {

fp4_status fp4_cu_moe_plan(cu_state *s, uint64_t *weights, uint64_t *scratch, size_t *proj_scratch,
                           fp4_error *err) {
    const fp4_rt_model_desc *d = &s->d;
    const fp4_arch *a = &d->arch;
    *weights = *scratch = 0, *proj_scratch = 0;
    if (!d->moe) return FP4_OK;
    const int group = a->moe_routing == FP4_MOE_SIGMOID_GROUP; /* DeepSeek-V3: groups, shared experts */
    if ((a->moe_routing != FP4_MOE_SOFTMAX_TOPK && a->moe_routing != FP4_MOE_TOPK_SOFTMAX && !group) ||
        (a->n_shared_experts > 0 && !group) || a->n_experts < 1 || a->n_experts_used < 1 ||
        (group && (a->moe_n_group < 1 || a->moe_topk_group < 1 || a->moe_topk_group > a->moe_n_group ||
                   a->n_experts % a->moe_n_group)) ||
        a->n_experts_used > a->n_experts || a->n_experts > 65535 ||
        s->max_cols * a->n_experts_used > 65535) /* a launch's (column, choice) pairs: grid rows */
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.moe-cuda",
                        "this mixture of experts (routing %d, %lld shared experts) runs on the CPU in this "
                        "version; use --device cpu",
                        (int)a->moe_routing, (long long)a->n_shared_experts);
    fp4_cu_moe_part parts[3] = {};
    int any = 0;
    int64_t x0, x1;
    fp4_cu_tp_experts(s->tp, a->n_experts, &x0, &x1);
    for (int64_t L = 0; L < a->n_layers; L++) {
        const fp4_tensor *const *mw = layer_moe(d, L);
        if (!mw) continue;
        fp4_cuda_tensor t;
        uint64_t b = 0;
        if (group && !d->vec[L * FP4_LW_COUNT_ + FP4_LW_EXP_BIAS])
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, mw[FP4_MOE_ROUTER]->name, "cuda.moe-expert",
                            "layer %lld: no e_score_correction_bias", (long long)L);
        if (a->n_shared_experts > 0 && (!d->layer[L * FP4_LW_COUNT_ + FP4_LW_SH_GATE] ||
                                        !d->layer[L * FP4_LW_COUNT_ + FP4_LW_SH_UP] ||
                                        !d->layer[L * FP4_LW_COUNT_ + FP4_LW_SH_DOWN]))
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, mw[FP4_MOE_ROUTER]->name, "cuda.moe-expert",
                            "layer %lld: n_shared_experts > 0 but no shared expert tensors", (long long)L);
        if (fp4_cu_step_stub(mw[FP4_MOE_ROUTER], &t, &b) || !fp4_cu_step_route(mw[FP4_MOE_ROUTER], d->mode))
            return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, mw[FP4_MOE_ROUTER]->name, "route.tensor",
                            "no CUDA route for this router (type %d)", (int)mw[FP4_MOE_ROUTER]->type);
        *weights += b;
        const size_t ps = fp4_cuda_scratch_bytes(&t, s->max_cols);
        if (ps > *proj_scratch) *proj_scratch = ps;
        fp4_status st;
        for (int i = 0; i < 3; i++) {
            fp4_cu_moe_part p;
            if ((st = part_stub(d, L, i, x0, x1, &p, err))) return st;
            *weights += part_bytes(&p) + FP4_CU_ALIGN((uint64_t)p.n_experts * 4);
            if (!any || fp4_cu_moe_scratch_bytes(&p, 1) > fp4_cu_moe_scratch_bytes(&parts[i], 1))
                parts[i] = p;
        }
        any = 1;
    }
    if (!any) return FP4_OK;
    cu_moe m = {};
    m.E = a->n_experts, m.K = a->n_experts_used, m.FE = a->moe_ffn, m.x0 = x0, m.EL = x1 - x0;
    if (parts[0].n_out != m.FE || parts[1].n_out != m.FE || parts[2].n_in != m.FE ||
        parts[2].n_out != a->hidden || parts[0].n_in != a->hidden)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, NULL, "cuda.moe-expert",
                        "the experts' shapes are not [moe_ffn, hidden] / [hidden, moe_ffn]");
    buf_req r[13];
    const int n = step_bufs(s, &m, parts, r);
    for (int i = 0; i < n; i++)
        *scratch += FP4_CU_ALIGN(r[i].bytes);
    return FP4_OK;
}

size_t fp4_cu_moe_proj_scratch(const cu_state *s) {
    size_t psb = 0;
    for (int64_t L = 0; s->moe && L < s->d.arch.n_layers; L++)
        if (s->moe->router[L].d_payload && fp4_cuda_scratch_bytes(&s->moe->router[L], s->max_cols) > psb)
            psb = fp4_cuda_scratch_bytes(&s->moe->router[L], s->max_cols);
    return psb;
}

void fp4_cu_moe_free(cu_state *s) {
    cu_moe *m = s->moe;
    if (!m) return;
    const int64_t nl = s->d.arch.n_layers;
    for (int64_t L = 0; m->router && L < nl; L++)
        fp4_cuda_tensor_free(&m->router[L]);
    for (int64_t i = 0; m->arena && i < 3 * nl; i++)
        if (m->arena[i]) cudaFree(m->arena[i]);
    if (m->d_scale2) cudaFree(m->d_scale2);
    if (m->d_rl) cudaFree(m->d_rl); /* the per-step buffers: one allocation from d_rl */
    free(m->router), free(m->part), free(m->arena);
    free(m);
    s->moe = NULL;
}

/* upload one part of layer L into its allocation; scale2 (E floats, host) filled */
static fp4_status upload_part(cu_state *s, int64_t L, int part, float *scale2, fp4_error *err) {
    cu_moe *m = s->moe;
    const fp4_tensor *const *mw = layer_moe(&s->d, L);
    fp4_cu_moe_part *p = &m->part[3 * L + part];
    fp4_status st = part_stub(&s->d, L, part, m->x0, m->x0 + m->EL, p, err);
    if (st) return st;
    void **arena = &m->arena[3 * L + part];
    const size_t bytes = part_bytes(p);
    cudaError_t e = cudaMalloc(arena, bytes);
    if (e == cudaSuccess) e = cudaMemsetAsync(*arena, 0, bytes, s->stage.stream); /* the uploads' stream */
    if (e == cudaSuccess) e = cudaStreamSynchronize(s->stage.stream);
    if (e != cudaSuccess)
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMalloc(experts)"), mw[FP4_MOE_AT(m->x0, part + 1)]->name,
                         "cuda.alloc", "experts");
    uint8_t *pay = (uint8_t *)*arena, *sc = pay + p->n_experts * p->e_pbytes;
    p->d_payload = pay;
    p->d_scales = p->type == FP4_TYPE_NVFP4_E2M1 ? sc : NULL;
    for (int64_t x = 0; x < p->n_experts; x++) {
        const fp4_tensor *t = mw[FP4_MOE_AT(m->x0 + x, part + 1)];
        scale2[x] = 1.0f;
        if (t->type == FP4_TYPE_NVFP4_E2M1) {
            scale2[x] = t->nvfp4.scale2;
            st = fp4_cu_upload_nvfp4_into(&s->stage, &t->nvfp4, pay + x * p->e_pbytes,
                                          (size_t)p->payload_stride, sc + x * p->e_sbytes,
                                          (size_t)p->scale_stride);
        } else {
            e = cudaMemcpy(pay + x * p->e_pbytes, t->data, (size_t)p->e_pbytes, cudaMemcpyHostToDevice);
            st = e == cudaSuccess ? FP4_OK : FP4_CUDA_FAIL(e, "cudaMemcpy(expert)");
        }
        if (st) return cuda_fail(err, st, t->name, "cuda.upload", "cannot upload this expert");
    }
    return FP4_OK;
}

fp4_status fp4_cu_moe_create(cu_state *s, fp4_error *err) {
    const fp4_rt_model_desc *d = &s->d;
    const int64_t nl = d->arch.n_layers, E = d->arch.n_experts;
    if (!d->moe) return FP4_OK;
    cu_moe *m = (cu_moe *)calloc(1, sizeof *m);
    if (!m) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    s->moe = m;
    m->E = E, m->K = d->arch.n_experts_used, m->FE = d->arch.moe_ffn;
    int64_t x1;
    fp4_cu_tp_experts(s->tp, E, &m->x0, &x1);
    m->EL = x1 - m->x0;
    /* the per-pair order is the form proven on a device (CPU bits, H200); the grouped kernel is opt-in
     * until a device run has proven it */
    m->how = s->env.moe_grouped ? FP4_CU_MOE_GROUPED : FP4_CU_MOE_ORDERED;
    m->router = (fp4_cuda_tensor *)calloc((size_t)nl, sizeof *m->router);
    m->part = (fp4_cu_moe_part *)calloc((size_t)(3 * nl), sizeof *m->part);
    m->arena = (void **)calloc((size_t)(3 * nl), sizeof *m->arena);
    float *h_s2 = (float *)malloc(sizeof(float) * (size_t)(3 * nl * E));
    if (!m->router || !m->part || !m->arena || !h_s2) {
        free(h_s2);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    fp4_status st = FP4_OK;
    const fp4_cu_moe_part *first = NULL;
    for (int64_t L = 0; L < nl && !st; L++) {
        const fp4_tensor *const *mw = layer_moe(d, L);
        if (!mw) continue;
        if ((st = fp4_cu_step_upload(&s->stage, mw[FP4_MOE_ROUTER], &m->router[L]))) {
            st = cuda_fail(err, st, mw[FP4_MOE_ROUTER]->name, "cuda.upload", "cannot upload the router");
            break;
        }
        if (d->invariant) m->router[L].flags |= FP4_CUDA_TENSOR_INVARIANT;
        for (int i = 0; i < 3 && !st; i++)
            st = upload_part(s, L, i, h_s2 + (3 * L + i) * E, err);
        if (!first) first = &m->part[3 * L];
    }
    cudaError_t e = cudaSuccess;
    if (!st) e = cudaMalloc((void **)&m->d_scale2, sizeof(float) * (size_t)(3 * nl * E));
    if (!st && e == cudaSuccess)
        e = cudaMemcpy(m->d_scale2, h_s2, sizeof(float) * (size_t)(3 * nl * E), cudaMemcpyHostToDevice);
    free(h_s2);
    if (!st && e != cudaSuccess)
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMalloc(scale2)"), NULL, "cuda.alloc", "experts' scales");
    if (st) return st;
    for (int64_t i = 0; i < 3 * nl; i++)
        if (m->part[i].d_payload) m->part[i].d_scale2 = m->d_scale2 + i * E;
    if (!first) return FP4_OK;
    /* the per-step buffers, one allocation (largest parts: the plan's sizes) */
    fp4_cu_moe_part big[3];
    for (int i = 0; i < 3; i++) {
        big[i] = first[i];
        for (int64_t L = 0; L < nl; L++)
            if (m->part[3 * L + i].d_payload &&
                fp4_cu_moe_scratch_bytes(&m->part[3 * L + i], 1) > fp4_cu_moe_scratch_bytes(&big[i], 1))
                big[i] = m->part[3 * L + i];
    }
    buf_req r[13];
    const int n = step_bufs(s, m, big, r);
    uint64_t tot = 0;
    for (int i = 0; i < n; i++)
        tot += FP4_CU_ALIGN(r[i].bytes);
    uint8_t *blk = NULL;
    e = cudaMalloc((void **)&blk, tot ? tot : 16);
    if (e == cudaSuccess) e = cudaMemset(blk, 0, tot ? tot : 16);
    if (e != cudaSuccess) {
        if (blk) cudaFree(blk);
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMalloc(MoE scratch)"), NULL, "cuda.alloc", "MoE scratch");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; off += FP4_CU_ALIGN(r[i].bytes), i++)
        *r[i].p = blk + off; /* r[0] is d_rl: fp4_cu_moe_free frees the block through it */
    return FP4_OK;
}

} /* extern "C" */
