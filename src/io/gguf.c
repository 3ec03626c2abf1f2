/* gguf.c — the GGUF reader: maps a file read-only (or takes a caller's buffer), validates the
 * whole container in one pass, and serves typed views. Every field comes from a hostile file.
 *
 * Accepted grammar (all integers little-endian; "pad" = zero bytes up to the next multiple of
 * the alignment A; a violated line names its err->rule):
 *
 *   file        := header kv{n_kv} tinfo{n_tensors} pad data
 *   header      := "GGUF"                                    gguf.magic
 *                  u32 version in {2, 3}                     gguf.version; a byte-swapped value
 *                                                            (low 16 bits 0) is gguf.endian
 *                  u64 n_tensors <= FP4_MAX_TENSORS and <= bytes left / 33     gguf.n_tensors
 *                  u64 n_kv      <= FP4_MAX_KV      and <= bytes left / 14     gguf.n_kv
 *                  (and 14 n_kv + 33 n_tensors <= bytes left: the smallest KV and tensor info)
 *   kv          := string key                                (see key rules)
 *                  u32 type < 13                             gguf.kv.type
 *                  value(type)
 *   key         := 1..FP4_MAX_KEY bytes in 0x21..0x7E        gguf.kv.key_empty, gguf.kv.key_len,
 *                                                            gguf.kv.key_chars; unique: gguf.kv.dup_key
 *   string      := u64 len, len bytes                        len <= FP4_MAX_STRING: gguf.string.len
 *   value(t)    := fixed-size LE value of t (1/2/4/8 bytes) | string | array
 *                  BOOL is one byte 0 or 1                   gguf.bool
 *   array       := u32 elem_type < 13                        gguf.array.type
 *                  elem_type != ARRAY                        gguf.array.nested
 *                  u64 count <= FP4_MAX_ARRAY                gguf.array.count
 *                  count values(elem_type), which must fit in the bytes left (checked before any
 *                  walk or allocation: count <= left / elem_size, 8 for strings)  gguf.array.bounds
 *   general.alignment, if present: UINT32                    gguf.alignment.type
 *                  a power of two in [8, 1 MiB]              gguf.alignment (default 32)
 *   tinfo       := string name, 1..FP4_MAX_NAME bytes        gguf.tensor.name_len
 *                  no byte < 0x20 and no 0x7F (no NUL)       gguf.tensor.name; unique: gguf.tensor.dup
 *                  u32 n_dims in 1..4                        gguf.tensor.n_dims
 *                  u64 ne[n_dims], each in 1..INT64_MAX      gguf.tensor.dim
 *                  product of ne fits int64                  gguf.tensor.ne_overflow
 *                  u32 type known to fp4_type_get()          gguf.tensor.type
 *                  ne[0] % block_size == 0                   gguf.tensor.block
 *                  bytes and padded bytes fit 64 bits        gguf.tensor.nbytes
 *                  u64 offset, offset % A == 0               gguf.tensor.offset_align
 *                  offset == sum of the padded sizes of the tensors before it (contiguous, in
 *                  order: no gap, overlap or aliasing)       gguf.tensor.offset_order
 *                  that running sum fits 64 bits             gguf.tensor.size_sum
 *   data        := starts at D = align_up(end of tinfos, A); D <= file size when n_tensors > 0
 *                                                            gguf.data.start
 *                  tensor i occupies [D + offset_i, D + offset_i + size_i) inside the file
 *                                                            gguf.data.bounds
 *                  the file ends no later than D + the padded sum (it may end inside the last
 *                  tensor's padding, or, with no tensors, inside the pad)  gguf.trailing
 *                  every padding byte present is zero        gguf.padding
 *   Any field cut short by the end of the file is gguf.truncated. Outside the grammar: gguf.io
 *   (open/stat/mmap; not a regular file), gguf.arg (NULL arguments), gguf.nomem.
 *
 * Memory: the handle allocates per KV, per tensor and per string-array element parsed, plus
 * copies of keys and names; every growth follows bytes already read, never a declared count.
 * Duplicates are found by sorting names (O(n log n) whatever the names are; a hash table would
 * let a crafted file choose its collisions), and lookups are binary searches. */
#include "io/gguf_impl.h"
#include "io/infile.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct gguf_kv {
    size_t key_off;         /* NUL-terminated copy in the arena                               */
    uint32_t key_len;
    uint32_t type;          /* fp4_gguf_type                                                  */
    uint32_t arr_type;      /* element type of an ARRAY                                       */
    uint64_t count;         /* ARRAY: elements; STRING: bytes                                 */
    const uint8_t *val;     /* fixed value, string bytes, or first array element (in the file) */
    size_t str0;            /* string arrays: index of element 0 in g->strs                   */
} gguf_kv;

