/* safetensors.c — the safetensors reader: an 8-byte little-endian header length N, N bytes of
 * UTF-8 JSON (parsed by jansson, duplicate keys refused), then a data region that the tensors'
 * data_offsets must cover exactly. Every check of reliability.md §4.2 gives its own rule id. */
#include "io/st_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_DEPTH 3 /* root object > entry object > shape array */

/* ---- dtypes ---- */

static const struct {
    const char *name;
    int bits;
    int rank; /* the reference writer's enum order: its files sort larger ranks first */
} dtab[FP4_ST_DTYPE_COUNT_] = {
    [FP4_ST_BOOL] = {"BOOL", 8, 0},           [FP4_ST_F4] = {"F4", 4, 1},
    [FP4_ST_F6_E2M3] = {"F6_E2M3", 6, 2},     [FP4_ST_F6_E3M2] = {"F6_E3M2", 6, 3},
    [FP4_ST_U8] = {"U8", 8, 4},               [FP4_ST_I8] = {"I8", 8, 5},
    [FP4_ST_F8_E5M2] = {"F8_E5M2", 8, 6},     [FP4_ST_F8_E4M3] = {"F8_E4M3", 8, 7},
    [FP4_ST_F8_E8M0] = {"F8_E8M0", 8, 8},     [FP4_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, 9},
    [FP4_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, 10}, [FP4_ST_I16] = {"I16", 16, 11},
    [FP4_ST_U16] = {"U16", 16, 12},           [FP4_ST_F16] = {"F16", 16, 13},
    [FP4_ST_BF16] = {"BF16", 16, 14},         [FP4_ST_I32] = {"I32", 32, 15},
    [FP4_ST_U32] = {"U32", 32, 16},           [FP4_ST_F32] = {"F32", 32, 17},
    [FP4_ST_C64] = {"C64", 64, 18},           [FP4_ST_F64] = {"F64", 64, 19},
    [FP4_ST_I64] = {"I64", 64, 20},           [FP4_ST_U64] = {"U64", 64, 21},
};

const char *fp4_st_dtype_name(fp4_st_dtype d) {
    return (unsigned)d < FP4_ST_DTYPE_COUNT_ ? dtab[d].name : NULL;
}

int fp4_st_dtype_bits(fp4_st_dtype d) { return (unsigned)d < FP4_ST_DTYPE_COUNT_ ? dtab[d].bits : 0; }

int fp4_st_dtype_rank(fp4_st_dtype d) { return (unsigned)d < FP4_ST_DTYPE_COUNT_ ? dtab[d].rank : -1; }

static bool dtype_lookup(const char *s, size_t n, fp4_st_dtype *out) {
    for (int i = 0; i < FP4_ST_DTYPE_COUNT_; i++) {
        if (strlen(dtab[i].name) == n && memcmp(dtab[i].name, s, n) == 0) {
            *out = (fp4_st_dtype)i;
            return true;
        }
    }
    return false;
}

fp4_status fp4_st_dtype_from_name(const char *name, fp4_st_dtype *out) {
    if (!name || !out) return FP4_ERR_INVALID_ARG;
    return dtype_lookup(name, strlen(name), out) ? FP4_OK : FP4_ERR_DTYPE;
}

fp4_status fp4_st_nbytes(fp4_st_dtype dt, int rank, const int64_t *shape, uint64_t *nbytes,
                         const char **rule) {
    if ((unsigned)dt >= FP4_ST_DTYPE_COUNT_) return *rule = "st.dtype", FP4_ERR_DTYPE;
    if (rank < 0 || rank > FP4_MAX_DIMS) return *rule = "st.rank", FP4_ERR_LIMIT;
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return *rule = "st.shape", FP4_ERR_SHAPE;
        if (shape[i] > FP4_ST_MAX_DIM) return *rule = "st.dim_cap", FP4_ERR_LIMIT;
    }
    for (int i = 0; i < rank; i++)
        if (fp4_mul_overflow_u64(count, (uint64_t)shape[i], &count))
            return *rule = "st.nbytes_overflow", FP4_ERR_OVERFLOW;
    uint64_t bits;
    if (fp4_mul_overflow_u64(count, (uint64_t)dtab[dt].bits, &bits))
        return *rule = "st.nbytes_overflow", FP4_ERR_OVERFLOW;
    if (bits % 8) return *rule = "st.subbyte", FP4_ERR_SHAPE;
    if (bits / 8 > (uint64_t)SIZE_MAX) return *rule = "st.nbytes_overflow", FP4_ERR_OVERFLOW;
    *nbytes = bits / 8;
    return FP4_OK;
}

