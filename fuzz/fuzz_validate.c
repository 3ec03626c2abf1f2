/* fuzz_validate.c — libFuzzer target for the whole validator: container parsing (GGUF or
 * safetensors, chosen by the magic) plus every loading rule, then every accessor and a
 * dequantization of the first row of each tensor. The input is opened a second time with
 * FP4_LOAD_DEFER_REPACK (llama.cpp type-40 tensors left as the file's blocks): the same verdict,
 * rule, tensor and message, the same tensors, and the same first rows to the bit. Build: make
 * fuzz-build. */
#include "fp4lane.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_error(const fp4_error *a, const fp4_error *b) {
    return !strcmp(a->file, b->file) && !strcmp(a->tensor, b->tensor) && !strcmp(a->rule, b->rule) &&
           !strcmp(a->msg, b->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fp4_model *m = NULL, *md = NULL;
    fp4_error e, ed;
    fp4_load_opts o = {.max_file_bytes = 1u << 20};
    const fp4_status st = fp4_model_open_memory(data, size, "fuzz", &o, &m, &e);
    o.flags = FP4_LOAD_DEFER_REPACK;
    const fp4_status sd = fp4_model_open_memory(data, size, "fuzz", &o, &md, &ed);
    if (sd != st || (st != FP4_OK && !same_error(&e, &ed))) abort(); /* deferred: the same verdict */
    if (st != FP4_OK) return 0;
    if (fp4_model_n_tensors(md) != fp4_model_n_tensors(m)) abort();
    float *row = NULL, *row_d = NULL;
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i), *td = fp4_model_tensor(md, i);
        if (fp4_model_find(m, t->name) != t) abort(); /* the name index must agree */
        if (strcmp(t->name, td->name) || t->type != td->type) abort();
        if (t->n_dims < 1 || t->ne[0] > (1 << 16)) continue;
        float *r = realloc(row, sizeof(float) * (size_t)t->ne[0]),
              *rd = r ? realloc(row_d, sizeof(float) * (size_t)t->ne[0]) : NULL;
        if (r) row = r;
        if (rd) row_d = rd;
        if (!r || !rd) break;
        int64_t rows = 1;
        for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
        if (rows > 0) {
            const fp4_status a = fp4_tensor_dequant_rows(t, 0, 1, row),
                             b = fp4_tensor_dequant_rows(td, 0, 1, row_d);
            if (a != b || (a == FP4_OK && memcmp(row, row_d, sizeof(float) * (size_t)t->ne[0]))) abort();
        }
        if (t->type == FP4_TYPE_NVFP4_E2M1 && fp4_nvfp4_view_check(&t->nvfp4, NULL, NULL) != FP4_OK) abort();
        if (td->type == FP4_TYPE_NVFP4_E2M1 && fp4_nvfp4_view_check(&td->nvfp4, NULL, NULL) != FP4_OK)
            abort();
    }
    free(row);
    free(row_d);
    (void)fp4_model_layout(m);
    (void)fp4_model_weight_precision(m);
    (void)fp4_model_act_precision(m);
    if (fp4_model_layout(md) != fp4_model_layout(m) ||
        fp4_model_weight_precision(md) != fp4_model_weight_precision(m) ||
        fp4_model_act_precision(md) != fp4_model_act_precision(m))
        abort();
    fp4_model_close(m);
    fp4_model_close(md);
    return 0;
}