typedef struct gguf_tinfo {
    fp4_gguf_tensor pub;
    size_t name_off;        /* in the arena (pub.name is set once the arena stops moving)     */
    size_t name_len;
    uint64_t rel;           /* offset relative to the data section                            */
    uint64_t padded;        /* size rounded up to the alignment                               */
} gguf_tinfo;

struct fp4_gguf {
    const uint8_t *base;
    size_t size;
    void *map;              /* non-NULL when fp4_gguf_open mapped the file                    */
    uint32_t version, alignment;
    uint64_t data_offset;
    gguf_kv *kv;
    size_t n_kv, kv_cap;
    gguf_tinfo *t;
    size_t n_t, t_cap;
    char *arena;
    size_t arena_len, arena_cap;
    const uint8_t **strs;   /* each string-array element: its bytes (length prefix at -8)     */
    size_t n_strs, strs_cap;
    uint32_t *kv_by_name;   /* KV indices sorted by key bytes: duplicates and lookup         */
    uint32_t *t_by_name;    /* tensor indices sorted by name                                  */
};

typedef struct gguf_parse {
    fp4_gguf *g;
    fp4_cursor c;
    fp4_error *err;
    const char *file;
} gguf_parse;

#define PFAIL(P, code, tensor, rule, ...) fp4_fail((P)->err, (code), (P)->file, (tensor), (rule), __VA_ARGS__)

static size_t pos(const gguf_parse *P) { return (size_t)(P->c.p - P->g->base); }

static fp4_status truncated(gguf_parse *P, const char *tensor, const char *what) {
    return PFAIL(P, FP4_ERR_TRUNCATED, tensor, "gguf.truncated",
                 "file ends inside %s at byte %zu (file size %zu)", what, pos(P), P->g->size);
}

static fp4_status rd_u32(gguf_parse *P, uint32_t *v, const char *tensor, const char *what) {
    return fp4_cur_u32(&P->c, v) ? FP4_OK : truncated(P, tensor, what);
}

static fp4_status rd_u64(gguf_parse *P, uint64_t *v, const char *tensor, const char *what) {
    return fp4_cur_u64(&P->c, v) ? FP4_OK : truncated(P, tensor, what);
}

/* u64 length + bytes; len above cap is cap_rule (FP4_ERR_LIMIT), checked before the bytes. */
static fp4_status rd_string(gguf_parse *P, uint64_t cap, const char *cap_rule, const char *tensor,
                            const char *what, const uint8_t **s, uint64_t *len) {
    fp4_status st = rd_u64(P, len, tensor, what);
    if (st) return st;
    if (*len > cap)
        return PFAIL(P, FP4_ERR_LIMIT, tensor, cap_rule, "%s length %llu is above the limit %llu", what,
                     (unsigned long long)*len, (unsigned long long)cap);
    return fp4_cur_take(&P->c, (size_t)*len, s) ? FP4_OK : truncated(P, tensor, what);
}

static fp4_status arena_add(gguf_parse *P, const uint8_t *s, size_t n, size_t *off) {
    fp4_gguf *g = P->g;
    if (!gguf_grow((void **)&g->arena, &g->arena_cap, g->arena_len + n + 1, 1))
        return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for names");
    memcpy(g->arena + g->arena_len, s, n);
    g->arena[g->arena_len + n] = '\0';
    *off = g->arena_len;
    g->arena_len += n + 1;
    return FP4_OK;
}

/* ---- sorted name index ---- */
typedef struct name_ref {
    const char *s;
    size_t n;
} name_ref;

static name_ref kv_name(const fp4_gguf *g, uint32_t i) {
    return (name_ref){g->arena + g->kv[i].key_off, g->kv[i].key_len};
}
static name_ref t_name(const fp4_gguf *g, uint32_t i) {
    return (name_ref){g->arena + g->t[i].name_off, g->t[i].name_len};
}

