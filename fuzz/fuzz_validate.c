/* fuzz_validate.c — libFuzzer target for the whole validator: container parsing (GGUF or
 * safetensors, chosen by the magic) plus every loading rule, then every accessor and a
 * dequantization of the first row of each tensor. Build: make fuzz-build. */
#include "fp4lane.h"
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_load_opts o = {.max_file_bytes = 1u << 20};
    if (fp4_model_open_memory(data, size, "fuzz", &o, &m, &e) != FP4_OK) return 0;
    float *row = NULL;
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (fp4_model_find(m, t->name) != t) abort(); /* the name index must agree */
        if (t->n_dims < 1 || t->ne[0] > (1 << 16)) continue;
        float *r = realloc(row, sizeof(float) * (size_t)t->ne[0]);
        if (!r) break;
        row = r;
        int64_t rows = 1;
        for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
        if (rows > 0) (void)fp4_tensor_dequant_rows(t, 0, 1, row);
        if (t->type == FP4_TYPE_NVFP4_E2M1 && fp4_nvfp4_view_check(&t->nvfp4, NULL, NULL) != FP4_OK) abort();
    }
    free(row);
    (void)fp4_model_layout(m);
    (void)fp4_model_weight_precision(m);
    (void)fp4_model_act_precision(m);
    fp4_model_close(m);
    return 0;
}
