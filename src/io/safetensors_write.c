/* safetensors_write.c — the streaming safetensors writer (header first, then the tensors' bytes
 * in declaration order; memory O(header)), and the small JSON-emitting helpers it shares with
 * hfdir.c. The header is byte-compatible with the reference writer: compact JSON, __metadata__
 * first, keys dtype/shape/data_offsets, spaces up to a multiple of 8 bytes. */
#include "io/infile.h"
#include "io/st_impl.h"
#include "io/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- growable buffer and JSON strings ---- */

void fp4_sbuf_put(fp4_sbuf *b, const void *s, size_t n) {
    if (b->oom || n == 0) return;
    if (n > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                cap = b->len + n + 1;
                break;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void fp4_sbuf_putc(fp4_sbuf *b, char c) { fp4_sbuf_put(b, &c, 1); }
void fp4_sbuf_puts(fp4_sbuf *b, const char *s) { fp4_sbuf_put(b, s, strlen(s)); }

void fp4_sbuf_u64(fp4_sbuf *b, uint64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    fp4_sbuf_put(b, tmp, (size_t)n);
}

void fp4_sbuf_free(fp4_sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put_u_escape(fp4_sbuf *b, uint32_t u) {
    char tmp[8];
    snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)u);
    fp4_sbuf_put(b, tmp, 6);
}

/* decode one code point of valid UTF-8 starting at s[0]; returns its byte length */
static size_t utf8_decode(const uint8_t *s, uint32_t *cp) {
    if (s[0] < 0x80) return *cp = s[0], 1;
    if ((s[0] & 0xE0) == 0xC0) return *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F), 2;
    if ((s[0] & 0xF0) == 0xE0)
        return *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F), 3;
    *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
          (s[3] & 0x3F);
    return 4;
}

void fp4_sbuf_json_string(fp4_sbuf *b, const char *s, size_t n, bool ascii) {
    const uint8_t *u = (const uint8_t *)s;
    fp4_sbuf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        uint8_t c = u[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (esc) {
            fp4_sbuf_put(b, esc, 2), i++;
        } else if (c < 0x20 || (ascii && c == 0x7F)) {
            put_u_escape(b, c), i++;
        } else if (c < 0x80 || !ascii) {
            size_t j = i + 1; /* a run of bytes that need no escape */
            while (j < n && u[j] >= 0x20 && u[j] != '"' && u[j] != '\\' && (!ascii || u[j] < 0x7F)) j++;
            fp4_sbuf_put(b, u + i, j - i);
            i = j;
        } else {
            uint32_t cp;
            i += utf8_decode(u + i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                put_u_escape(b, 0xD800 + (cp >> 10));
                put_u_escape(b, 0xDC00 + (cp & 0x3FF));
            } else {
                put_u_escape(b, cp);
            }
        }
    }
    fp4_sbuf_putc(b, '"');
}

fp4_status fp4_st_read_small_file(const char *path, size_t cap, char **out, size_t *len, const char *rule,
                                  fp4_error *err) {
    return fp4_infile_read(path, cap, rule, NULL, false, out, len, err);
}

/* ---- the writer ---- */

typedef struct stw_tensor {
    char *name;
    fp4_st_dtype dtype;
    int rank;
    int64_t shape[FP4_MAX_DIMS];
    uint64_t nbytes;
} stw_tensor;

enum { STW_DECLARE, STW_WRITING, STW_DONE, STW_FAILED };

struct fp4_st_writer {
    stw_tensor *t;
    size_t n, cap;
    char **meta; /* key0, value0, ... */
    size_t n_meta, cap_meta;
    uint64_t total, written;
    int state;
    fp4_outfile *o; /* temporary file, renamed over path by finish */
    char *path;
};

fp4_status fp4_st_writer_create(fp4_st_writer **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stw.arg", "out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? FP4_OK : fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "stw.nomem", "out of memory");
}

void fp4_st_writer_free(fp4_st_writer *w) {
    if (!w) return;
    fp4_outfile_abort(w->o); /* an unfinished file: only its temporary name goes */
    for (size_t i = 0; i < w->n; i++) free(w->t[i].name);
    for (size_t i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->t);
    free(w->meta);
    free(w->path);
    free(w);
}

static bool str_ok(const char *s) { return s && fp4_st_utf8_valid((const uint8_t *)s, strlen(s)); }