static int name_cmp(name_ref a, name_ref b) {
    int c = memcmp(a.s, b.s, a.n < b.n ? a.n : b.n);
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

/* Bottom-up merge sort of idx[0..n) by name (stable, O(n log n) always). */
static void sort_by_name(const fp4_gguf *g, name_ref (*name)(const fp4_gguf *, uint32_t), uint32_t *idx,
                         uint32_t *tmp, size_t n) {
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid,
                   k = lo;
            while (i < mid && j < hi)
                tmp[k++] = name_cmp(name(g, idx[j]), name(g, idx[i])) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

/* Builds the sorted index of n names; *dup = an index whose name equals its neighbour's, or -1. */
static uint32_t *build_index(const fp4_gguf *g, name_ref (*name)(const fp4_gguf *, uint32_t), size_t n,
                             int64_t *dup) {
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx), *tmp = malloc((n ? n : 1) * sizeof *tmp);
    *dup = -1;
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    sort_by_name(g, name, idx, tmp, n);
    free(tmp);
    for (size_t i = 1; i < n && *dup < 0; i++)
        if (name_cmp(name(g, idx[i - 1]), name(g, idx[i])) == 0) *dup = idx[i];
    return idx;
}

static int64_t find_by_name(const fp4_gguf *g, name_ref (*name)(const fp4_gguf *, uint32_t),
                            const uint32_t *idx, size_t n, const char *s) {
    name_ref want = {s, strlen(s)};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(name(g, idx[mid]), want);
        if (c == 0) return idx[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Header and metadata                                                                        */

static fp4_status parse_header(gguf_parse *P, uint64_t *n_tensors, uint64_t *n_kv) {
    const uint8_t *m;
    if (!fp4_cur_take(&P->c, 4, &m)) return truncated(P, NULL, "the magic");
    if (memcmp(m, GGUF_MAGIC, 4) != 0)
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.magic", "magic is %02x %02x %02x %02x, not \"GGUF\"",
                     m[0], m[1], m[2], m[3]);
    fp4_status st = rd_u32(P, &P->g->version, NULL, "the version");
    if (st) return st;
    uint32_t v = P->g->version;
    if (v != 0 && (v & 0xFFFFu) == 0)
        return PFAIL(P, FP4_ERR_UNSUPPORTED, NULL, "gguf.endian", "version 0x%08x: a big-endian file", v);
    if (v != 2 && v != GGUF_VERSION)
        return PFAIL(P, FP4_ERR_UNSUPPORTED, NULL, "gguf.version", "version %u (2 and 3 are read)", v);
    if ((st = rd_u64(P, n_tensors, NULL, "n_tensors")) || (st = rd_u64(P, n_kv, NULL, "n_kv"))) return st;
    size_t left = P->c.left;
    if (*n_tensors > FP4_MAX_TENSORS || *n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return PFAIL(P, *n_tensors > FP4_MAX_TENSORS ? FP4_ERR_LIMIT : FP4_ERR_TRUNCATED, NULL,
                     "gguf.n_tensors", "n_tensors %llu does not fit the limit %d or the %zu bytes left",
                     (unsigned long long)*n_tensors, FP4_MAX_TENSORS, left);
    if (*n_kv > FP4_MAX_KV || *n_kv > left / GGUF_MIN_KV_BYTES ||
        *n_kv * GGUF_MIN_KV_BYTES > left - *n_tensors * GGUF_MIN_TENSOR_BYTES)
        return PFAIL(P, *n_kv > FP4_MAX_KV ? FP4_ERR_LIMIT : FP4_ERR_TRUNCATED, NULL, "gguf.n_kv",
                     "n_kv %llu does not fit the limit %d or the %zu bytes left", (unsigned long long)*n_kv,
                     FP4_MAX_KV, left);
    return FP4_OK;
}

static fp4_status parse_str_array(gguf_parse *P, gguf_kv *kv, const char *key) {
    fp4_gguf *g = P->g;
    if (kv->count > P->c.left / 8)
        return PFAIL(P, FP4_ERR_TRUNCATED, NULL, "gguf.array.bounds",
                     "key '%.64s': %llu strings cannot fit the %zu bytes left", key,
                     (unsigned long long)kv->count, P->c.left);
    kv->str0 = g->n_strs;
    for (uint64_t j = 0; j < kv->count; j++) {
        const uint8_t *s;
        uint64_t len;
        fp4_status st =
            rd_string(P, FP4_MAX_STRING, "gguf.string.len", NULL, "a string array element", &s, &len);
        if (st) return st;
        if (!gguf_grow((void **)&g->strs, &g->strs_cap, g->n_strs + 1, sizeof *g->strs))
            return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for string arrays");
        g->strs[g->n_strs++] = s;
    }
    return FP4_OK;
}

static fp4_status check_bools(gguf_parse *P, const uint8_t *p, uint64_t n, const char *key) {
    for (uint64_t j = 0; j < n; j++)
        if (p[j] > 1)
            return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.bool",
                         "key '%.64s': bool byte %u (element %llu) is not 0 or 1", key, p[j],
                         (unsigned long long)j);
    return FP4_OK;
}

static fp4_status parse_array(gguf_parse *P, gguf_kv *kv, const char *key) {
    fp4_status st = rd_u32(P, &kv->arr_type, NULL, "an array element type");
    if (st) return st;
    if (!gguf_type_valid(kv->arr_type))
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.array.type",
                     "key '%.64s': array element type %u is unknown", key, kv->arr_type);
    if (kv->arr_type == FP4_GGUF_ARRAY)
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.array.nested", "key '%.64s': array of arrays", key);
    if ((st = rd_u64(P, &kv->count, NULL, "an array count"))) return st;
    if (kv->count > FP4_MAX_ARRAY)
        return PFAIL(P, FP4_ERR_LIMIT, NULL, "gguf.array.count",
                     "key '%.64s': %llu elements, above the limit %u", key, (unsigned long long)kv->count,
                     FP4_MAX_ARRAY);
    kv->val = P->c.p;
    if (kv->arr_type == FP4_GGUF_STRING) return parse_str_array(P, kv, key);
    size_t esz = gguf_value_size[kv->arr_type];
    const uint8_t *p;
    if (kv->count > P->c.left / esz || !fp4_cur_take(&P->c, (size_t)kv->count * esz, &p))
        return PFAIL(P, FP4_ERR_TRUNCATED, NULL, "gguf.array.bounds",
                     "key '%.64s': %llu elements of %zu bytes do not fit the %zu bytes left", key,
                     (unsigned long long)kv->count, esz, P->c.left);
    return kv->arr_type == FP4_GGUF_BOOL ? check_bools(P, p, kv->count, key) : FP4_OK;
}

static fp4_status parse_value(gguf_parse *P, gguf_kv *kv, const char *key) {
    if (kv->type == FP4_GGUF_ARRAY) return parse_array(P, kv, key);
    if (kv->type == FP4_GGUF_STRING)
        return rd_string(P, FP4_MAX_STRING, "gguf.string.len", NULL, "a string value", &kv->val, &kv->count);
    kv->count = 1;
    if (!fp4_cur_take(&P->c, gguf_value_size[kv->type], &kv->val)) return truncated(P, NULL, "a value");
    return kv->type == FP4_GGUF_BOOL ? check_bools(P, kv->val, 1, key) : FP4_OK;
}

static fp4_status check_alignment_kv(gguf_parse *P, const gguf_kv *kv) {
    if (kv->type != FP4_GGUF_UINT32)
        return PFAIL(P, FP4_ERR_DTYPE, NULL, "gguf.alignment.type",
                     "general.alignment has type %s, not uint32",
                     fp4_gguf_type_name((fp4_gguf_type)kv->type));
    uint32_t a = fp4_rd_le32(kv->val);
    if (!gguf_alignment_ok(a))
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.alignment",
                     "general.alignment %u is not a power of two in [%u, %u]", a, FP4_GGUF_MIN_ALIGNMENT,
                     FP4_GGUF_MAX_ALIGNMENT);
    P->g->alignment = a;
    return FP4_OK;
}

