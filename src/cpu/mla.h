/* mla.h — the CPU backend's multi-head latent attention (DeepSeek-V3), used by step.c. */
#ifndef FP4_CPU_MLA_H
#define FP4_CPU_MLA_H

#include "backend/backend.h"
#include "cpu/cpu_impl.h"

typedef struct fp4_cpu_mla fp4_cpu_mla;

/* kv_b widened and scratch for max_cols columns; the latent rows (kv_lora_rank + qk_rope_dim halves
 * per position and layer) live in kv, fp4_arch_kv_dim halves per layer in K, the rest in V (the
 * backend's kv_read / kv_write layout). d and kv must outlive the state. */
fp4_status fp4_cpu_mla_create(const fp4_rt_model_desc *d, const fp4_kv_pages *kv, int64_t max_cols,
                              fp4_cpu_mla **out, fp4_error *err);
void fp4_cpu_mla_destroy(fp4_cpu_mla *m);
/* Layer L's attention for n columns: h [n][H] (attn-normed) -> t [n][H] (o_proj's output); writes
 * each column's cache row first. */
fp4_status fp4_cpu_mla_attend(fp4_cpu_mla *m, int64_t L, const fp4_rt_col *cols, int64_t n, const float *h,
                              float *t, fp4_error *err);

#endif
