/* gguf_impl.h — what the GGUF reader (gguf.c) and writer (gguf_write.c) share: the value-type
 * table, the key and tensor-name rules, tensor size arithmetic, array growth. Internal. */
#ifndef FP4_GGUF_IMPL_H
#define FP4_GGUF_IMPL_H

#include "fp4_impl.h"
#include <stdlib.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3u
#define GGUF_HEADER_BYTES 24u          /* magic, version, n_tensors, n_kv                       */
#define GGUF_MIN_KV_BYTES 14u          /* key len 8 + key 1 + type 4 + smallest value 1         */
#define GGUF_MIN_TENSOR_BYTES 33u      /* name len 8 + name 1 + n_dims 4 + ne 8 + type 4 + off 8 */
#define GGUF_KEY_ALIGNMENT "general.alignment"

/* ---- value types: bytes of one fixed-size value (0: STRING, ARRAY) ---- */
static const uint8_t gguf_value_size[FP4_GGUF_TYPE_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static inline bool gguf_type_valid(uint32_t t) { return t < FP4_GGUF_TYPE_COUNT_; }

/* ---- rules shared by reader and writer: NULL when fine, else the rule id and *code ---- */
static inline const char *gguf_key_rule(const uint8_t *s, uint64_t len, fp4_status *code) {
    if (len == 0) return *code = FP4_ERR_FORMAT, "gguf.kv.key_empty";
    if (len > FP4_MAX_KEY) return *code = FP4_ERR_LIMIT, "gguf.kv.key_len";
    for (uint64_t i = 0; i < len; i++)      /* printable ASCII without space (spec: snake_case) */
        if (s[i] < 0x21 || s[i] > 0x7E) return *code = FP4_ERR_FORMAT, "gguf.kv.key_chars";
    return NULL;
}

static inline const char *gguf_name_rule(const uint8_t *s, uint64_t len, fp4_status *code) {
    if (len > FP4_MAX_NAME) return *code = FP4_ERR_LIMIT, "gguf.tensor.name_len";
    if (len == 0) return *code = FP4_ERR_FORMAT, "gguf.tensor.name";
    for (uint64_t i = 0; i < len; i++)      /* no NUL, no control bytes; UTF-8 otherwise free */
        if (s[i] < 0x20 || s[i] == 0x7F) return *code = FP4_ERR_FORMAT, "gguf.tensor.name";
    return NULL;
}

static inline bool gguf_alignment_ok(uint64_t a) {
    return a >= FP4_GGUF_MIN_ALIGNMENT && a <= FP4_GGUF_MAX_ALIGNMENT && (a & (a - 1)) == 0;
}

/* Shape and size of one tensor, every product checked before it is used. ne_raw holds n_dims
 * values as read (u64). On success fills ne[4] (1 past n_dims), *nel, *nbytes (unpadded) and
 * *padded (rounded up to align). */
static inline const char *gguf_tensor_rule(uint32_t type, uint32_t n_dims, const uint64_t *ne_raw,
                                           uint64_t align, int64_t ne[FP4_MAX_DIMS], int64_t *nel,
                                           uint64_t *nbytes, uint64_t *padded, fp4_status *code) {
    if (n_dims == 0 || n_dims > FP4_MAX_DIMS) return *code = FP4_ERR_FORMAT, "gguf.tensor.n_dims";
    int64_t n = 1;
    for (uint32_t j = 0; j < FP4_MAX_DIMS; j++) {
        ne[j] = 1;
        if (j >= n_dims) continue;
        if (ne_raw[j] == 0 || ne_raw[j] > (uint64_t)INT64_MAX)
            return *code = FP4_ERR_SHAPE, "gguf.tensor.dim";
        ne[j] = (int64_t)ne_raw[j];
        if (fp4_mul_overflow_i64(n, ne[j], &n)) return *code = FP4_ERR_OVERFLOW, "gguf.tensor.ne_overflow";
    }
    const fp4_type_info *ti = fp4_type_get(type);
    if (!ti) return *code = FP4_ERR_UNSUPPORTED, "gguf.tensor.type";
    if (ne[0] % ti->block_size != 0) return *code = FP4_ERR_SHAPE, "gguf.tensor.block";
    size_t row;
    uint64_t b;
    if (fp4_type_row_size(type, ne[0], &row) != FP4_OK ||
        fp4_mul_overflow_u64(row, (uint64_t)(n / ne[0]), &b) || fp4_align_up_u64(b, align, padded))
        return *code = FP4_ERR_OVERFLOW, "gguf.tensor.nbytes";
    *nel = n;
    *nbytes = b;
    return NULL;
}

/* Grow *p (elements of esz bytes) so that it holds at least need; doubling. */
static inline bool gguf_grow(void **p, size_t *cap, size_t need, size_t esz) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return false;
        nc *= 2;
    }
    if (nc > SIZE_MAX / esz) return false;
    void *q = realloc(*p, nc * esz);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

#endif
