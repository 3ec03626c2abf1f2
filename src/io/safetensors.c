/* safetensors.c — the safetensors reader: an 8-byte little-endian header length N, N bytes of
 * UTF-8 JSON (parsed in one pass by st_header.c, duplicate keys refused), then a data region that
 * the tensors' data_offsets must cover exactly. Every check of reliability.md §4.2 gives its own rule id. */
#include "io/infile.h"
#include "io/st_impl.h"

#include <errno.h>
#include <fcntl.h>
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
    char *arena;       /* every name, key and value (st_header.c) */
};

void fp4_st_close(fp4_st *st) {
    if (!st) return;
    if (st->map) munmap(st->map, st->size);
    free(st->t);
    free(st->by_name);
    free(st->meta);
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

/* ---- name index ---- */

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
    fp4_st_hdr h; /* one pass, no JSON tree (st_header.c) */
    s = fp4_st_header_parse(st->base + 8, (size_t)st->n_header, file, &h, err);
    st->t = h.t, st->n_tensors = h.n_t, st->meta = h.meta, st->n_meta = h.n_meta, st->arena = h.arena;
    if (!s) s = st_layout(st, file, err);
    if (!s) s = st_index(st, file, err);
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
    int fd;
    uint64_t size64;
    fp4_status so = fp4_infile_open(path, "st.open", false, &fd, &size64, err);
    if (so) return so;
    if (size64 < 8 || size64 > SIZE_MAX) {
        close(fd);
        return fp4_fail(err, FP4_ERR_TRUNCATED, path, NULL, "st.short", "file has %llu bytes, fewer than 8",
                        (unsigned long long)size64);
    }
    size_t size = (size_t)size64;
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
