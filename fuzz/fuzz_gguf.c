/* fuzz_gguf.c — libFuzzer target for the GGUF reader: opens the input as a buffer and, when it
 * is accepted, walks every KV and tensor accessor, touching every byte a view exposes, and
 * traps on any broken invariant (a view outside the input, an index that does not find itself).
 *   make fuzz-build && build-fuzz/fuzz_gguf -dict=fuzz/fuzz_gguf.dict fuzz/corpus/fuzz_gguf */
#include "fp4lane_io.h"
#include <stdint.h>
#include <string.h>

static const uint8_t *in_lo, *in_hi;
static volatile uint64_t sink;

static void inside(const void *p, uint64_t n) {
    const uint8_t *q = p;
    if (n == 0) return;
    if (!q || q < in_lo || q > in_hi || n > (uint64_t)(in_hi - q)) __builtin_trap();
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++) s += q[i];
    sink += s;
}

static void walk_scalar(const fp4_gguf *g, int64_t i) {
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    uint64_t u64; int64_t i64; float f32; double f64; int b; const char *s; uint64_t len;
    fp4_status st[12] = {
        fp4_gguf_get_u8(g, i, &u8),   fp4_gguf_get_i8(g, i, &i8),   fp4_gguf_get_u16(g, i, &u16),
        fp4_gguf_get_i16(g, i, &i16), fp4_gguf_get_u32(g, i, &u32), fp4_gguf_get_i32(g, i, &i32),
        fp4_gguf_get_f32(g, i, &f32), fp4_gguf_get_bool(g, i, &b),  fp4_gguf_get_str(g, i, &s, &len),
        fp4_gguf_get_u64(g, i, &u64), fp4_gguf_get_i64(g, i, &i64), fp4_gguf_get_f64(g, i, &f64)};
    static const int type_of[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12};
    int t = (int)fp4_gguf_kv_type(g, i), ok = 0;
    for (int k = 0; k < 12; k++) {
        if (st[k] == FP4_OK) ok++;
        if ((st[k] == FP4_OK) != (type_of[k] == t)) __builtin_trap();
        if (st[k] != FP4_OK && st[k] != FP4_ERR_DTYPE) __builtin_trap();
    }
    if (t == FP4_GGUF_BOOL && b != 0 && b != 1) __builtin_trap();
    if (t == FP4_GGUF_STRING) inside(s, len);
    sink += ok;
}

static void walk_array(const fp4_gguf *g, int64_t i) {
    fp4_gguf_type et = fp4_gguf_arr_type(g, i);
    const void *data;
    int64_t n = 0;
    if (et == FP4_GGUF_STRING) {
        if (fp4_gguf_get_arr_str_count(g, i, &n) != FP4_OK) __builtin_trap();
        for (int64_t j = 0; j < n; j++) {
            const char *s;
            uint64_t len;
            if (fp4_gguf_get_arr_str(g, i, j, &s, &len) != FP4_OK) __builtin_trap();
            inside(s, len);
        }
        if (fp4_gguf_get_arr(g, i, et, &data, &n) != FP4_ERR_DTYPE) __builtin_trap();
        return;
    }
    if (fp4_gguf_get_arr(g, i, et, &data, &n) != FP4_OK) __builtin_trap();
    inside(data, (uint64_t)n * fp4_gguf_type_size(et));
    if (fp4_gguf_get_arr_str_count(g, i, &n) != FP4_ERR_DTYPE) __builtin_trap();
}

static void walk(const fp4_gguf *g) {
    for (int64_t i = 0; i < fp4_gguf_n_kv(g); i++) {
        const char *key = fp4_gguf_key(g, i);
        if (!key || fp4_gguf_key_index(g, key) != i) __builtin_trap();
        if (fp4_gguf_kv_type(g, i) == FP4_GGUF_ARRAY) walk_array(g, i);
        else walk_scalar(g, i);
    }
    uint64_t d = fp4_gguf_data_offset(g), end = d;
    for (int64_t i = 0; i < fp4_gguf_n_tensors(g); i++) {
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        if (!t || fp4_gguf_tensor_index(g, t->name) != i || !fp4_type_get(t->type)) __builtin_trap();
        if (t->offset != end || t->offset % fp4_gguf_alignment(g) != 0) __builtin_trap();
        inside(t->data, t->size);
        end =
            t->offset + (t->size + fp4_gguf_alignment(g) - 1) / fp4_gguf_alignment(g) * fp4_gguf_alignment(g);
    }
    if (fp4_gguf_file_size(g) > end && fp4_gguf_file_size(g) > d) __builtin_trap();
    if (fp4_gguf_tensor_at(g, fp4_gguf_n_tensors(g)) || fp4_gguf_key(g, fp4_gguf_n_kv(g))) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fp4_gguf *g = NULL;
    fp4_error err;
    in_lo = data;
    in_hi = data + size;
    fp4_status st = fp4_gguf_open_buffer(data, size, &g, &err);
    if (st == FP4_OK) {
        if (!g) __builtin_trap();
        walk(g);
        fp4_gguf_close(g);
    } else if (g || err.code != st || strncmp(err.rule, "gguf.", 5) != 0 || !err.msg[0]) {
        __builtin_trap();
    }
    return 0;
}
