/* gguf_write.c — the streaming GGUF v3 writer. Metadata is serialized into memory as it is
 * added (O(metadata)); tensor infos are kept as small records; tensor bytes go straight from the
 * caller to the file, chunk by chunk, with zero padding after each tensor. Everything it writes
 * follows the reader's grammar (gguf.c), so writer -> reader reproduces every key, value,
 * tensor info and byte. */
#include "io/gguf_impl.h"
#include "io/outfile.h"
#include <stdio.h>

/* ---- name index for duplicate detection: open addressing, FNV-1a. The writer's names come
 * from its caller, not from a file, so a hash is fine here (the reader sorts instead). ---- */
typedef const char *(*gguf_name_fn)(const void *ctx, uint32_t idx, size_t *len);

typedef struct gguf_index {
    uint32_t *slot;        /* idx + 1, 0 = empty; cap slots, cap a power of two              */
    size_t cap, used;
    gguf_name_fn name;
    const void *ctx;
} gguf_index;

static uint64_t gguf_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* Slot holding name s, or the empty slot where it would go. */
static size_t gguf_index_probe(const gguf_index *ix, const char *s, size_t n) {
    size_t m = ix->cap - 1, i = (size_t)gguf_hash(s, n) & m;
    for (;; i = (i + 1) & m) {
        uint32_t v = ix->slot[i];
        if (!v) return i;
        size_t ln;
        const char *t = ix->name(ix->ctx, v - 1, &ln);
        if (ln == n && memcmp(t, s, n) == 0) return i;
    }
}

static int64_t gguf_index_find(const gguf_index *ix, const char *s, size_t n) {
    if (!ix->cap) return -1;
    uint32_t v = ix->slot[gguf_index_probe(ix, s, n)];
    return v ? (int64_t)v - 1 : -1;
}

/* Adds idx (its name from the callback); FP4_ERR_DUPLICATE when the name is there already. */
static fp4_status gguf_index_add(gguf_index *ix, uint32_t idx) {
    if (idx >= UINT32_MAX - 1) return FP4_ERR_LIMIT;
    if (2 * (ix->used + 1) > ix->cap) {            /* keep the load at most 1/2 */
        size_t nc = ix->cap ? 2 * ix->cap : 16;
        uint32_t *ns = calloc(nc, sizeof *ns), *old = ix->slot;
        if (!ns) return FP4_ERR_NOMEM;
        size_t oc = ix->cap;
        ix->slot = ns;
        ix->cap = nc;
        for (size_t i = 0; i < oc; i++) {
            if (!old[i]) continue;
            size_t ln;
            const char *t = ix->name(ix->ctx, old[i] - 1, &ln);
            ns[gguf_index_probe(ix, t, ln)] = old[i];
        }
        free(old);
    }
    size_t ln;
    const char *s = ix->name(ix->ctx, idx, &ln);
    size_t at = gguf_index_probe(ix, s, ln);
    if (ix->slot[at]) return FP4_ERR_DUPLICATE;
    ix->slot[at] = idx + 1;
    ix->used++;
    return FP4_OK;
}

static void gguf_index_free(gguf_index *ix) {
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = ix->used = 0;
}

typedef struct gw_kv {
    size_t key_off;          /* key bytes inside w->meta                                      */
    uint32_t key_len;
} gw_kv;

typedef struct gw_tensor {
    size_t name_off;         /* NUL-terminated copy in w->names                               */
    uint32_t type, n_dims;
    uint64_t ne[FP4_MAX_DIMS];
    uint64_t size, padded, offset;
} gw_tensor;

enum { GW_BUILD = 0, GW_WRITING = 1, GW_DONE = 2, GW_FAILED = 3 };

struct fp4_gguf_writer {
    uint8_t *meta;           /* serialized KV pairs                                           */
    size_t meta_len, meta_cap;
    gw_kv *kv;
    size_t n_kv, kv_cap;
    gw_tensor *t;
    size_t n_t, t_cap;
    char *names;
    size_t names_len, names_cap;
    gguf_index kv_ix, t_ix;
    uint32_t alignment;
    uint64_t total;          /* running padded size of the data section                       */
    int state;
    fp4_outfile *o;          /* the temporary file; renamed over path by finish                */
    char *path;
    fp4_out_check_fn check;  /* run on the complete file before it replaces path (may be NULL) */
    void *check_ctx;
    int noreplace;           /* finish refuses a target that exists by then                   */
    size_t cur;              /* tensor being written, and its bytes so far                    */
    uint64_t cur_done;
};

