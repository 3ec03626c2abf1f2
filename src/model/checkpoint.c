/* checkpoint.c — one raw view over any container: a GGUF file, a .safetensors file, or a
 * Hugging Face directory. Tensors keep the container's bytes; dims are put in GGUF order
 * (ne[0] = the innermost, row length). No meaning is given to names here: the readers
 * (read_gguf.c, read_hf.c) give it. */
#include "model_impl.h"
#include "io/infile.h"
#include "io/st_impl.h"
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* safetensors dtype -> fp4_type (-1: no fp4lane type); indexed by fp4_st_dtype */
static const int st_type_table[FP4_ST_DTYPE_COUNT_] = {
    [FP4_ST_BOOL] = -1, [FP4_ST_U8] = FP4_TYPE_U8, [FP4_ST_I8] = FP4_TYPE_I8, [FP4_ST_U16] = -1,
    [FP4_ST_I16] = FP4_TYPE_I16, [FP4_ST_U32] = -1, [FP4_ST_I32] = FP4_TYPE_I32, [FP4_ST_U64] = -1,
    [FP4_ST_I64] = FP4_TYPE_I64, [FP4_ST_F16] = FP4_TYPE_F16, [FP4_ST_BF16] = FP4_TYPE_BF16,
    [FP4_ST_F32] = FP4_TYPE_F32, [FP4_ST_F64] = FP4_TYPE_F64, [FP4_ST_F8_E4M3] = FP4_TYPE_F8_E4M3FN,
    [FP4_ST_F8_E5M2] = -1, [FP4_ST_F8_E8M0] = -1, [FP4_ST_F8_E4M3FNUZ] = -1, [FP4_ST_F8_E5M2FNUZ] = -1,
    [FP4_ST_C64] = -1, [FP4_ST_F4] = -1, [FP4_ST_F6_E2M3] = -1, [FP4_ST_F6_E3M2] = -1,
};

int fp4_st_to_type(int st_dtype) {
    return (st_dtype < 0 || st_dtype >= FP4_ST_DTYPE_COUNT_) ? -1 : st_type_table[st_dtype];
}

int fp4_type_to_st(int type) {
    for (int d = 0; d < FP4_ST_DTYPE_COUNT_; d++)
        if (st_type_table[d] == type && type >= 0) return d;
    return -1;
}

static const fp4_ckpt *sort_ck; /* qsort has no context argument; only used under ckpt_index */
static int cmp_by_name(const void *a, const void *b) {
    return strcmp(sort_ck->t[*(const int64_t *)a].name, sort_ck->t[*(const int64_t *)b].name);
}

static fp4_status ckpt_index(fp4_ckpt *c, fp4_error *err) {
    c->by_name = malloc(sizeof *c->by_name * (size_t)(c->n + 1));
    if (!c->by_name) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    for (int64_t i = 0; i < c->n; i++) c->by_name[i] = i;
    sort_ck = c;
    qsort(c->by_name, (size_t)c->n, sizeof *c->by_name, cmp_by_name);
    sort_ck = NULL;
    for (int64_t i = 1; i < c->n; i++) /* shards can repeat a name; the containers cannot */
        if (!strcmp(c->t[c->by_name[i - 1]].name, c->t[c->by_name[i]].name))
            return fp4_fail(err, FP4_ERR_DUPLICATE, c->path, c->t[c->by_name[i]].name, "ckpt.dup",
                            "tensor name appears twice");
    return FP4_OK;
}

const fp4_raw *fp4_ckpt_find(const fp4_ckpt *c, const char *name) {
    int64_t lo = 0, hi = c->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(c->t[c->by_name[mid]].name, name);
        if (!r) return &c->t[c->by_name[mid]];
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static void raw_from_st(fp4_raw *r, const fp4_st_tensor *t) {
    memset(r, 0, sizeof *r);
    r->name = t->name;
    r->st_dtype = t->dtype;
    r->type = fp4_st_to_type(t->dtype);
    r->n_dims = t->rank;
    r->n_elements = 1;
    for (int i = 0; i < FP4_MAX_DIMS; i++) r->ne[i] = 1;
    for (int i = 0; i < t->rank; i++) {
        r->ne[i] = t->shape[t->rank - 1 - i];
        r->n_elements *= r->ne[i]; /* bounded: the reader checked shape × size == nbytes */
    }
    r->data = t->data;
    r->nbytes = t->nbytes;
}

static fp4_status dup_json(fp4_ckpt *c, fp4_hf_json which, char **out) {
    size_t need = 0;
    if (!fp4_hfdir_has_json(c->hf, which)) return FP4_OK;
    fp4_status st = fp4_hfdir_json_dump(c->hf, which, "", NULL, 0, &need);
    if (st != FP4_ERR_LIMIT && st != FP4_OK) return st;
    *out = malloc(need + 1);
    if (!*out) return FP4_ERR_NOMEM;
    return fp4_hfdir_json_dump(c->hf, which, "", *out, need + 1, NULL);
}

static fp4_status copy_meta(fp4_ckpt *c, const fp4_st *st) {
    int64_t n = fp4_st_n_metadata(st);
    c->meta = calloc((size_t)n + 1, sizeof *c->meta);
    if (!c->meta) return FP4_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        const char *k, *v;
        if (fp4_st_metadata_at(st, i, &k, &v)) continue;
        c->meta[c->n_meta].key = strdup(k);
        c->meta[c->n_meta].value = strdup(v);
        if (!c->meta[c->n_meta].key || !c->meta[c->n_meta].value) return FP4_ERR_NOMEM;
        c->n_meta++;
    }
    return FP4_OK;
}

