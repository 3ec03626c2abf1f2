/* gguf_strip.c — a GGUF without its fp4lane.* keys (see gguf_strip.h). */
#include "gguf_strip.h"
#include "fp4lane_io.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fp4_status copy_array(const fp4_gguf *g, int64_t i, fp4_gguf_writer *w, const char *k, fp4_error *e) {
    const fp4_gguf_type et = fp4_gguf_arr_type(g, i);
    int64_t n = 0;
    fp4_status st;
    if (et != FP4_GGUF_STRING) {
        const void *data;
        if ((st = fp4_gguf_get_arr(g, i, et, &data, &n))) return st;
        return fp4_gguf_writer_add_arr(w, k, et, data, (uint64_t)n, e); /* little-endian host */
    }
    if ((st = fp4_gguf_get_arr_str_count(g, i, &n))) return st;
    const char **s = malloc(sizeof *s * (size_t)(n ? n : 1));
    uint64_t *len = malloc(sizeof *len * (size_t)(n ? n : 1));
    st = s && len ? FP4_OK : FP4_ERR_NOMEM;
    for (int64_t j = 0; !st && j < n; j++) st = fp4_gguf_get_arr_str(g, i, j, &s[j], &len[j]);
    if (!st) st = fp4_gguf_writer_add_arr_str(w, k, s, len, (uint64_t)n, e);
    free(s), free(len);
    return st;
}

int gguf_strip_fp4lane(const char *in, const char *out, long *dropped, char *err, size_t err_len) {
    fp4_gguf *g = NULL;
    fp4_gguf_writer *w = NULL;
    fp4_error e = {0};
    fp4_status st = fp4_gguf_open(in, &g, &e);
    if (!st) st = fp4_gguf_writer_create(&w, &e);
    *dropped = 0;
    for (int64_t i = 0; !st && i < fp4_gguf_n_kv(g); i++) {
        const char *k = fp4_gguf_key(g, i);
        if (!strncmp(k, "fp4lane.", 8) || !strcmp(k, "general.alignment")) {
            *dropped += k[0] == 'f';
            continue;
        }
        uint32_t u;
        float f;
        const char *s;
        uint64_t len;
        switch (fp4_gguf_kv_type(g, i)) {
        case FP4_GGUF_UINT32:
            if (!(st = fp4_gguf_get_u32(g, i, &u))) st = fp4_gguf_writer_add_u32(w, k, u, &e);
            break;
        case FP4_GGUF_FLOAT32:
            if (!(st = fp4_gguf_get_f32(g, i, &f))) st = fp4_gguf_writer_add_f32(w, k, f, &e);
            break;
        case FP4_GGUF_STRING:
            if (!(st = fp4_gguf_get_str(g, i, &s, &len))) st = fp4_gguf_writer_add_str(w, k, s, len, &e);
            break;
        case FP4_GGUF_BOOL: {
            int b;
            if (!(st = fp4_gguf_get_bool(g, i, &b))) st = fp4_gguf_writer_add_bool(w, k, b, &e);
            break;
        }
        case FP4_GGUF_ARRAY: /* a tokenizer's tokens, types and merges */
            st = copy_array(g, i, w, k, &e);
            break;
        default:
            snprintf(e.msg, sizeof e.msg, "key %s has a type this copy does not handle", k);
            st = FP4_ERR_DTYPE;
        }
    }
    for (int64_t i = 0; !st && i < fp4_gguf_n_tensors(g); i++) {
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        st = fp4_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &e);
    }
    if (!st) st = fp4_gguf_writer_write_header(w, out, &e);
    for (int64_t i = 0; !st && i < fp4_gguf_n_tensors(g); i++) {
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        st = fp4_gguf_writer_write_tensor_data(w, i, t->data, (size_t)t->size, &e);
    }
    if (!st) st = fp4_gguf_writer_finish(w, &e);
    if (st) snprintf(err, err_len, "strip %s: %s [%s] %s", in, fp4_status_str(st), e.rule, e.msg);
    fp4_gguf_writer_free(w);
    fp4_gguf_close(g);
    return st == FP4_OK ? 0 : -1;
}