fp4_status fp4_st_writer_add_metadata(fp4_st_writer *w, const char *key, const char *value, fp4_error *err) {
    if (!w || w->state != STW_DECLARE)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stw.state", "metadata after begin");
    if (!str_ok(key) || !str_ok(value))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stw.meta",
                        "metadata key/value is not UTF-8 text");
    if (w->n_meta == w->cap_meta) {
        size_t cap = w->cap_meta ? 2 * w->cap_meta : 8;
        char **m = realloc(w->meta, 2 * cap * sizeof *m);
        if (!m) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "stw.nomem", "out of memory");
        w->meta = m;
        w->cap_meta = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k), free(v);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "stw.nomem", "out of memory");
    }
    w->meta[2 * w->n_meta] = k;
    w->meta[2 * w->n_meta + 1] = v;
    w->n_meta++;
    return FP4_OK;
}

fp4_status fp4_st_writer_add_tensor(fp4_st_writer *w, const char *name, fp4_st_dtype dtype, int rank,
                                    const int64_t *shape, fp4_error *err) {
    if (!w || w->state != STW_DECLARE)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, name, "stw.state", "tensor declared after begin");
    size_t nl = name ? strlen(name) : 0;
    if (nl == 0 || nl > FP4_MAX_NAME || !str_ok(name) || strcmp(name, "__metadata__") == 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, name, "stw.name", "bad tensor name");
    if (rank > 0 && !shape) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, name, "stw.arg", "shape is NULL");
    uint64_t nbytes, total;
    const char *rule = NULL;
    fp4_status s = fp4_st_nbytes(dtype, rank, shape, &nbytes, &rule);
    if (s) return fp4_fail(err, s, NULL, name, rule, "bad dtype or shape");
    if (fp4_add_overflow_u64(w->total, nbytes, &total))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, name, "st.nbytes_overflow", "data size overflows");
    if (w->n >= FP4_MAX_TENSORS)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, name, "st.tensor_count", "more than %d tensors",
                        FP4_MAX_TENSORS);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        stw_tensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return fp4_fail(err, FP4_ERR_NOMEM, NULL, name, "stw.nomem", "out of memory");
        w->t = t;
        w->cap = cap;
    }
    stw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, name, "stw.nomem", "out of memory");
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->nbytes = nbytes;
    w->total = total;
    w->n++;
    return FP4_OK;
}

static int canon_cmp(const void *pa, const void *pb) {
    const stw_tensor *a = pa, *b = pb;
    int ra = fp4_st_dtype_rank(a->dtype), rb = fp4_st_dtype_rank(b->dtype);
    if (ra != rb) return ra > rb ? -1 : 1;
    return strcmp(a->name, b->name);
}

fp4_status fp4_st_writer_sort_canonical(fp4_st_writer *w) {
    if (!w || w->state != STW_DECLARE) return FP4_ERR_INVALID_ARG;
    qsort(w->t, w->n, sizeof *w->t, canon_cmp);
    return FP4_OK;
}

size_t fp4_st_writer_n_tensors(const fp4_st_writer *w) { return w ? w->n : 0; }
const char *fp4_st_writer_tensor_name(const fp4_st_writer *w, size_t i) {
    return w && i < w->n ? w->t[i].name : NULL;
}
uint64_t fp4_st_writer_data_size(const fp4_st_writer *w) { return w ? w->total : 0; }

size_t fp4_stw_n_meta(const fp4_st_writer *w) { return w->n_meta; }
void fp4_stw_meta_at(const fp4_st_writer *w, size_t i, const char **key, const char **value) {
    *key = w->meta[2 * i];
    *value = w->meta[2 * i + 1];
}

static int pstr_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Duplicate tensor names or metadata keys, found by sorting copies of the pointers. */
fp4_status fp4_stw_check_dups(const fp4_st_writer *w, const char *file, fp4_error *err) {
    size_t n = w->n > w->n_meta ? w->n : w->n_meta;
    char **p = malloc((n + 1) * sizeof *p);
    if (!p) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "stw.nomem", "out of memory");
    fp4_status s = FP4_OK;
    for (int pass = 0; pass < 2 && !s; pass++) {
        size_t m = pass ? w->n_meta : w->n;
        for (size_t i = 0; i < m; i++) p[i] = pass ? w->meta[2 * i] : w->t[i].name;
        qsort(p, m, sizeof *p, pstr_cmp);
        for (size_t i = 1; i < m && !s; i++)
            if (strcmp(p[i - 1], p[i]) == 0)
                s = fp4_fail(err, FP4_ERR_DUPLICATE, file, pass ? NULL : p[i],
                             pass ? "stw.meta_dup" : "stw.dup", "\"%.64s\" declared twice", p[i]);
    }
    free(p);
    return s;
}