/* ---- UTF-8 ---- */

bool fp4_st_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* ---- the handle ---- */

struct fp4_st {
    const uint8_t *base;
    size_t size;
    void *map; /* non-NULL when we own an mmap of size bytes */
    uint64_t n_header;
    size_t n_tensors;
    fp4_st_tensor *t;
    const fp4_st_tensor **by_name; /* sorted by name */
    size_t n_meta;
    const char **meta; /* key0, value0, key1, ... */
    size_t *meta_len;  /* transient: byte lengths while parsing */
    char *arena;
};

void fp4_st_close(fp4_st *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->size);
    free(st->t);
    free(st->by_name);
    free(st->meta);
    free(st->meta_len);
    free(st->arena);
    free(st);
}

/* ---- header framing: lengths, BOM, UTF-8, first byte, nesting depth ---- */

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* One pass over the raw header, outside strings: nesting depth and, per depth, the member and
 * element counts that bound how many nodes jansson would allocate. A valid header has depth <= 3,
 * one member per tensor at depth 1, three per tensor (plus the metadata pairs) at depth 2, and at
 * most 4 commas per tensor at depth 3 (shape rank <= 4, two offsets): twice that is refused. */
typedef struct st_scan {
    int max_depth;
    uint64_t members[3]; /* ':' at depth 1, 2, 3 */
    uint64_t commas3;    /* ',' at depth 3 */
} st_scan;

static void json_scan(const uint8_t *p, size_t n, st_scan *sc) {
    memset(sc, 0, sizeof *sc);
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            if (++depth > sc->max_depth) sc->max_depth = depth;
            if (depth > ST_MAX_DEPTH) return;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ':' && depth >= 1 && depth <= 3) {
            sc->members[depth - 1]++;
        } else if (c == ',' && depth == 3) {
            sc->commas3++;
        }
    }
}

static fp4_status st_scan_check(const uint8_t *h, size_t n, const char *file, fp4_error *err) {
    st_scan sc;
    json_scan(h, n, &sc);
    if (sc.max_depth > ST_MAX_DEPTH)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.depth", "header nests deeper than %d",
                        ST_MAX_DEPTH);
    uint64_t d1 = sc.members[0];
    if (d1 > (uint64_t)FP4_MAX_TENSORS + 1)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.tensor_count", "%llu entries, above %d",
                        (unsigned long long)d1, FP4_MAX_TENSORS);
    if (sc.members[1] > 3 * d1 + FP4_ST_MAX_METADATA)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.metadata_count",
                        "%llu members in entries and __metadata__, above 3 per tensor + %d",
                        (unsigned long long)sc.members[1], FP4_ST_MAX_METADATA);
    if (sc.commas3 > 8 * d1 + 8) /* lenient: a per-tensor rank error gets its own rule later */
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.array_len",
                        "%llu array elements, far more than shapes and offsets need",
                        (unsigned long long)sc.commas3);
    if (sc.members[2] > 0)
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.nested_object",
                        "an object nested in an entry or metadata");
    return FP4_OK;
}