/* every fallible call fills the caller's err (may be NULL), like the reader */
#define WFAIL(w, code, tensor, rule, ...) fp4_fail(err, (code), (w)->path, (tensor), (rule), __VA_ARGS__)

static const char *gw_kv_name(const void *ctx, uint32_t i, size_t *len) {
    const fp4_gguf_writer *w = ctx;
    *len = w->kv[i].key_len;
    return (const char *)w->meta + w->kv[i].key_off;
}

static const char *gw_tensor_name(const void *ctx, uint32_t i, size_t *len) {
    const fp4_gguf_writer *w = ctx;
    const char *s = w->names + w->t[i].name_off;
    *len = strlen(s);
    return s;
}

fp4_status fp4_gguf_writer_create(fp4_gguf_writer **out, fp4_error *err) {
    if (!out) return FP4_ERR_INVALID_ARG;
    fp4_gguf_writer *w = calloc(1, sizeof *w);
    *out = w;
    if (!w) return FP4_ERR_NOMEM;
    w->alignment = FP4_GGUF_DEFAULT_ALIGNMENT;
    w->kv_ix.name = gw_kv_name;
    w->kv_ix.ctx = w;
    w->t_ix.name = gw_tensor_name;
    w->t_ix.ctx = w;
    return FP4_OK;
}

/* Removes the temporary file; whatever was at the target path stays as it was. */
static void gw_abandon(fp4_gguf_writer *w) {
    fp4_outfile_abort(w->o);
    w->o = NULL;
}

void fp4_gguf_writer_set_noreplace(fp4_gguf_writer *w) { w->noreplace = 1; }

void fp4_gguf_writer_set_check(fp4_gguf_writer *w, fp4_out_check_fn fn, void *ctx) {
    w->check = fn;
    w->check_ctx = ctx;
}

void fp4_gguf_writer_free(fp4_gguf_writer *w) {
    if (!w) return;
    gw_abandon(w);
    gguf_index_free(&w->kv_ix);
    gguf_index_free(&w->t_ix);
    free(w->meta);
    free(w->kv);
    free(w->t);
    free(w->names);
    free(w->path);
    free(w);
}

int64_t fp4_gguf_writer_n_tensors(const fp4_gguf_writer *w) { return w ? (int64_t)w->n_t : 0; }
uint64_t fp4_gguf_writer_tensor_size(const fp4_gguf_writer *w, int64_t i) {
    return w && i >= 0 && (uint64_t)i < w->n_t ? w->t[i].size : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata                                                                                   */

static fp4_status put(fp4_gguf_writer *w, const void *p, size_t n, fp4_error *err) {
    if (!gguf_grow((void **)&w->meta, &w->meta_cap, w->meta_len + n, 1))
        return WFAIL(w, FP4_ERR_NOMEM, NULL, "writer.nomem", "out of memory for metadata");
    if (n) memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
    return FP4_OK;
}

static fp4_status put_le(fp4_gguf_writer *w, uint64_t v, size_t n, fp4_error *err) {
    uint8_t b[8];
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, n, err);
}

static fp4_status check_building(fp4_gguf_writer *w, fp4_error *err) {
    if (w->state != GW_BUILD)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.state",
                     "metadata and tensors must come before the header");
    return FP4_OK;
}