static fp4_status parse_kv(gguf_parse *P) {
    fp4_gguf *g = P->g;
    if (!gguf_grow((void **)&g->kv, &g->kv_cap, g->n_kv + 1, sizeof *g->kv))
        return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for metadata");
    gguf_kv *kv = &g->kv[g->n_kv];
    memset(kv, 0, sizeof *kv);
    const uint8_t *k;
    uint64_t klen;
    fp4_status st = rd_string(P, FP4_MAX_KEY, "gguf.kv.key_len", NULL, "a key", &k, &klen), code = FP4_OK;
    if (st) return st;
    const char *rule = gguf_key_rule(k, klen, &code);
    if (rule)
        return PFAIL(P, code, NULL, rule, "key %zu (%llu bytes) breaks %s", g->n_kv, (unsigned long long)klen,
                     rule);
    if ((st = arena_add(P, k, (size_t)klen, &kv->key_off))) return st;
    kv->key_len = (uint32_t)klen;
    const char *key = g->arena + kv->key_off;
    if ((st = rd_u32(P, &kv->type, NULL, "a value type"))) return st;
    if (!gguf_type_valid(kv->type))
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.kv.type", "key '%.64s': value type %u is unknown", key,
                     kv->type);
    if ((st = parse_value(P, kv, key))) return st;
    if (klen == strlen(GGUF_KEY_ALIGNMENT) && memcmp(k, GGUF_KEY_ALIGNMENT, klen) == 0 &&
        (st = check_alignment_kv(P, kv)))
        return st;
    g->n_kv++;
    return FP4_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensor infos and the data section                                                          */

