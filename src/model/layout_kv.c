/* layout_kv.c — carry GGUF metadata from a source GGUF into a new one (every value type,
 * arrays included), leaving out the keys fp4lane regenerates. */
#include "layout_impl.h"
#include <stdlib.h>

static int regenerated(const char *k) {
    return !strcmp(k, "fp4lane.weight_precision") || !strcmp(k, "fp4lane.activation_precision") ||
           !strcmp(k, "general.alignment") || !strncmp(k, "fp4lane.exact.", 14) ||
           !strncmp(k, "fp4lane.scalar.", 15);
}

static fp4_status copy_array(fp4_gguf_writer *w, const fp4_gguf *g, int64_t i, const char *k,
                             fp4_error *err) {
    fp4_gguf_type et = fp4_gguf_arr_type(g, i);
    int64_t n = 0;
    if (et != FP4_GGUF_STRING) {
        const void *data;
        fp4_status st = fp4_gguf_get_arr(g, i, et, &data, &n);
        if (st) return st;
        void *copy = malloc((size_t)(n * fp4_gguf_type_size(et)) + 1); /* aligned host copy */
        if (!copy) return FP4_ERR_NOMEM;
        memcpy(copy, data, (size_t)(n * fp4_gguf_type_size(et)));
        st = fp4_gguf_writer_add_arr(w, k, et, copy, (uint64_t)n, err);
        free(copy);
        return st;
    }
    fp4_status st = fp4_gguf_get_arr_str_count(g, i, &n);
    if (st) return st;
    const char **s = malloc(sizeof *s * (size_t)(n + 1));
    uint64_t *lens = malloc(sizeof *lens * (size_t)(n + 1));
    if (!s || !lens) st = FP4_ERR_NOMEM;
    for (int64_t j = 0; j < n && !st; j++) st = fp4_gguf_get_arr_str(g, i, j, &s[j], &lens[j]);
    if (!st) st = fp4_gguf_writer_add_arr_str(w, k, s, lens, (uint64_t)n, err);
    free(s);
    free(lens);
    return st;
}

fp4_status fp4_gguf_copy_kvs(fp4_gguf_writer *w, const fp4_gguf *g, fp4_error *err) {
    fp4_status st = FP4_OK;
    for (int64_t i = 0; i < fp4_gguf_n_kv(g) && !st; i++) {
        const char *k = fp4_gguf_key(g, i);
        if (regenerated(k)) continue;
        union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64;
                int64_t i64; float f; double d; int b; } v;
        const char *s;
        uint64_t len;
        switch (fp4_gguf_kv_type(g, i)) {
        case FP4_GGUF_UINT8:
            st = fp4_gguf_get_u8(g, i, &v.u8);
            if (!st) st = fp4_gguf_writer_add_u8(w, k, v.u8, err);
            break;
        case FP4_GGUF_INT8:
            st = fp4_gguf_get_i8(g, i, &v.i8);
            if (!st) st = fp4_gguf_writer_add_i8(w, k, v.i8, err);
            break;
        case FP4_GGUF_UINT16:
            st = fp4_gguf_get_u16(g, i, &v.u16);
            if (!st) st = fp4_gguf_writer_add_u16(w, k, v.u16, err);
            break;
        case FP4_GGUF_INT16:
            st = fp4_gguf_get_i16(g, i, &v.i16);
            if (!st) st = fp4_gguf_writer_add_i16(w, k, v.i16, err);
            break;
        case FP4_GGUF_UINT32:
            st = fp4_gguf_get_u32(g, i, &v.u32);
            if (!st) st = fp4_gguf_writer_add_u32(w, k, v.u32, err);
            break;
        case FP4_GGUF_INT32:
            st = fp4_gguf_get_i32(g, i, &v.i32);
            if (!st) st = fp4_gguf_writer_add_i32(w, k, v.i32, err);
            break;
        case FP4_GGUF_UINT64:
            st = fp4_gguf_get_u64(g, i, &v.u64);
            if (!st) st = fp4_gguf_writer_add_u64(w, k, v.u64, err);
            break;
        case FP4_GGUF_INT64:
            st = fp4_gguf_get_i64(g, i, &v.i64);
            if (!st) st = fp4_gguf_writer_add_i64(w, k, v.i64, err);
            break;
        case FP4_GGUF_FLOAT32:
            st = fp4_gguf_get_f32(g, i, &v.f);
            if (!st) st = fp4_gguf_writer_add_f32(w, k, v.f, err);
            break;
        case FP4_GGUF_FLOAT64:
            st = fp4_gguf_get_f64(g, i, &v.d);
            if (!st) st = fp4_gguf_writer_add_f64(w, k, v.d, err);
            break;
        case FP4_GGUF_BOOL:
            st = fp4_gguf_get_bool(g, i, &v.b);
            if (!st) st = fp4_gguf_writer_add_bool(w, k, v.b, err);
            break;
        case FP4_GGUF_STRING:
            st = fp4_gguf_get_str(g, i, &s, &len);
            if (!st) st = fp4_gguf_writer_add_str(w, k, s, len, err);
            break;
        case FP4_GGUF_ARRAY: st = copy_array(w, g, i, k, err); break;
        default: st = FP4_ERR_FORMAT; break;
        }
    }
    return st;
}