/* Appends key and value type; the value follows. On any later failure the caller rolls back. */
static fp4_status kv_begin(fp4_gguf_writer *w, const char *key, uint32_t type, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    fp4_status st = check_building(w, err), code = FP4_OK;
    if (st) return st;
    if (!key) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.arg", "NULL key");
    size_t klen = strlen(key);
    const char *rule = gguf_key_rule((const uint8_t *)key, klen, &code);
    if (rule) return WFAIL(w, code, NULL, rule, "key '%.64s' breaks %s", key, rule);
    if (gguf_index_find(&w->kv_ix, key, klen) >= 0)
        return WFAIL(w, FP4_ERR_DUPLICATE, NULL, "gguf.kv.dup_key", "key '%.64s' was added already", key);
    if (!gguf_grow((void **)&w->kv, &w->kv_cap, w->n_kv + 1, sizeof *w->kv) || w->n_kv >= FP4_MAX_KV)
        return WFAIL(w, FP4_ERR_LIMIT, NULL, "gguf.n_kv", "too many keys or out of memory");
    if ((st = put_le(w, klen, 8, err))) return st;
    w->kv[w->n_kv].key_off = w->meta_len;
    w->kv[w->n_kv].key_len = (uint32_t)klen;
    if ((st = put(w, key, klen, err)) || (st = put_le(w, type, 4, err))) return st;
    return FP4_OK;
}

/* Registers the KV begun by kv_begin once its value is in place. */
static fp4_status kv_commit(fp4_gguf_writer *w, fp4_error *err) {
    fp4_status st = gguf_index_add(&w->kv_ix, (uint32_t)w->n_kv);
    if (st) return WFAIL(w, st, NULL, "writer.nomem", "out of memory for the key index");
    w->n_kv++;
    return FP4_OK;
}

static fp4_status add_fixed(fp4_gguf_writer *w, const char *key, uint32_t type, uint64_t bits,
                            fp4_error *err) {
    size_t mark = w ? w->meta_len : 0;
    fp4_status st = kv_begin(w, key, type, err);
    if (!st) st = put_le(w, bits, gguf_value_size[type], err);
    if (!st) st = kv_commit(w, err);
    if (st && w) w->meta_len = mark;
    return st;
}

fp4_status fp4_gguf_writer_set_alignment(fp4_gguf_writer *w, uint32_t alignment, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    fp4_status st = check_building(w, err);
    if (st) return st;
    if (w->n_t > 0)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.state",
                     "the alignment must be set before any tensor");
    if (!gguf_alignment_ok(alignment))
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "gguf.alignment",
                     "alignment %u is not a power of two in [%u, %u]",
                     alignment, FP4_GGUF_MIN_ALIGNMENT, FP4_GGUF_MAX_ALIGNMENT);
    if ((st = add_fixed(w, GGUF_KEY_ALIGNMENT, FP4_GGUF_UINT32, alignment, err))) return st;
    w->alignment = alignment;
    return FP4_OK;
}

fp4_status fp4_gguf_writer_add_u8(fp4_gguf_writer *w, const char *key, uint8_t v,
                                  fp4_error *err) { return add_fixed(w, key, FP4_GGUF_UINT8, v, err); }
fp4_status fp4_gguf_writer_add_i8(fp4_gguf_writer *w, const char *key, int8_t v,
                                  fp4_error *err) { return add_fixed(w, key, FP4_GGUF_INT8, (uint8_t)v,
                                                                     err); }
fp4_status fp4_gguf_writer_add_u16(fp4_gguf_writer *w, const char *key, uint16_t v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_UINT16, v, err); }
fp4_status fp4_gguf_writer_add_i16(fp4_gguf_writer *w, const char *key, int16_t v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_INT16, (uint16_t)v,
                                                                      err); }
fp4_status fp4_gguf_writer_add_i32(fp4_gguf_writer *w, const char *key, int32_t v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_INT32, (uint32_t)v,
                                                                      err); }
fp4_status fp4_gguf_writer_add_u64(fp4_gguf_writer *w, const char *key, uint64_t v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_UINT64, v, err); }
fp4_status fp4_gguf_writer_add_i64(fp4_gguf_writer *w, const char *key, int64_t v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_INT64, (uint64_t)v,
                                                                      err); }
fp4_status fp4_gguf_writer_add_f32(fp4_gguf_writer *w, const char *key, float v,
                                   fp4_error *err) { return add_fixed(w, key, FP4_GGUF_FLOAT32,
                                                                      fp4_f32_bits(v), err); }

fp4_status fp4_gguf_writer_add_u32(fp4_gguf_writer *w, const char *key, uint32_t v, fp4_error *err) {
    if (key && strcmp(key, GGUF_KEY_ALIGNMENT) == 0) return fp4_gguf_writer_set_alignment(w, v, err);
    return add_fixed(w, key, FP4_GGUF_UINT32, v, err);
}

