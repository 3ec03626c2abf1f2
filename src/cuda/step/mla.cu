/* mla.cu — the CUDA step's latent attention (DeepSeek-V3) at creation: kv_b widened to f32 on the
 * host exactly as the CPU widens it (src/cpu/mla.c: fp4_tensor_dequant_rows of kv_b_proj, or of
 * llama.cpp's split attn_k_b / attn_v_b; W_UK kept transposed), uploaded once; the step's own
 * buffers (q_a, the kv_a rows, the heads' outputs); their place in the memory plan; their end. The
 * layer itself is mla.cuh (step.cu). */
#include "cuda/step/mla_impl.cuh"
#include <stdlib.h>
#include <string.h>

static void mla_dims(const fp4_arch *a, cu_mla *m) {
    m->R = a->kv_lora_rank, m->dr = a->qk_rope_dim, m->dn = a->qk_nope_dim, m->dv = a->v_head_dim;
    m->NH = a->n_heads, m->QL = a->q_lora_rank, m->W = m->R + m->dr, m->kd = fp4_arch_kv_dim(a);
}
static uint64_t kvb_floats(const cu_mla *m) {
    return (uint64_t)(m->NH * (m->dn + m->dv) * m->R);
}
static uint64_t ukt_floats(const cu_mla *m) {
    return (uint64_t)(m->NH * m->R * m->dn);
}
static uint64_t step_floats(const cu_mla *m, int64_t mc) {
    return (uint64_t)mc * (uint64_t)((m->QL ? m->QL : 1) + m->W + m->NH * m->dv);
}

extern "C" fp4_status fp4_cu_mla_plan(const cu_state *s, uint64_t *weights, uint64_t *scratch,
                                      fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    *weights = *scratch = 0;
    if (a->kv_lora_rank <= 0) return FP4_OK;
    cu_mla m;
    mla_dims(a, &m);
    /* the attention block keeps the absorbed query and the head's latent output in shared memory, the
     * prep block every head's rope part */
    if ((m.W + m.R) * 4 > 47 * 1024 || (m.NH + 1) * m.dr * 4 > 47 * 1024)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "cuda.shape",
                        "latent attention with kv_lora_rank %lld, qk_rope_head_dim %lld and %lld heads is "
                        "beyond the CUDA step's shared memory; use --device cpu",
                        (long long)m.R, (long long)m.dr, (long long)m.NH);
    *weights = (uint64_t)a->n_layers * FP4_CU_ALIGN((kvb_floats(&m) + ukt_floats(&m)) * 4);
    *scratch = FP4_CU_ALIGN(step_floats(&m, s->max_cols) * 4);
    return FP4_OK;
}

/* layer L's kv_b widened: kvb [NH (dn+dv)][R] and ukt [NH][R][dn] (src/cpu/mla.c's widen_kvb) */
static fp4_status widen_kvb(const cu_mla *m, const fp4_tensor *const *w, float *kv, float *t) {
    const int64_t R = m->R, dn = m->dn, dv = m->dv, NH = m->NH;
    const fp4_tensor *kb = w[FP4_LW_KV_B];
    fp4_status st;
    if (!kb) {
        if (!w[FP4_LW_K_B] || !w[FP4_LW_V_B]) return FP4_ERR_INVALID_ARG;
        float *vb = (float *)malloc(sizeof(float) * (size_t)(NH * dv * R));
        st = vb ? fp4_tensor_dequant_rows(w[FP4_LW_K_B], 0, NH * R, t) : FP4_ERR_NOMEM;
        if (!st) st = fp4_tensor_dequant_rows(w[FP4_LW_V_B], 0, NH * dv, vb);
        memset(kv, 0, sizeof(float) * (size_t)kvb_floats(m));
        for (int64_t h = 0; !st && h < NH; h++)
            memcpy(kv + (h * (dn + dv) + dn) * R, vb + h * dv * R, sizeof(float) * (size_t)(dv * R));
        free(vb);
        return st;
    }
    if ((st = fp4_tensor_dequant_rows(kb, 0, NH * (dn + dv), kv))) return st;
    for (int64_t h = 0; h < NH; h++)
        for (int64_t i = 0; i < dn; i++)
            for (int64_t r = 0; r < R; r++)
                t[(h * R + r) * dn + i] = kv[(h * (dn + dv) + i) * R + r];
    return FP4_OK;
}

extern "C" fp4_status fp4_cu_mla_create(cu_state *s, fp4_error *err) {
    const fp4_arch *a = &s->d.arch;
    if (a->kv_lora_rank <= 0) return FP4_OK;
    cu_mla *m = (cu_mla *)calloc(1, sizeof *m);
    if (!m) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    s->mla = m;
    mla_dims(a, m);
    const int64_t nl = a->n_layers;
    const uint64_t per = kvb_floats(m) + ukt_floats(m);
    cudaError_t e = cudaMalloc((void **)&m->d_kvb, (size_t)(nl * per * 4));
    if (e != cudaSuccess)
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMalloc(kv_b)"), NULL, "cuda.alloc", "kv_b widened");
    m->d_ukt = m->d_kvb + kvb_floats(m);
    float *h = (float *)malloc(sizeof(float) * (size_t)per);
    if (!h) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t L = 0; L < nl; L++) {
        const fp4_tensor *const *w = s->d.layer + L * FP4_LW_COUNT_;
        const fp4_status st = widen_kvb(m, w, h, h + kvb_floats(m));
        if (st) {
            free(h);
            const fp4_tensor *t = w[FP4_LW_KV_B] ? w[FP4_LW_KV_B] : w[FP4_LW_K_B];
            return fp4_fail(err, st, NULL, t ? t->name : NULL, "rt.mla", "cannot widen kv_b");
        }
        e = cudaMemcpy(m->d_kvb + L * per, h, (size_t)(per * 4), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) break;
    }
    free(h);
    if (e != cudaSuccess)
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMemcpy(kv_b)"), NULL, "cuda.upload", "kv_b widened");
    const uint64_t sf = step_floats(m, s->max_cols);
    e = cudaMalloc((void **)&m->d_qa, (size_t)(sf * 4));
    if (e == cudaSuccess) e = cudaMemset(m->d_qa, 0, (size_t)(sf * 4));
    if (e != cudaSuccess)
        return cuda_fail(err, FP4_CUDA_FAIL(e, "cudaMalloc(MLA scratch)"), NULL, "cuda.alloc", "MLA scratch");
    m->d_kva = m->d_qa + s->max_cols * (m->QL ? m->QL : 1);
    m->d_o = m->d_kva + s->max_cols * m->W;
    return FP4_OK;
}

extern "C" void fp4_cu_mla_free(cu_state *s) {
    cu_mla *m = s->mla;
    if (!m) return;
    if (m->d_kvb) cudaFree(m->d_kvb);
    if (m->d_qa) cudaFree(m->d_qa);
    free(m);
    s->mla = NULL;
}