static fp4_status st_frame(fp4_st *st, const char *file, fp4_error *err) {
    if (st->size < 8)
        return fp4_fail(err, FP4_ERR_TRUNCATED, file, NULL, "st.short", "file has %zu bytes, fewer than 8",
                        st->size);
    uint64_t n = fp4_rd_le64(st->base);
    if (n > FP4_MAX_ST_HEADER)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.header_cap",
                        "header length %llu above the cap %u", (unsigned long long)n, FP4_MAX_ST_HEADER);
    if (n == 0) return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.header_empty", "header length is 0");
    if (n > st->size - 8)
        return fp4_fail(err, FP4_ERR_TRUNCATED, file, NULL, "st.header_len",
                        "header length %llu runs past the end of the %zu-byte file", (unsigned long long)n,
                        st->size);
    st->n_header = n;
    const uint8_t *h = st->base + 8;
    if (n >= 3 && h[0] == 0xEF && h[1] == 0xBB && h[2] == 0xBF)
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.bom",
                        "header starts with a UTF-8 byte order mark");
    if (!fp4_st_utf8_valid(h, (size_t)n))
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.utf8", "header is not valid UTF-8");
    size_t i = 0;
    while (i < n && is_ws(h[i])) i++;
    if (i == n || h[i] != '{')
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.not_object", "header is not a JSON object");
    return st_scan_check(h, (size_t)n, file, err);
}

static fp4_status st_load_json(fp4_st *st, json_t **root, const char *file, fp4_error *err) {
    json_error_t je;
    *root = json_loadb((const char *)st->base + 8, (size_t)st->n_header,
                       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (*root && json_is_object(*root)) return FP4_OK;
    if (*root) {
        json_decref(*root);
        *root = NULL;
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.not_object", "header is not a JSON object");
    }
    fp4_status s = FP4_ERR_FORMAT;
    const char *rule = "st.json";
    switch (json_error_code(&je)) {
    case json_error_duplicate_key: s = FP4_ERR_DUPLICATE, rule = "st.dup"; break;
    case json_error_null_byte_in_key: rule = "st.name"; break;
    case json_error_end_of_input_expected: rule = "st.trailing"; break;
    case json_error_stack_overflow: s = FP4_ERR_LIMIT, rule = "st.depth"; break;
    case json_error_numeric_overflow: rule = "st.number"; break;
    case json_error_invalid_utf8: rule = "st.utf8"; break;
    case json_error_out_of_memory: s = FP4_ERR_NOMEM, rule = "st.nomem"; break;
    default: break;
    }
    return fp4_fail(err, s, file, NULL, rule, "header JSON at byte %d: %s", je.position, je.text);
}

/* ---- one tensor entry ---- */

static bool json_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static fp4_status st_shape(const json_t *sh, fp4_st_tensor *t, const char *file, fp4_error *err) {
    size_t rank = json_array_size(sh);
    if (rank > FP4_MAX_DIMS)
        return fp4_fail(err, FP4_ERR_LIMIT, file, t->name, "st.rank", "rank %zu above %d", rank,
                        FP4_MAX_DIMS);
    t->rank = (int)rank;
    for (size_t i = 0; i < rank; i++) {
        const json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return fp4_fail(err, FP4_ERR_SHAPE, file, t->name, "st.shape",
                            "shape[%zu] is not a non-negative integer", i);
        t->shape[i] = (int64_t)json_integer_value(d);
    }
    uint64_t nbytes;
    const char *rule = NULL;
    fp4_status s = fp4_st_nbytes(t->dtype, t->rank, t->shape, &nbytes, &rule);
    if (s)
        return fp4_fail(err, s, file, t->name, rule, "shape cannot describe a tensor of %s",
                        dtab[t->dtype].name);
    t->nbytes = (size_t)nbytes;
    return FP4_OK;
}

static fp4_status st_offsets(const json_t *off, fp4_st_tensor *t, const char *file, fp4_error *err) {
    uint64_t b, e;
    if (json_array_size(off) != 2 || !json_uint(json_array_get(off, 0), &b) ||
        !json_uint(json_array_get(off, 1), &e))
        return fp4_fail(err, FP4_ERR_FORMAT, file, t->name, "st.offsets",
                        "data_offsets is not two non-negative integers");
    if (e < b)
        return fp4_fail(err, FP4_ERR_BOUNDS, file, t->name, "st.offsets_order",
                        "data_offsets end %llu < begin %llu", (unsigned long long)e, (unsigned long long)b);
    if (e - b != (uint64_t)t->nbytes)
        return fp4_fail(err, FP4_ERR_SHAPE, file, t->name, "st.offsets_size",
                        "data_offsets span %llu bytes, dtype and shape need %zu", (unsigned long long)(e - b),
                        t->nbytes);
    t->offset = b;
    return FP4_OK;
}

static fp4_status st_entry(const char *name, size_t name_len, const json_t *v, fp4_st_tensor *t,
                           const char *file, fp4_error *err) {
    t->name = name;
    if (name_len == 0) return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.name", "empty tensor name");
    if (name_len > FP4_MAX_NAME)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.name_len", "tensor name of %zu bytes, above %d",
                        name_len, FP4_MAX_NAME);
    if (!json_is_object(v))
        return fp4_fail(err, FP4_ERR_FORMAT, file, name, "st.entry.type",
                        "tensor entry is not a JSON object");
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    const json_t *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return fp4_fail(err, FP4_ERR_FORMAT, file, name, "st.entry.fields",
                        "tensor entry lacks dtype, shape or data_offsets");
    if (json_object_size(v) != 3)
        return fp4_fail(err, FP4_ERR_FORMAT, file, name, "st.entry.extra", "tensor entry has unknown fields");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
        return fp4_fail(err, FP4_ERR_FORMAT, file, name, "st.entry.type",
                        "a tensor entry field has the wrong JSON type");
    if (!dtype_lookup(json_string_value(dt), json_string_length(dt), &t->dtype))
        return fp4_fail(err, FP4_ERR_DTYPE, file, name, "st.dtype", "unknown dtype \"%.32s\"",
                        json_string_value(dt));
    fp4_status s = st_shape(sh, t, file, err);
    return s ? s : st_offsets(off, t, file, err);
}