static fp4_status parse_tinfo_fields(gguf_parse *P, const char *name, uint32_t *n_dims,
                                     uint64_t ne[FP4_MAX_DIMS], uint32_t *type, uint64_t *offset) {
    fp4_status st = rd_u32(P, n_dims, name, "n_dims");
    if (st) return st;
    if (*n_dims == 0 || *n_dims > FP4_MAX_DIMS)
        return PFAIL(P, FP4_ERR_FORMAT, name, "gguf.tensor.n_dims", "n_dims %u is not in 1..%d", *n_dims,
                     FP4_MAX_DIMS);
    for (uint32_t j = 0; j < *n_dims; j++)
        if ((st = rd_u64(P, &ne[j], name, "a dimension"))) return st;
    if ((st = rd_u32(P, type, name, "a tensor type"))) return st;
    return rd_u64(P, offset, name, "a tensor offset");
}

static fp4_status parse_tinfo(gguf_parse *P, uint64_t *running) {
    fp4_gguf *g = P->g;
    if (!gguf_grow((void **)&g->t, &g->t_cap, g->n_t + 1, sizeof *g->t))
        return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for tensor infos");
    gguf_tinfo *ti = &g->t[g->n_t];
    memset(ti, 0, sizeof *ti);
    const uint8_t *s;
    uint64_t len;
    fp4_status code = FP4_OK,
               st = rd_string(P, FP4_MAX_NAME, "gguf.tensor.name_len", NULL, "a tensor name", &s, &len);
    if (st) return st;
    const char *rule = gguf_name_rule(s, len, &code);
    if (rule)
        return PFAIL(P, code, NULL, rule, "tensor %zu: name of %llu bytes breaks %s", g->n_t,
                     (unsigned long long)len, rule);
    if ((st = arena_add(P, s, (size_t)len, &ti->name_off))) return st;
    ti->name_len = (size_t)len;
    const char *name = g->arena + ti->name_off;
    uint32_t n_dims = 0, type = 0;
    uint64_t ne[FP4_MAX_DIMS] = {0}, offset = 0;
    if ((st = parse_tinfo_fields(P, name, &n_dims, ne, &type, &offset))) return st;
    fp4_gguf_tensor *t = &ti->pub;
    rule =
        gguf_tensor_rule(type, n_dims, ne, g->alignment, t->ne, &t->n_elements, &t->size, &ti->padded, &code);
    if (rule)
        return PFAIL(P, code, name, rule, "type %u, n_dims %u, ne [%llu, %llu, %llu, %llu] breaks %s", type,
                     n_dims, (unsigned long long)ne[0], (unsigned long long)ne[1], (unsigned long long)ne[2],
                     (unsigned long long)ne[3], rule);
    t->type = (fp4_type)type;
    t->n_dims = (int32_t)n_dims;
    if (offset % g->alignment != 0)
        return PFAIL(P, FP4_ERR_FORMAT, name, "gguf.tensor.offset_align",
                     "offset %llu is not a multiple of %u", (unsigned long long)offset, g->alignment);
    if (offset != *running)
        return PFAIL(P, FP4_ERR_BOUNDS, name, "gguf.tensor.offset_order",
                     "offset %llu, but the tensors before it end at %llu (gap, overlap or reordering)",
                     (unsigned long long)offset, (unsigned long long)*running);
    if (fp4_add_overflow_u64(*running, ti->padded, running))
        return PFAIL(P, FP4_ERR_OVERFLOW, name, "gguf.tensor.size_sum", "the sum of tensor sizes overflows");
    ti->rel = offset;
    g->n_t++;
    return FP4_OK;
}

static fp4_status check_zero(gguf_parse *P, uint64_t from, uint64_t to, const char *tensor) {
    for (uint64_t i = from; i < to; i++)
        if (P->g->base[i] != 0)
            return PFAIL(P, FP4_ERR_FORMAT, tensor, "gguf.padding", "padding byte %llu is 0x%02x, not zero",
                         (unsigned long long)i, P->g->base[i]);
    return FP4_OK;
}