fp4_status fp4_gguf_writer_add_f64(fp4_gguf_writer *w, const char *key, double v, fp4_error *err) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return add_fixed(w, key, FP4_GGUF_FLOAT64, u, err);
}

fp4_status fp4_gguf_writer_add_bool(fp4_gguf_writer *w, const char *key, int v, fp4_error *err) {
    if (w && v != 0 && v != 1) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "gguf.bool",
                                            "bool value %d is not 0 or 1", v);
    return add_fixed(w, key, FP4_GGUF_BOOL, (uint64_t)v, err);
}

static fp4_status put_string(fp4_gguf_writer *w, const char *s, uint64_t len, fp4_error *err) {
    if (!s && len) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.arg", "NULL string");
    if (len > FP4_MAX_STRING)
        return WFAIL(w, FP4_ERR_LIMIT, NULL, "gguf.string.len", "string of %llu bytes is above the limit",
                     (unsigned long long)len);
    fp4_status st = put_le(w, len, 8, err);
    return st ? st : put(w, s, (size_t)len, err);
}

fp4_status fp4_gguf_writer_add_str(fp4_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                   fp4_error *err) {
    size_t mark = w ? w->meta_len : 0;
    fp4_status st = kv_begin(w, key, FP4_GGUF_STRING, err);
    if (!st) st = put_string(w, s, len, err);
    if (!st) st = kv_commit(w, err);
    if (st && w) w->meta_len = mark;
    return st;
}

/* Array elements of a fixed-size type, host order in, little-endian out. */
static fp4_status put_elements(fp4_gguf_writer *w, fp4_gguf_type elem, const void *data, uint64_t n,
                               fp4_error *err) {
    size_t esz = gguf_value_size[elem];
    const uint8_t *p = data;
    for (uint64_t j = 0; j < n; j++, p += esz) {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t v = 0;
        if (esz == 1) memcpy(&u8, p, 1), v = u8;
        if (esz == 2) memcpy(&u16, p, 2), v = u16;
        if (esz == 4) memcpy(&u32, p, 4), v = u32;
        if (esz == 8) memcpy(&v, p, 8);
        if (elem == FP4_GGUF_BOOL && v > 1)
            return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "gguf.bool", "bool element %llu is %llu, not 0 or 1",
                         (unsigned long long)j, (unsigned long long)v);
        fp4_status st = put_le(w, v, esz, err);
        if (st) return st;
    }
    return FP4_OK;
}

static fp4_status arr_head(fp4_gguf_writer *w, uint32_t elem, uint64_t n, fp4_error *err) {
    if (n > FP4_MAX_ARRAY)
        return WFAIL(w, FP4_ERR_LIMIT, NULL, "gguf.array.count", "%llu elements, above the limit",
                     (unsigned long long)n);
    fp4_status st = put_le(w, elem, 4, err);
    return st ? st : put_le(w, n, 8, err);
}

fp4_status fp4_gguf_writer_add_arr(fp4_gguf_writer *w, const char *key, fp4_gguf_type elem, const void *data,
                                   uint64_t n, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    if ((unsigned)elem >= FP4_GGUF_TYPE_COUNT_ || gguf_value_size[elem] == 0)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "gguf.array.type",
                     "element type %d is not a fixed-size type", elem);
    if (!data && n) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.arg", "NULL array data");
    size_t mark = w->meta_len;
    fp4_status st = kv_begin(w, key, FP4_GGUF_ARRAY, err);
    if (!st) st = arr_head(w, (uint32_t)elem, n, err);
    if (!st) st = put_elements(w, elem, data, n, err);
    if (!st) st = kv_commit(w, err);
    if (st) w->meta_len = mark;
    return st;
}