static fp4_status st_metadata(fp4_st *st, const json_t *m, const char *file, fp4_error *err) {
    if (!json_is_object(m))
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.metadata", "__metadata__ is not an object");
    st->n_meta = json_object_size(m);
    st->meta = calloc(2 * st->n_meta + 1, sizeof *st->meta);
    st->meta_len = calloc(2 * st->n_meta + 1, sizeof *st->meta_len);
    if (!st->meta || !st->meta_len)
        return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    size_t i = 0;
    for (void *it = json_object_iter((json_t *)m); it; it = json_object_iter_next((json_t *)m, it), i++) {
        const char *k = json_object_iter_key(it);
        const json_t *v = json_object_iter_value(it);
        if (!json_is_string(v) || memchr(json_string_value(v), 0, json_string_length(v)))
            return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.metadata.value",
                            "__metadata__ value of \"%.64s\" is not a string without NUL", k);
        st->meta[2 * i] = k;
        st->meta_len[2 * i] = json_object_iter_key_len(it);
        st->meta[2 * i + 1] = json_string_value(v);
        st->meta_len[2 * i + 1] = json_string_length(v);
    }
    return FP4_OK;
}

static fp4_status st_collect(fp4_st *st, json_t *root, size_t *name_len, const char *file, fp4_error *err) {
    size_t i = 0;
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        const char *k = json_object_iter_key(it);
        size_t kl = json_object_iter_key_len(it);
        fp4_status s;
        if (kl == 12 && memcmp(k, "__metadata__", 12) == 0) {
            s = st_metadata(st, json_object_iter_value(it), file, err);
        } else {
            name_len[i] = kl;
            s = st_entry(k, kl, json_object_iter_value(it), &st->t[i++], file, err);
        }
        if (s) return s;
    }
    return FP4_OK;
}

/* ---- layout: sorted offsets from 0, no gap, no overlap, exact end ---- */