const char *fp4_ckpt_meta(const fp4_ckpt *c, const char *key) {
    for (int64_t i = 0; i < c->n_meta; i++)
        if (!strcmp(c->meta[i].key, key)) return c->meta[i].value;
    return NULL;
}

static fp4_status open_gguf(fp4_ckpt *c, const void *mem, size_t size, fp4_error *err) {
    fp4_status st =
        mem ? fp4_gguf_open_buffer(mem, size, &c->gguf, err) : fp4_gguf_open(c->path, &c->gguf, err);
    if (st) return st;
    c->is_gguf = 1;
    c->n = fp4_gguf_n_tensors(c->gguf);
    c->file_bytes = fp4_gguf_file_size(c->gguf);
    c->t = calloc((size_t)c->n + 1, sizeof *c->t);
    if (!c->t) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    for (int64_t i = 0; i < c->n; i++) {
        const fp4_gguf_tensor *g = fp4_gguf_tensor_at(c->gguf, i);
        fp4_raw *r = &c->t[i];
        r->name = g->name;
        r->type = (int)g->type;
        r->st_dtype = -1;
        r->n_dims = g->n_dims;
        memcpy(r->ne, g->ne, sizeof r->ne);
        r->n_elements = g->n_elements;
        r->data = g->data;
        r->nbytes = g->size;
    }
    return FP4_OK;
}

static fp4_status open_st_file(fp4_ckpt *c, const void *mem, size_t size, fp4_error *err) {
    fp4_status st = mem ? fp4_st_open_buffer(mem, size, &c->st, err) : fp4_st_open(c->path, &c->st, err);
    if (st) return st;
    c->n = fp4_st_n_tensors(c->st);
    c->t = calloc((size_t)c->n + 1, sizeof *c->t);
    if (!c->t) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    c->file_bytes = 8 + fp4_st_header_len(c->st);
    for (int64_t i = 0; i < c->n; i++) {
        raw_from_st(&c->t[i], fp4_st_tensor_at(c->st, i));
        c->file_bytes += c->t[i].nbytes;
    }
    if (copy_meta(c, c->st)) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    return FP4_OK;
}

/* config.json as sorted compact JSON, with the quantization_config that fp4lane replaced on its
 * way here restored from fp4lane.hf.quantization_config ("null": there was none). */