static fp4_status check_data(gguf_parse *P, uint64_t total) {
    fp4_gguf *g = P->g;
    uint64_t info_end = pos(P), size = g->size, d;
    if (fp4_align_up_u64(info_end, g->alignment, &d))
        return PFAIL(P, FP4_ERR_BOUNDS, NULL, "gguf.data.start", "the data section starts beyond 2^64");
    g->data_offset = d;
    fp4_status st = check_zero(P, info_end, d < size ? d : size, NULL);
    if (st) return st;
    if (g->n_t > 0 && d > size)
        return PFAIL(P, FP4_ERR_BOUNDS, NULL, "gguf.data.start",
                     "the data section starts at %llu, past the end %llu", (unsigned long long)d,
                     (unsigned long long)size);
    for (size_t i = 0; i < g->n_t; i++) {
        gguf_tinfo *ti = &g->t[i];
        const char *name = g->arena + ti->name_off;
        uint64_t start, end, pad_end;
        if (fp4_add_overflow_u64(d, ti->rel, &start) || fp4_add_overflow_u64(start, ti->pub.size, &end) ||
            end > size)
            return PFAIL(P, FP4_ERR_BOUNDS, name, "gguf.data.bounds",
                         "data [%llu + %llu, + %llu bytes) is not inside the file of %llu bytes",
                         (unsigned long long)d, (unsigned long long)ti->rel, (unsigned long long)ti->pub.size,
                         (unsigned long long)size);
        ti->pub.offset = start;
        ti->pub.data = g->base + start;
        pad_end = start + ti->padded; /* end <= size, so this is < size + alignment */
        if ((st = check_zero(P, end, pad_end < size ? pad_end : size, name))) return st;
    }
    if (size > d && size - d > total)
        return PFAIL(P, FP4_ERR_FORMAT, NULL, "gguf.trailing",
                     "%llu bytes follow the last tensor's padded end",
                     (unsigned long long)(size - d - total));
    return FP4_OK;
}

static fp4_status parse_all(gguf_parse *P) {
    fp4_gguf *g = P->g;
    uint64_t n_tensors, n_kv, total = 0;
    fp4_status st = parse_header(P, &n_tensors, &n_kv);
    if (st) return st;
    g->alignment = FP4_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++)
        if ((st = parse_kv(P))) return st;
    int64_t dup;
    if (!(g->kv_by_name = build_index(g, kv_name, g->n_kv, &dup)))
        return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for the key index");
    if (dup >= 0)
        return PFAIL(P, FP4_ERR_DUPLICATE, NULL, "gguf.kv.dup_key", "key '%.64s' appears twice",
                     g->arena + g->kv[dup].key_off);
    if (n_tensors > P->c.left / GGUF_MIN_TENSOR_BYTES)
        return PFAIL(P, FP4_ERR_TRUNCATED, NULL, "gguf.n_tensors",
                     "n_tensors %llu cannot fit the %zu bytes left after the metadata",
                     (unsigned long long)n_tensors, P->c.left);
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((st = parse_tinfo(P, &total))) return st;
    if (!(g->t_by_name = build_index(g, t_name, g->n_t, &dup)))
        return PFAIL(P, FP4_ERR_NOMEM, NULL, "gguf.nomem", "out of memory for the tensor index");
    if (dup >= 0)
        return PFAIL(P, FP4_ERR_DUPLICATE, g->arena + g->t[dup].name_off, "gguf.tensor.dup",
                     "tensor name appears twice");
    if ((st = check_data(P, total))) return st;
    for (size_t i = 0; i < g->n_t; i++) g->t[i].pub.name = g->arena + g->t[i].name_off;
    return FP4_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Open / close                                                                               */

void fp4_gguf_close(fp4_gguf *g) {
    if (!g) return;
    if (g->map) munmap(g->map, g->size);
    free(g->kv_by_name);
    free(g->t_by_name);
    free(g->kv);
    free(g->t);
    free(g->arena);
    free(g->strs);
    free(g);
}

static fp4_status open_mem(const uint8_t *data, size_t size, void *map, const char *file, fp4_gguf **out,
                           fp4_error *err) {
    static const uint8_t empty[1];
    fp4_gguf *g = calloc(1, sizeof *g);
    if (!data) data = empty; /* a cursor never starts from NULL */
    if (!g) {
        if (map) munmap(map, size);
        return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "gguf.nomem", "out of memory");
    }
    g->base = data;
    g->size = size;
    g->map = map;
    gguf_parse P = {g, {data, size}, err, file};
    fp4_status st = parse_all(&P);
    if (st) {
        fp4_gguf_close(g);
        return st;
    }
    *out = g;
    return FP4_OK;
}

fp4_status fp4_gguf_open_buffer(const void *data, size_t size, fp4_gguf **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!out || (!data && size))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "gguf.arg", "NULL argument");
    *out = NULL;
    return open_mem(data, size, NULL, NULL, out, err);
}