fp4_status fp4_gguf_writer_add_arr_str(fp4_gguf_writer *w, const char *key, const char *const *s,
                                       const uint64_t *lens,
                                       uint64_t n, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    if (!s && n) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.arg", "NULL string array");
    size_t mark = w->meta_len;
    fp4_status st = kv_begin(w, key, FP4_GGUF_ARRAY, err);
    if (!st) st = arr_head(w, FP4_GGUF_STRING, n, err);
    for (uint64_t j = 0; !st && j < n; j++)
        st = put_string(w, s[j], lens ? lens[j] : (s[j] ? strlen(s[j]) : 0), err);
    if (!st) st = kv_commit(w, err);
    if (st) w->meta_len = mark;
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                    */

static fp4_status add_name(fp4_gguf_writer *w, const char *name, size_t len, size_t *off, fp4_error *err) {
    if (!gguf_grow((void **)&w->names, &w->names_cap, w->names_len + len + 1, 1))
        return WFAIL(w, FP4_ERR_NOMEM, name, "writer.nomem", "out of memory for names");
    memcpy(w->names + w->names_len, name, len + 1);
    *off = w->names_len;
    w->names_len += len + 1;
    return FP4_OK;
}

fp4_status fp4_gguf_writer_add_tensor(fp4_gguf_writer *w, const char *name, fp4_type type, int32_t n_dims,
                                      const int64_t *ne, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    fp4_status st = check_building(w, err), code = FP4_OK;
    if (st) return st;
    if (!name || !ne) return WFAIL(w, FP4_ERR_INVALID_ARG, name, "writer.arg", "NULL name or shape");
    size_t len = strlen(name);
    const char *rule = gguf_name_rule((const uint8_t *)name, len, &code);
    if (rule) return WFAIL(w, code, name, rule, "tensor name breaks %s", rule);
    if (gguf_index_find(&w->t_ix, name, len) >= 0)
        return WFAIL(w, FP4_ERR_DUPLICATE, name, "gguf.tensor.dup", "tensor name was added already");
    if (w->n_t >= FP4_MAX_TENSORS || !gguf_grow((void **)&w->t, &w->t_cap, w->n_t + 1, sizeof *w->t))
        return WFAIL(w, FP4_ERR_LIMIT, name, "gguf.n_tensors", "too many tensors or out of memory");
    if (n_dims < 1 || n_dims > FP4_MAX_DIMS) /* before reading ne[] */
        return WFAIL(w, FP4_ERR_FORMAT, name, "gguf.tensor.n_dims", "n_dims %d is not in 1..%d", (int)n_dims,
                     FP4_MAX_DIMS);
    gw_tensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    for (int32_t j = 0; j < n_dims; j++) t->ne[j] = (uint64_t)ne[j];
    int64_t ne4[FP4_MAX_DIMS], nel;
    rule = gguf_tensor_rule((uint32_t)type, (uint32_t)n_dims, t->ne, w->alignment, ne4, &nel, &t->size,
                            &t->padded,
                            &code);
    if (rule) return WFAIL(w, code, name, rule, "type %d, n_dims %d breaks %s", (int)type, (int)n_dims, rule);
    uint64_t end;
    if (fp4_add_overflow_u64(w->total, t->padded, &end) || end > (uint64_t)INT64_MAX)
        return WFAIL(w, FP4_ERR_OVERFLOW, name, "gguf.tensor.size_sum",
                     "the data section would pass 2^63 bytes");
    t->type = (uint32_t)type;
    t->n_dims = (uint32_t)n_dims;
    if ((st = add_name(w, name, len, &t->name_off, err))) return st;
    if ((st = gguf_index_add(&w->t_ix, (uint32_t)w->n_t)))
        return WFAIL(w, st, name, "writer.nomem", "out of memory for the tensor index");
    t->offset = w->total;
    w->total = end;
    w->n_t++;
    return FP4_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                    */

static fp4_status gw_write(fp4_gguf_writer *w, const void *p, size_t n, fp4_error *err) {
    fp4_status st = fp4_outfile_write(w->o, p, n, err);
    if (st) {
        gw_abandon(w);
        w->state = GW_FAILED;
    }
    return st;
}

static fp4_status gw_zeros(fp4_gguf_writer *w, uint64_t n, fp4_error *err) {
    static const uint8_t zero[4096];
    while (n) {
        size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
        fp4_status st = gw_write(w, zero, k, err);
        if (st) return st;
        n -= k;
    }
    return FP4_OK;
}

/* Header, metadata, tensor infos and the padding up to the data section. */
static fp4_status gw_write_head(fp4_gguf_writer *w, fp4_error *err) {
    uint8_t h[GGUF_HEADER_BYTES];
    memcpy(h, GGUF_MAGIC, 4);
    fp4_wr_le32(h + 4, GGUF_VERSION);
    fp4_wr_le64(h + 8, w->n_t);
    fp4_wr_le64(h + 16, w->n_kv);
    fp4_status st = gw_write(w, h, sizeof h, err);
    if (!st) st = gw_write(w, w->meta, w->meta_len, err);
    uint64_t n = sizeof h + w->meta_len;
    for (size_t i = 0; !st && i < w->n_t; i++) {
        const gw_tensor *t = &w->t[i];
        uint8_t b[8 + FP4_MAX_NAME + 4 + 8 * FP4_MAX_DIMS + 4 + 8], *p = b;
        size_t len = strlen(w->names + t->name_off);
        fp4_wr_le64(p, len);
        memcpy(p + 8, w->names + t->name_off, len);
        p += 8 + len;
        fp4_wr_le32(p, t->n_dims);
        p += 4;
        for (uint32_t j = 0; j < t->n_dims; j++, p += 8) fp4_wr_le64(p, t->ne[j]);
        fp4_wr_le32(p, t->type);
        fp4_wr_le64(p + 4, t->offset);
        p += 12;
        st = gw_write(w, b, (size_t)(p - b), err);
        n += (uint64_t)(p - b);
    }
    uint64_t d = (n + w->alignment - 1) & ~(uint64_t)(w->alignment - 1);
    return st ? st : gw_zeros(w, d - n, err);
}

fp4_status fp4_gguf_writer_write_header(fp4_gguf_writer *w, const char *path, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    fp4_status st = check_building(w, err);
    if (st) return st;
    if (!path) return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.arg", "NULL path");
    size_t n = strlen(path) + 1;
    if (!(w->path = malloc(n))) return WFAIL(w, FP4_ERR_NOMEM, NULL, "writer.nomem", "out of memory");
    memcpy(w->path, path, n);
    if ((st = fp4_outfile_open(path, &w->o, err))) {
        w->state = GW_FAILED;
        return st;
    }
    if (w->check) fp4_outfile_set_check(w->o, w->check, w->check_ctx);
    if (w->noreplace) fp4_outfile_set_noreplace(w->o);
    w->state = GW_WRITING;
    return gw_write_head(w, err);
}

fp4_status fp4_gguf_writer_write_tensor_data(fp4_gguf_writer *w, int64_t i, const void *data, size_t size,
                                             fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    if (w->state != GW_WRITING)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.state", "tensor data needs a written header");
    if (i < 0 || (uint64_t)i != w->cur || w->cur >= w->n_t)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.order",
                     "tensor %lld written out of order (next is %zu)",
                     (long long)i, w->cur);
    const gw_tensor *t = &w->t[w->cur];
    const char *name = w->names + t->name_off;
    if (!data && size) return WFAIL(w, FP4_ERR_INVALID_ARG, name, "writer.arg", "NULL data");
    if (size > t->size - w->cur_done)
        return WFAIL(w, FP4_ERR_INVALID_ARG, name, "writer.size",
                     "%zu bytes more than the %llu left of the tensor",
                     size - (size_t)(t->size - w->cur_done), (unsigned long long)(t->size - w->cur_done));
    fp4_status st = gw_write(w, data, size, err);
    if (st) return st;
    w->cur_done += size;
    if (w->cur_done == t->size) {
        if ((st = gw_zeros(w, t->padded - t->size, err))) return st;
        w->cur++;
        w->cur_done = 0;
    }
    return FP4_OK;
}

fp4_status fp4_gguf_writer_finish(fp4_gguf_writer *w, fp4_error *err) {
    if (!w) return FP4_ERR_INVALID_ARG;
    if (w->state != GW_WRITING)
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.state",
                     "nothing to finish (no header, or finished)");
    if (w->cur != w->n_t) {
        gw_abandon(w);
        w->state = GW_FAILED;
        return WFAIL(w, FP4_ERR_INVALID_ARG, NULL, "writer.incomplete",
                     "only %zu of %zu tensors were written", w->cur,
                     w->n_t);
    }
    fp4_status st = fp4_outfile_commit(w->o, err); /* fsync, rename over the target */
    w->o = NULL;
    w->state = st ? GW_FAILED : GW_DONE;
    return st;
}