static int canonical_config(fp4_ckpt *c) {
    json_t *cfg = json_loads(c->config_json, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return -1;
    }
    const char *stash = fp4_ckpt_meta(c, FP4_META_QCFG_STASH);
    if (stash) {
        json_t *old = json_loads(stash, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
        if (json_is_object(old)) json_object_set(cfg, "quantization_config", old);
        else if (json_is_null(old)) json_object_del(cfg, "quantization_config");
        json_decref(old);
    }
    char *text = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(cfg);
    if (!text) return -1;
    free(c->config_json);
    c->config_json = text;
    return 0;
}

static fp4_status open_hfdir(fp4_ckpt *c, fp4_error *err) {
    fp4_status st = fp4_hfdir_open(c->path, &c->hf, err);
    if (st) return st;
    c->n = fp4_hfdir_n_tensors(c->hf);
    c->t = calloc((size_t)c->n + 1, sizeof *c->t);
    if (!c->t) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    for (int64_t i = 0; i < c->n; i++) {
        raw_from_st(&c->t[i], fp4_hfdir_tensor_at(c->hf, i));
        c->file_bytes += c->t[i].nbytes;
    }
    for (int64_t s = 0; s < fp4_hfdir_n_shards(c->hf); s++)
        c->file_bytes += 8 + fp4_st_header_len(fp4_hfdir_shard(c->hf, s));
    if (fp4_hfdir_n_shards(c->hf) && copy_meta(c, fp4_hfdir_shard(c->hf, 0)))
        return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    if (dup_json(c, FP4_HF_CONFIG, &c->config_json) ||
        dup_json(c, FP4_HF_QUANT_CONFIG, &c->quant_config_json))
        return fp4_fail(err, FP4_ERR_FORMAT, c->path, NULL, "hfdir.json",
                        "cannot read config.json / hf_quant_config.json");
    if (c->config_json && canonical_config(c))
        return fp4_fail(err, FP4_ERR_FORMAT, c->path, NULL, "hf.config", "config.json is not a JSON object");
    /* a compressed-tensors directory made by fp4lane keeps ModelOpt's hf_quant_config in metadata */
    const char *q = fp4_ckpt_meta(c, FP4_META_QUANT_CONFIG);
    if (q && !c->quant_config_json && !(c->quant_config_json = strdup(q)))
        return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    return FP4_OK;
}

fp4_status fp4_ckpt_open(const char *path, uint64_t max_bytes, fp4_ckpt **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!path || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "io.open", "cannot open: no such file or directory");
    if (strlen(path) >= sizeof((fp4_ckpt *)0)->path)
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "io.path", "path too long");
    if (!S_ISDIR(sb.st_mode) && max_bytes && (uint64_t)sb.st_size > max_bytes)
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "ckpt.budget",
                        "file is %lld bytes, above the budget of %llu", (long long)sb.st_size,
                        (unsigned long long)max_bytes);
    fp4_ckpt *c = calloc(1, sizeof *c);
    if (!c) return FP4_ERR_NOMEM;
    snprintf(c->path, sizeof c->path, "%s", path);
    fp4_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = open_hfdir(c, err);
    } else if (!S_ISREG(sb.st_mode)) { /* opening a FIFO would block; a device is no checkpoint */
        st = fp4_fail(err, FP4_ERR_IO, path, NULL, "io.open", "not a regular file or a directory (%s)",
                      S_ISFIFO(sb.st_mode)   ? "a FIFO"
                      : S_ISSOCK(sb.st_mode) ? "a socket"
                      : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                  : "a special file");
    } else {
        unsigned char head[9] = {0};
        size_t got = 0;
        st = fp4_infile_head(path, head, sizeof head, &got, "io.open", err);
        if (st) {
        } else if (got >= 4 && !memcmp(head, "GGUF", 4)) st = open_gguf(c, NULL, 0, err);
        else if (got == 9 && fp4_rd_le64(head) > FP4_MAX_ST_HEADER && head[8] != '{')
            st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "ckpt.not-model",
                          "not a model file: neither GGUF (no 'GGUF' magic) nor safetensors (no 8-byte "
                          "header length followed by a JSON header)");
        else st = open_st_file(c, NULL, 0, err);
    }
    if (!st && max_bytes && c->file_bytes > max_bytes)
        st = fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "ckpt.budget",
                      "checkpoint is %llu bytes, above the budget", (unsigned long long)c->file_bytes);
    if (!st) st = ckpt_index(c, err);
    if (st) {
        fp4_ckpt_close(c);
        return st;
    }
    *out = c;
    return FP4_OK;
}

fp4_status fp4_ckpt_open_memory(const void *data, size_t size, const char *name, uint64_t max_bytes,
                                fp4_ckpt **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!data || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    if (max_bytes && size > max_bytes)
        return fp4_fail(err, FP4_ERR_LIMIT, name, NULL, "ckpt.budget", "image is %zu bytes, above the budget",
                        size);
    fp4_ckpt *c = calloc(1, sizeof *c);
    if (!c) return FP4_ERR_NOMEM;
    snprintf(c->path, sizeof c->path, "%s", name ? name : "(memory)");
    fp4_status st = (size >= 4 && !memcmp(data, "GGUF", 4)) ? open_gguf(c, data, size, err)
                                                            : open_st_file(c, data, size, err);
    if (!st) st = ckpt_index(c, err);
    if (st && err && !err->file[0]) snprintf(err->file, sizeof err->file, "%.255s", c->path);
    if (st) {
        fp4_ckpt_close(c);
        return st;
    }
    *out = c;
    return FP4_OK;
}

void fp4_ckpt_close(fp4_ckpt *c) {
    if (!c) return;
    fp4_gguf_close(c->gguf);
    fp4_st_close(c->st);
    fp4_hfdir_close(c->hf);
    for (int64_t i = 0; i < c->n_meta; i++) {
        free(c->meta[i].key);
        free(c->meta[i].value);
    }
    free(c->meta);
    free(c->t);
    free(c->by_name);
    free(c->config_json);
    free(c->quant_config_json);
    free(c);
}

fp4_status fp4_ckpt_gguf_str(const fp4_ckpt *c, const char *key, char *buf, size_t n) {
    if (!c->is_gguf) return FP4_ERR_NOT_FOUND;
    const char *s;
    uint64_t len;
    fp4_status st = fp4_gguf_get_str(c->gguf, fp4_gguf_key_index(c->gguf, key), &s, &len);
    if (st) return st;
    if (len + 1 > n || memchr(s, 0, (size_t)len)) return FP4_ERR_LIMIT;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    return FP4_OK;
}
