/* gemma.cu — the host side of what Gemma 3 adds to the CUDA step (step_impl.cuh): where each
 * layer's K/V rows live in a slot (a global layer's n_ctx rows, a local layer's ring of
 * R = sliding_window + max_cols positions stored twice, backend.h fp4_rt_kv_ring: the CPU's
 * kv_rows.c layout, so a window is one run of rows and the attention reads it as a full cache's
 * prefix), the ring layers' KV snapshot copies, and the embedding scale. A model without local
 * layers gets the plain layout: layer L at row L * n_ctx, n_layers * n_ctx rows a slot. */
#include "cuda/step/step_impl.cuh"
#include "format/pinned_gemma.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" fp4_status fp4_cu_step_kv_layout(cu_state *s) {
    const fp4_arch *a = &s->d.arch;
    s->kv_off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(a->n_layers + 1));
    s->kv_ring = (int64_t *)malloc(sizeof(int64_t) * (size_t)(a->n_layers + 1));
    if (!s->kv_off || !s->kv_ring) return FP4_ERR_NOMEM;
    int64_t rows = 0;
    for (int64_t L = 0; L < a->n_layers; L++) {
        s->kv_off[L] = rows;
        s->kv_ring[L] = fp4_rt_kv_ring(a, L, s->d.n_ctx, s->max_cols);
        if (__builtin_add_overflow(rows, s->kv_ring[L] ? 2 * s->kv_ring[L] : s->d.n_ctx, &rows))
            return FP4_ERR_OVERFLOW;
    }
    s->kv_off[a->n_layers] = s->kv_rows = rows;
    /* the embedding's dtype (a quantized table's model is bf16) and sqrt(H) held in it, as the
     * CPU's fp4_cpu_embed_scale */
    const int t = (int)s->d.tok_embd->type;
    s->emb_dtype = t == FP4_TYPE_F32 ? 0 : t == FP4_TYPE_F16 ? 1 : 2;
    s->emb_scale = fp4p_round_to((float)sqrt((double)a->hidden), s->emb_dtype);
    return FP4_OK;
}

/* host rows [h0, h0 + n) of k and v to / from the slot's device rows from row r */
static cudaError_t copy_rows(cu_state *s, int64_t base, int64_t r, uint16_t *k, uint16_t *v, int64_t h0,
                             int64_t n, int to_host) {
    const int64_t kvd = s->d.arch.n_kv_heads * s->d.arch.head_dim;
    const size_t bytes = sizeof(uint16_t) * (size_t)(n * kvd);
    uint16_t *dk = s->d_kc + base + r * kvd, *dv = s->d_vc + base + r * kvd;
    cudaError_t e;
    if (to_host) {
        e = cudaMemcpyAsync(k + h0 * kvd, dk, bytes, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(v + h0 * kvd, dv, bytes, cudaMemcpyDeviceToHost, s->stream);
    } else {
        e = cudaMemcpyAsync(dk, k + h0 * kvd, bytes, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dv, v + h0 * kvd, bytes, cudaMemcpyHostToDevice, s->stream);
    }
    return e;
}

extern "C" cudaError_t fp4_cu_step_kv_ring_copy(cu_state *s, int32_t slot, int64_t L, int64_t n_pos,
                                                uint16_t *k, uint16_t *v, int to_host) {
    const fp4_arch *a = &s->d.arch;
    const int64_t kvd = a->n_kv_heads * a->head_dim, R = s->kv_ring[L];
    const int64_t base = ((int64_t)slot * s->kv_rows + s->kv_off[L]) * kvd;
    const int64_t first = n_pos > a->sliding_window ? n_pos - a->sliding_window : 0, len = n_pos - first;
    if (len <= 0) return cudaSuccess;
    if (to_host) { /* one run: rows first % R .. (the second copy past R where it wraps) */
        memset(k, 0, sizeof(uint16_t) * (size_t)(first * kvd));
        memset(v, 0, sizeof(uint16_t) * (size_t)(first * kvd));
        return copy_rows(s, base, first % R, k, v, first, len, 1);
    }
    /* every position to both of its rows: the run up to the ring's end, then the wrapped rest */
    const int64_t r0 = first % R, len1 = len < R - r0 ? len : R - r0;
    cudaError_t e = copy_rows(s, base, r0, k, v, first, len1, 0);
    if (e == cudaSuccess) e = copy_rows(s, base, r0 + R, k, v, first, len1, 0);
    if (e == cudaSuccess && len > len1) e = copy_rows(s, base, 0, k, v, first + len1, len - len1, 0);
    if (e == cudaSuccess && len > len1) e = copy_rows(s, base, R, k, v, first + len1, len - len1, 0);
    return e;
}