static void stw_header(const fp4_st_writer *w, fp4_sbuf *b) {
    fp4_sbuf_putc(b, '{');
    if (w->n_meta) {
        fp4_sbuf_puts(b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i) fp4_sbuf_putc(b, ',');
            fp4_sbuf_json_string(b, w->meta[2 * i], strlen(w->meta[2 * i]), false);
            fp4_sbuf_putc(b, ':');
            fp4_sbuf_json_string(b, w->meta[2 * i + 1], strlen(w->meta[2 * i + 1]), false);
        }
        fp4_sbuf_putc(b, '}');
        if (w->n) fp4_sbuf_putc(b, ',');
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const stw_tensor *t = &w->t[i];
        if (i) fp4_sbuf_putc(b, ',');
        fp4_sbuf_json_string(b, t->name, strlen(t->name), false);
        fp4_sbuf_puts(b, ":{\"dtype\":\"");
        fp4_sbuf_puts(b, fp4_st_dtype_name(t->dtype));
        fp4_sbuf_puts(b, "\",\"shape\":[");
        for (int d = 0; d < t->rank; d++) {
            if (d) fp4_sbuf_putc(b, ',');
            fp4_sbuf_u64(b, (uint64_t)t->shape[d]);
        }
        fp4_sbuf_puts(b, "],\"data_offsets\":[");
        fp4_sbuf_u64(b, off);
        fp4_sbuf_putc(b, ',');
        fp4_sbuf_u64(b, off + t->nbytes);
        fp4_sbuf_puts(b, "]}");
        off += t->nbytes;
    }
    fp4_sbuf_putc(b, '}');
    while (b->len % 8) fp4_sbuf_putc(b, ' ');
}

fp4_status fp4_st_writer_begin(fp4_st_writer *w, const char *path, fp4_error *err) {
    if (!w || !path || w->state != STW_DECLARE)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "stw.state", "begin twice, or without a path");
    fp4_status s = fp4_stw_check_dups(w, path, err);
    if (s) return s;
    fp4_sbuf hb = {0};
    stw_header(w, &hb);
    if (hb.oom) {
        fp4_sbuf_free(&hb);
        return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "stw.nomem", "out of memory");
    }
    if (hb.len > FP4_MAX_ST_HEADER) {
        fp4_sbuf_free(&hb);
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "st.header_cap", "header above %u bytes",
                        FP4_MAX_ST_HEADER);
    }
    if (!(w->path = strdup(path))) {
        fp4_sbuf_free(&hb);
        return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "stw.nomem", "out of memory");
    }
    uint8_t len8[8];
    fp4_wr_le64(len8, hb.len);
    s = fp4_outfile_open(path, &w->o, err);
    if (!s) s = fp4_outfile_write(w->o, len8, 8, err);
    if (!s) s = fp4_outfile_write(w->o, hb.p, hb.len, err);
    w->state = s ? STW_FAILED : STW_WRITING;
    fp4_sbuf_free(&hb);
    return s;
}

fp4_status fp4_st_writer_write(fp4_st_writer *w, const void *data, size_t n, fp4_error *err) {
    if (!w || w->state != STW_WRITING || (!data && n))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w ? w->path : NULL, NULL, "stw.state",
                        "write outside begin/finish");
    if (n > w->total - w->written) {
        w->state = STW_FAILED;
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w->path, NULL, "stw.data_size",
                        "%zu bytes written past the declared %llu", n, (unsigned long long)w->total);
    }
    fp4_status s = fp4_outfile_write(w->o, data, n, err);
    if (s) {
        w->state = STW_FAILED;
        return s;
    }
    w->written += n;
    return FP4_OK;
}

fp4_status fp4_st_writer_finish(fp4_st_writer *w, fp4_error *err) {
    if (!w || w->state != STW_WRITING)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w ? w->path : NULL, NULL, "stw.state",
                        "finish without begin");
    if (w->written != w->total) {
        w->state = STW_FAILED;
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w->path, NULL, "stw.data_size",
                        "%llu of %llu data bytes written", (unsigned long long)w->written,
                        (unsigned long long)w->total);
    }
    fp4_status s = fp4_outfile_commit(w->o, err); /* flush, fsync, rename over the target */
    w->o = NULL;
    w->state = s ? STW_FAILED : STW_DONE;
    return s;
}