fp4_status fp4_gguf_open(const char *path, fp4_gguf **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!out || !path) return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "gguf.arg", "NULL argument");
    *out = NULL;
    int fd;
    uint64_t size64;
    fp4_status so = fp4_infile_open(path, "gguf.io", false, &fd, &size64, err);
    if (so) return so;
    if (size64 > SIZE_MAX) {
        close(fd);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "gguf.io", "too large to map");
    }
    size_t size = (size_t)size64;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fp4_fail(err, FP4_ERR_IO, path, NULL, "gguf.io", "mmap: %s", strerror(e));
        }
    }
    close(fd);
    return open_mem(map, size, map, path, out, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                  */

static const char *const gguf_type_names[FP4_GGUF_TYPE_COUNT_] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

const char *fp4_gguf_type_name(fp4_gguf_type t) {
    return (unsigned)t < FP4_GGUF_TYPE_COUNT_ ? gguf_type_names[t] : "?";
}
size_t fp4_gguf_type_size(fp4_gguf_type t) {
    return (unsigned)t < FP4_GGUF_TYPE_COUNT_ ? gguf_value_size[t] : 0;
}

uint32_t fp4_gguf_version(const fp4_gguf *g) { return g ? g->version : 0; }
uint32_t fp4_gguf_alignment(const fp4_gguf *g) { return g ? g->alignment : 0; }
uint64_t fp4_gguf_file_size(const fp4_gguf *g) { return g ? g->size : 0; }
uint64_t fp4_gguf_data_offset(const fp4_gguf *g) { return g ? g->data_offset : 0; }
int64_t fp4_gguf_n_kv(const fp4_gguf *g) { return g ? (int64_t)g->n_kv : 0; }
int64_t fp4_gguf_n_tensors(const fp4_gguf *g) { return g ? (int64_t)g->n_t : 0; }

static const gguf_kv *kv_at(const fp4_gguf *g, int64_t i) {
    return g && i >= 0 && (uint64_t)i < g->n_kv ? &g->kv[i] : NULL;
}

const char *fp4_gguf_key(const fp4_gguf *g, int64_t i) {
    const gguf_kv *kv = kv_at(g, i);
    return kv ? g->arena + kv->key_off : NULL;
}

fp4_gguf_type fp4_gguf_kv_type(const fp4_gguf *g, int64_t i) {
    const gguf_kv *kv = kv_at(g, i);
    return kv ? (fp4_gguf_type)kv->type : FP4_GGUF_TYPE_NONE;
}

int64_t fp4_gguf_key_index(const fp4_gguf *g, const char *key) {
    return g && key ? find_by_name(g, kv_name, g->kv_by_name, g->n_kv, key) : -1;
}

/* The KV at i if it has type want; a status otherwise (see the header). */
static fp4_status kv_typed(const fp4_gguf *g, int64_t i, uint32_t want, const void *out, const gguf_kv **kv) {
    if (!g || !out) return FP4_ERR_INVALID_ARG;
    if (i < 0) return FP4_ERR_NOT_FOUND;
    if (!(*kv = kv_at(g, i))) return FP4_ERR_INVALID_ARG;
    return (*kv)->type == want ? FP4_OK : FP4_ERR_DTYPE;
}

/* Decodes a fixed-size little-endian scalar of n bytes into the host object at v. */
static fp4_status get_fixed(const fp4_gguf *g, int64_t i, uint32_t want, void *v) {
    const gguf_kv *kv;
    fp4_status st = kv_typed(g, i, want, v, &kv);
    if (st) return st;
    size_t n = gguf_value_size[want];
    uint64_t x = 0;
    for (size_t k = 0; k < n; k++) x |= (uint64_t)kv->val[k] << (8 * k);
    uint8_t u8 = (uint8_t)x;
    uint16_t u16 = (uint16_t)x;
    uint32_t u32 = (uint32_t)x;
    memcpy(v, n == 1 ? (void *)&u8 : n == 2 ? (void *)&u16 : n == 4 ? (void *)&u32 : (void *)&x, n);
    return FP4_OK;
}

fp4_status fp4_gguf_get_u8(const fp4_gguf *g, int64_t i, uint8_t *v) {
    return get_fixed(g, i, FP4_GGUF_UINT8, v);
}
fp4_status fp4_gguf_get_i8(const fp4_gguf *g, int64_t i, int8_t *v) {
    return get_fixed(g, i, FP4_GGUF_INT8, v);
}
fp4_status fp4_gguf_get_u16(const fp4_gguf *g, int64_t i, uint16_t *v) {
    return get_fixed(g, i, FP4_GGUF_UINT16, v);
}
fp4_status fp4_gguf_get_i16(const fp4_gguf *g, int64_t i, int16_t *v) {
    return get_fixed(g, i, FP4_GGUF_INT16, v);
}
fp4_status fp4_gguf_get_u32(const fp4_gguf *g, int64_t i, uint32_t *v) {
    return get_fixed(g, i, FP4_GGUF_UINT32, v);
}
fp4_status fp4_gguf_get_i32(const fp4_gguf *g, int64_t i, int32_t *v) {
    return get_fixed(g, i, FP4_GGUF_INT32, v);
}
fp4_status fp4_gguf_get_u64(const fp4_gguf *g, int64_t i, uint64_t *v) {
    return get_fixed(g, i, FP4_GGUF_UINT64, v);
}
fp4_status fp4_gguf_get_i64(const fp4_gguf *g, int64_t i, int64_t *v) {
    return get_fixed(g, i, FP4_GGUF_INT64, v);
}
fp4_status fp4_gguf_get_f32(const fp4_gguf *g, int64_t i, float *v) {
    return get_fixed(g, i, FP4_GGUF_FLOAT32, v);
}
fp4_status fp4_gguf_get_f64(const fp4_gguf *g, int64_t i, double *v) {
    return get_fixed(g, i, FP4_GGUF_FLOAT64, v);
}

fp4_status fp4_gguf_get_bool(const fp4_gguf *g, int64_t i, int *v) {
    const gguf_kv *kv;
    fp4_status st = kv_typed(g, i, FP4_GGUF_BOOL, v, &kv);
    if (st) return st;
    *v = kv->val[0];
    return FP4_OK;
}

fp4_status fp4_gguf_get_str(const fp4_gguf *g, int64_t i, const char **s, uint64_t *len) {
    const gguf_kv *kv;
    fp4_status st = kv_typed(g, i, FP4_GGUF_STRING, s, &kv);
    if (st) return st;
    if (!len) return FP4_ERR_INVALID_ARG;
    *s = (const char *)kv->val;
    *len = kv->count;
    return FP4_OK;
}

fp4_gguf_type fp4_gguf_arr_type(const fp4_gguf *g, int64_t i) {
    const gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == FP4_GGUF_ARRAY ? (fp4_gguf_type)kv->arr_type : FP4_GGUF_TYPE_NONE;
}

fp4_status fp4_gguf_get_arr(const fp4_gguf *g, int64_t i, fp4_gguf_type elem, const void **data,
                            int64_t *count) {
    const gguf_kv *kv;
    fp4_status st = kv_typed(g, i, FP4_GGUF_ARRAY, data, &kv);
    if (st) return st;
    if (!count) return FP4_ERR_INVALID_ARG;
    if ((uint32_t)elem != kv->arr_type || elem == FP4_GGUF_STRING) return FP4_ERR_DTYPE;
    *data = kv->val;
    *count = (int64_t)kv->count; /* <= FP4_MAX_ARRAY */
    return FP4_OK;
}

fp4_status fp4_gguf_get_arr_str_count(const fp4_gguf *g, int64_t i, int64_t *count) {
    const gguf_kv *kv;
    fp4_status st = kv_typed(g, i, FP4_GGUF_ARRAY, count, &kv);
    if (st) return st;
    if (kv->arr_type != FP4_GGUF_STRING) return FP4_ERR_DTYPE;
    *count = (int64_t)kv->count; /* <= FP4_MAX_ARRAY */
    return FP4_OK;
}

fp4_status fp4_gguf_get_arr_str(const fp4_gguf *g, int64_t i, int64_t j, const char **s, uint64_t *len) {
    int64_t n;
    fp4_status st = fp4_gguf_get_arr_str_count(g, i, &n);
    if (st) return st;
    if (!s || !len || j < 0 || j >= n) return FP4_ERR_INVALID_ARG;
    const uint8_t *p = g->strs[g->kv[i].str0 + j];
    *s = (const char *)p;
    *len = fp4_rd_le64(p - 8);
    return FP4_OK;
}

const fp4_gguf_tensor *fp4_gguf_tensor_at(const fp4_gguf *g, int64_t i) {
    return g && i >= 0 && (uint64_t)i < g->n_t ? &g->t[i].pub : NULL;
}

int64_t fp4_gguf_tensor_index(const fp4_gguf *g, const char *name) {
    return g && name ? find_by_name(g, t_name, g->t_by_name, g->n_t, name) : -1;
}

const fp4_gguf_tensor *fp4_gguf_find(const fp4_gguf *g, const char *name) {
    return fp4_gguf_tensor_at(g, fp4_gguf_tensor_index(g, name));
}