typedef struct span {
    uint64_t b, e;
    size_t idx;
} span;

static int span_cmp(const void *pa, const void *pb) {
    const span *a = pa, *b = pb;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static fp4_status st_layout_check(const fp4_st *st, const span *sp, const char *file, fp4_error *err) {
    uint64_t end = 0;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const char *name = st->t[sp[i].idx].name;
        if (sp[i].b > end)
            return fp4_fail(err, FP4_ERR_BOUNDS, file, name, "st.gap",
                            "gap in the data region before offset %llu", (unsigned long long)sp[i].b);
        if (sp[i].b < end)
            return fp4_fail(err, FP4_ERR_BOUNDS, file, name, "st.overlap",
                            "data overlaps the previous tensor at %llu", (unsigned long long)sp[i].b);
        end = sp[i].e;
    }
    uint64_t avail = (uint64_t)st->size - 8 - st->n_header;
    const char *last = st->n_tensors ? st->t[sp[st->n_tensors - 1].idx].name : NULL;
    if (end > avail)
        return fp4_fail(err, FP4_ERR_TRUNCATED, file, last, "st.data_truncated",
                        "data region needs %llu bytes, file holds %llu", (unsigned long long)end,
                        (unsigned long long)avail);
    if (end < avail)
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, "st.tail", "%llu bytes after the last tensor",
                        (unsigned long long)(avail - end));
    return FP4_OK;
}

static fp4_status st_layout(fp4_st *st, const char *file, fp4_error *err) {
    span *sp = calloc(st->n_tensors + 1, sizeof *sp);
    if (!sp) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    for (size_t i = 0; i < st->n_tensors; i++)
        sp[i] = (span){st->t[i].offset, st->t[i].offset + st->t[i].nbytes, i};
    qsort(sp, st->n_tensors, sizeof *sp, span_cmp);
    fp4_status s = st_layout_check(st, sp, file, err);
    free(sp);
    if (s) return s;
    const uint8_t *data = st->base + 8 + st->n_header;
    for (size_t i = 0; i < st->n_tensors; i++) st->t[i].data = data + st->t[i].offset;
    return FP4_OK;
}

/* ---- own copies of the strings, name index ---- */

static char *arena_copy(char **cur, const char *s, size_t n) {
    char *d = *cur;
    memcpy(d, s, n);
    d[n] = 0;
    *cur += n + 1;
    return d;
}

static fp4_status st_own_strings(fp4_st *st, const size_t *name_len, const char *file, fp4_error *err) {
    uint64_t total = 1;
    for (size_t i = 0; i < st->n_tensors; i++) total += name_len[i] + 1;
    for (size_t i = 0; i < 2 * st->n_meta; i++) total += st->meta_len[i] + 1;
    if (total > (uint64_t)st->n_header * 2 + 16) /* strings come from the header: cannot happen */
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.header_cap", "string bytes exceed the header");
    st->arena = malloc((size_t)total);
    if (!st->arena) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    char *cur = st->arena;
    for (size_t i = 0; i < st->n_tensors; i++) st->t[i].name = arena_copy(&cur, st->t[i].name, name_len[i]);
    for (size_t i = 0; i < 2 * st->n_meta; i++) st->meta[i] = arena_copy(&cur, st->meta[i], st->meta_len[i]);
    free(st->meta_len);
    st->meta_len = NULL;
    return FP4_OK;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp((*(const fp4_st_tensor *const *)a)->name, (*(const fp4_st_tensor *const *)b)->name);
}

static fp4_status st_index(fp4_st *st, const char *file, fp4_error *err) {
    st->by_name = malloc((st->n_tensors + 1) * sizeof *st->by_name);
    if (!st->by_name) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    for (size_t i = 0; i < st->n_tensors; i++) st->by_name[i] = &st->t[i];
    qsort(st->by_name, st->n_tensors, sizeof *st->by_name, name_cmp);
    return FP4_OK;
}

