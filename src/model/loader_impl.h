/* loader_impl.h — what loader.c shares with the per-container loaders. */
#ifndef FP4_LOADER_IMPL_H
#define FP4_LOADER_IMPL_H
#include "model_impl.h"

fp4_status fp4_load_gguf(fp4_model *m, fp4_error *err);
fp4_status fp4_load_hf(fp4_model *m, fp4_error *err);

int fp4_scalar_ok(float v);
fp4_status fp4_check_scalar(const fp4_ckpt *c, const fp4_raw *r, int allow_rank0, const char *what, float *v,
                            fp4_error *err);
fp4_status fp4_check_scale_bytes(const fp4_ckpt *c, const char *name, const uint8_t *s, int64_t n_rows,
                                 int64_t n_groups, fp4_error *err);
fp4_status fp4_check_exact_pair(const fp4_ckpt *c, const char *name, float mul, float div, fp4_error *err);
/* Fill one scalar pair from its native form v (is_mul: v is a multiplier) and an optional exact
 * other form (have_other). */
fp4_status fp4_fill_pair(const fp4_ckpt *c, const char *name, float v, int is_mul, int have_other, float other,
                         float *mul, float *div, uint8_t *mul_exact, uint8_t *div_exact, fp4_error *err);
/* fp4lane.exact.<name>.<what> from GGUF KV (F32) or safetensors metadata (hex float): 1 found,
 * 0 absent, <0 malformed (err filled). */
int fp4_exact_get(const fp4_ckpt *c, const char *name, const char *what, float *v, fp4_error *err);

fp4_mtensor *fp4_model_push(fp4_model *m, int64_t cap);
void fp4_mt_plain(fp4_mtensor *mt, const fp4_raw *r);
fp4_status fp4_model_finish(fp4_model *m, int has_key_wp, int key_wp, int has_key_ap, int key_ap, int strict_keys,
                            fp4_error *err);
int fp4_lane_parse(const char *s, const char *const *names, int n);
const char *const *fp4_wp_names(void);
const char *const *fp4_ap_names(void);
/* quant_claims.c: every quantization statement of the checkpoint against its loaded tensors */
fp4_status fp4_quant_claims_check(const fp4_model *m, fp4_error *err);
#endif
