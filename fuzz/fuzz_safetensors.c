/* fuzz_safetensors.c — libFuzzer target for the safetensors reader: opens the input as a
 * buffer and walks every accessor, touching every byte a tensor claims. Invariants that a
 * successful open promises are checked with __builtin_trap() so the fuzzer reports them. */
#include "fp4lane_io.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond) {
    if (!cond) __builtin_trap();
}

static void walk(const fp4_st *st, const uint8_t *data, size_t size) {
    int64_t n = fp4_st_n_tensors(st);
    uint64_t covered = 0;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < n; i++) {
        const fp4_st_tensor *t = fp4_st_tensor_at(st, i);
        must(t != NULL && t->name != NULL && t->name[0] != 0 && strlen(t->name) <= FP4_MAX_NAME);
        must(fp4_st_find(st, t->name) == t);
        must(fp4_st_dtype_name(t->dtype) != NULL && t->rank >= 0 && t->rank <= FP4_MAX_DIMS);
        uint64_t bits = (uint64_t)fp4_st_dtype_bits(t->dtype);
        for (int d = 0; d < t->rank; d++) {
            must(t->shape[d] >= 0 && t->shape[d] <= FP4_ST_MAX_DIM);
            bits *= (uint64_t)t->shape[d]; /* cannot wrap: the reader checked it */
        }
        must(bits / 8 == t->nbytes && bits % 8 == 0);
        must(t->data >= data && (size_t)(t->data - data) <= size &&
             t->nbytes <= size - (size_t)(t->data - data));
        for (size_t k = 0; k < t->nbytes; k++) sink ^= t->data[k];
        covered += t->nbytes;
    }
    must(8 + fp4_st_header_len(st) + covered == size);
    must(fp4_st_tensor_at(st, n) == NULL);
    for (int64_t i = 0; i < fp4_st_n_metadata(st); i++) {
        const char *k = NULL, *v = NULL;
        must(fp4_st_metadata_at(st, i, &k, &v) == FP4_OK && k && v);
        must(fp4_st_metadata_get(st, k) != NULL);
    }
    must(fp4_st_metadata_at(st, fp4_st_n_metadata(st), NULL, NULL) == FP4_ERR_NOT_FOUND);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fp4_st *st = NULL;
    fp4_error err;
    fp4_status s = fp4_st_open_buffer(data, size, &st, &err);
    if (s == FP4_OK) {
        walk(st, data, size);
        fp4_st_close(st);
    } else {
        must(st == NULL && err.code == s && err.rule[0] != 0);
    }
    return 0;
}