/* ---- open ---- */

static fp4_status st_parse(fp4_st *st, const char *file, fp4_error *err) {
    fp4_status s = st_frame(st, file, err);
    if (s) return s;
    json_t *root = NULL;
    if ((s = st_load_json(st, &root, file, err))) return s;
    size_t n = json_object_size(root);
    if (json_object_get(root, "__metadata__")) n--;
    size_t *name_len = NULL;
    if (n > FP4_MAX_TENSORS) {
        s = fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "st.tensor_count", "%zu tensors, above %d", n,
                     FP4_MAX_TENSORS);
        goto done;
    }
    st->n_tensors = n;
    st->t = calloc(n + 1, sizeof *st->t);
    name_len = calloc(n + 1, sizeof *name_len);
    if (!st->t || !name_len) {
        s = fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
        goto done;
    }
    if ((s = st_collect(st, root, name_len, file, err))) goto done;
    if ((s = st_layout(st, file, err))) goto done;
    if ((s = st_own_strings(st, name_len, file, err))) goto done;
    s = st_index(st, file, err);
done:
    free(name_len);
    json_decref(root); /* every string we keep now lives in st->arena */
    return s;
}

static fp4_status st_open_common(const uint8_t *base, size_t size, void *map, const char *file, fp4_st **out,
                                 fp4_error *err) {
    fp4_st *st = calloc(1, sizeof *st);
    if (!st) {
        if (map) munmap(map, size);
        return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "st.nomem", "out of memory");
    }
    st->base = base;
    st->size = size;
    st->map = map;
    fp4_status s = st_parse(st, file, err);
    if (s) {
        fp4_st_close(st);
        return s;
    }
    *out = st;
    return FP4_OK;
}

fp4_status fp4_st_open_buffer(const void *data, size_t size, fp4_st **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "st.arg", "out is NULL");
    *out = NULL;
    if (!data && size) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "st.arg", "data is NULL");
    static const uint8_t empty[1];
    return st_open_common(data ? data : empty, size, NULL, NULL, out, err);
}

fp4_status fp4_st_open(const char *path, fp4_st **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!path || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "st.arg", "path or out is NULL");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) return fp4_fail(err, FP4_ERR_IO, path, NULL, "st.open", "open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "st.open", "not a regular file (%s)", strerror(e));
    }
    if ((uint64_t)sb.st_size < 8 || (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return fp4_fail(err, FP4_ERR_TRUNCATED, path, NULL, "st.short", "file has %lld bytes, fewer than 8",
                        (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return fp4_fail(err, FP4_ERR_IO, path, NULL, "st.open", "mmap: %s", strerror(e));
    return st_open_common(map, size, map, path, out, err);
}

/* ---- accessors ---- */

int64_t fp4_st_n_tensors(const fp4_st *st) { return st ? (int64_t)st->n_tensors : 0; }

const fp4_st_tensor *fp4_st_tensor_at(const fp4_st *st, int64_t i) {
    return st && i >= 0 && (uint64_t)i < st->n_tensors ? &st->t[i] : NULL;
}

const fp4_st_tensor *fp4_st_find(const fp4_st *st, const char *name) {
    if (!st || !name) return NULL;
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid]->name, name);
        if (c == 0) return st->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int64_t fp4_st_n_metadata(const fp4_st *st) { return st ? (int64_t)st->n_meta : 0; }

fp4_status fp4_st_metadata_at(const fp4_st *st, int64_t i, const char **key, const char **value) {
    if (!st || i < 0 || (uint64_t)i >= st->n_meta) return FP4_ERR_NOT_FOUND;
    if (key) *key = st->meta[2 * i];
    if (value) *value = st->meta[2 * i + 1];
    return FP4_OK;
}

const char *fp4_st_metadata_get(const fp4_st *st, const char *key) {
    if (!st || !key) return NULL;
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

uint64_t fp4_st_header_len(const fp4_st *st) { return st ? st->n_header : 0; }
