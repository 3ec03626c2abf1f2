/* hfdir.c — Hugging Face checkpoint directories: model.safetensors, or the shards named by
 * model.safetensors.index.json (weight_map cross-checked both ways against the shards), plus
 * config.json / hf_quant_config.json through jansson; the sharded writer; and a JSON writer
 * that re-serializes text the way Python's json.dumps(indent=..., sort_keys=...) does. */
#include "io/st_impl.h"
#include "io/outfile.h"

#include <errno.h>
#include <jansson.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_MAX_CONFIG (16u << 20) /* config.json, hf_quant_config.json */
#define HF_MAX_INDEX (64u << 20)  /* model.safetensors.index.json (~9 MB for 91k tensors) */
#define HF_PATH_MAX 4096

static const char *const json_names[2] = {"config.json", "hf_quant_config.json"};
static const char *const json_rules[2] = {"hfdir.config", "hfdir.quant_config"};

struct fp4_hfdir {
    fp4_st **shards;
    char **shard_names;
    size_t n_shards;
    const fp4_st_tensor **all; /* shard order */
    const fp4_st_tensor **by_name;
    size_t n;
    json_t *json[2];
};

void fp4_hfdir_close(fp4_hfdir *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_shards; i++) {
        fp4_st_close(d->shards[i]);
        free(d->shard_names[i]);
    }
    free(d->shards);
    free(d->shard_names);
    free(d->all);
    free(d->by_name);
    for (int i = 0; i < 2; i++) json_decref(d->json[i]);
    free(d);
}

static fp4_status join_path(char *out, const char *dir, const char *name, fp4_error *err) {
    int n = snprintf(out, HF_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= HF_PATH_MAX)
        return fp4_fail(err, FP4_ERR_LIMIT, dir, NULL, "hfdir.path", "path longer than %d bytes",
                        HF_PATH_MAX);
    return FP4_OK;
}

/* Present as a name, even when it does not open (a dangling link, a symlink loop): such a name is
 * an error when it is read, never silently absent. */
static bool file_exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A shard name is a plain file name in the directory: no separators, no "..", not absolute. */
static bool shard_name_ok(const char *s, size_t n) {
    if (n == 0 || n > 255 || memchr(s, 0, n) || memchr(s, '/', n) || memchr(s, '\\', n)) return false;
    if (strstr(s, "..") || strcmp(s, ".") == 0) return false;
    return fp4_st_utf8_valid((const uint8_t *)s, n);
}

static fp4_status load_json_text(const char *text, size_t len, json_t **out, const char *file,
                                 const char *rule, const char *dup_rule, fp4_error *err) {
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*out) {
        bool dup = json_error_code(&je) == json_error_duplicate_key;
        return fp4_fail(err, dup ? FP4_ERR_DUPLICATE : FP4_ERR_FORMAT, file, NULL, dup ? dup_rule : rule,
                        "JSON at byte %d: %s", je.position, je.text);
    }
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return fp4_fail(err, FP4_ERR_FORMAT, file, NULL, rule, "not a JSON object");
    }
    return FP4_OK;
}

/* Members (':' outside strings) of a JSON text: what a tree of it would hold, counted before any
 * is built. */
static uint64_t json_members(const char *t, size_t n) {
    uint64_t k = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (t[i] == '\\') i++;
            else if (t[i] == '"') in_str = false;
        } else if (t[i] == '"') {
            in_str = true;
        } else {
            k += t[i] == ':';
        }
    }
    return k;
}

static fp4_status load_json_file(const char *path, size_t cap, json_t **out, const char *rule,
                                 const char *dup_rule, fp4_error *err) {
    char *text;
    size_t len;
    fp4_status s = fp4_st_read_small_file(path, cap, &text, &len, rule, err);
    if (s) return s;
    /* an index has a weight_map entry per tensor: more members than a checkpoint may hold tensors
     * is refused before a tree of them is built (configs get the same bound) */
    uint64_t members = json_members(text, len);
    if (members > (uint64_t)FP4_MAX_TENSORS + 64) {
        free(text);
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, strcmp(rule,
                                                               "index.json") ? rule : "index.tensor_count",
                        "%llu JSON members: more than a checkpoint's %d tensors", (unsigned long long)members,
                        FP4_MAX_TENSORS);
    }
    s = load_json_text(text, len, out, path, rule, dup_rule, err);
    free(text);
    return s;
}

/* ---- index ---- */

static int pstr_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Distinct shard names of the weight_map, sorted, each checked. */
static fp4_status index_shard_names(fp4_hfdir *d, const json_t *wm, const char *file, fp4_error *err) {
    size_t n = json_object_size(wm), k = 0;
    char **names = calloc(n + 1, sizeof *names);
    if (!names) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "index.nomem", "out of memory");
    d->shard_names = names;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)wm, key, v) {
        if (!json_is_string(v))
            return fp4_fail(err, FP4_ERR_FORMAT, file, key, "index.json", "weight_map value is not a string");
        if (!shard_name_ok(json_string_value(v), json_string_length(v)))
            return fp4_fail(err, FP4_ERR_FORMAT, file, key, "index.path",
                            "shard path \"%.64s\" is not a plain file name", json_string_value(v));
        names[k++] = (char *)json_string_value(v); /* borrowed until copied below */
    }
    qsort(names, k, sizeof *names, pstr_cmp);
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (m == 0 || strcmp(names[m - 1], names[i]) != 0) names[m++] = names[i];
    if (m > FP4_MAX_SHARDS)
        return fp4_fail(err, FP4_ERR_LIMIT, file, NULL, "index.shard_count", "%zu shards, above %d", m,
                        FP4_MAX_SHARDS);
    d->shards = calloc(m + 1, sizeof *d->shards);
    if (!d->shards) return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "index.nomem", "out of memory");
    for (size_t i = 0; i < m; i++) {
        if (!(names[i] = strdup(names[i]))) {
            for (size_t j = 0; j < i; j++) free(names[j]);
            return fp4_fail(err, FP4_ERR_NOMEM, file, NULL, "index.nomem", "out of memory");
        }
    }
    d->n_shards = m; /* from here on close() owns the copies */
    return FP4_OK;
}

static fp4_status index_open_shards(fp4_hfdir *d, const char *dir, fp4_error *err) {
    char path[HF_PATH_MAX];
    for (size_t i = 0; i < d->n_shards; i++) {
        fp4_status s = join_path(path, dir, d->shard_names[i], err);
        if (s) return s;
        if (!file_exists(path))
            return fp4_fail(err, FP4_ERR_NOT_FOUND, path, NULL, "index.missing_shard",
                            "shard file is missing");
        if ((s = fp4_st_open(path, &d->shards[i], err))) return s;
    }
    return FP4_OK;
}

static size_t shard_index(const fp4_hfdir *d, const char *name) {
    size_t lo = 0, hi = d->n_shards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(d->shard_names[mid], name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return SIZE_MAX;
}

/* Every shard tensor is mapped to its own shard; every mapped tensor is in its shard. */
static fp4_status index_cross_check(const fp4_hfdir *d, const json_t *wm, const char *file, fp4_error *err) {
    for (size_t i = 0; i < d->n_shards; i++) {
        for (int64_t j = 0; j < fp4_st_n_tensors(d->shards[i]); j++) {
            const char *name = fp4_st_tensor_at(d->shards[i], j)->name;
            const json_t *v = json_object_get(wm, name);
            if (!v)
                return fp4_fail(err, FP4_ERR_FORMAT, file, name, "index.unmapped",
                                "tensor of shard %.64s is not in the weight_map", d->shard_names[i]);
            if (strcmp(json_string_value(v), d->shard_names[i]) != 0)
                return fp4_fail(err, FP4_ERR_DUPLICATE, file, name, "index.wrong_shard",
                                "tensor found in %.64s but mapped to %.64s", d->shard_names[i],
                                json_string_value(v));
        }
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)wm, key, v) {
        size_t k = shard_index(d, json_string_value(v));
        if (k == SIZE_MAX || !fp4_st_find(d->shards[k], key))
            return fp4_fail(err, FP4_ERR_NOT_FOUND, file, key, "index.missing_tensor",
                            "mapped tensor is not in %.64s", json_string_value(v));
    }
    return FP4_OK;
}

static fp4_status open_index(fp4_hfdir *d, const char *dir, const char *ipath, fp4_error *err) {
    json_t *root = NULL;
    fp4_status s = load_json_file(ipath, HF_MAX_INDEX, &root, "index.json", "index.dup", err);
    if (s) return s;
    const json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm))
        s = fp4_fail(err, FP4_ERR_FORMAT, ipath, NULL, "index.json", "no weight_map object");
    if (!s) s = index_shard_names(d, wm, ipath, err);
    if (!s) s = index_open_shards(d, dir, err);
    if (!s) s = index_cross_check(d, wm, ipath, err);
    json_decref(root);
    return s;
}

/* ---- directory ---- */

static int tensor_ptr_cmp(const void *a, const void *b) {
    return strcmp((*(const fp4_st_tensor *const *)a)->name, (*(const fp4_st_tensor *const *)b)->name);
}

static fp4_status build_view(fp4_hfdir *d, const char *dir, fp4_error *err) {
    size_t n = 0;
    for (size_t i = 0; i < d->n_shards; i++) n += (size_t)fp4_st_n_tensors(d->shards[i]);
    d->all = malloc((n + 1) * sizeof *d->all);
    d->by_name = malloc((n + 1) * sizeof *d->by_name);
    if (!d->all || !d->by_name)
        return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "hfdir.nomem", "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < d->n_shards; i++)
        for (int64_t j = 0; j < fp4_st_n_tensors(d->shards[i]); j++)
            d->all[k++] = fp4_st_tensor_at(d->shards[i], j);
    d->n = n;
    memcpy(d->by_name, d->all, n * sizeof *d->all);
    qsort(d->by_name, n, sizeof *d->by_name, tensor_ptr_cmp);
    for (size_t i = 1; i < n; i++) /* the index check rules this out; a second guard costs nothing */
        if (strcmp(d->by_name[i - 1]->name, d->by_name[i]->name) == 0)
            return fp4_fail(err, FP4_ERR_DUPLICATE, dir, d->by_name[i]->name, "index.dup",
                            "tensor in two shards");
    return FP4_OK;
}

static fp4_status open_weights(fp4_hfdir *d, const char *dir, fp4_error *err) {
    char single[HF_PATH_MAX], index[HF_PATH_MAX];
    fp4_status s = join_path(single, dir, "model.safetensors", err);
    if (!s) s = join_path(index, dir, "model.safetensors.index.json", err);
    if (s) return s;
    bool has_single = file_exists(single), has_index = file_exists(index);
    if (has_single && has_index)
        return fp4_fail(err, FP4_ERR_FORMAT, dir, NULL, "hfdir.ambiguous",
                        "both model.safetensors and model.safetensors.index.json are present");
    if (!has_single && !has_index)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, dir, NULL, "hfdir.no_weights",
                        "no model.safetensors or index");
    if (has_index) return open_index(d, dir, index, err);
    d->shards = calloc(1, sizeof *d->shards);
    d->shard_names = calloc(1, sizeof *d->shard_names);
    if (!d->shards || !d->shard_names || !(d->shard_names[0] = strdup("model.safetensors")))
        return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "hfdir.nomem", "out of memory");
    d->n_shards = 1;
    return fp4_st_open(single, &d->shards[0], err);
}

fp4_status fp4_hfdir_open(const char *dir, fp4_hfdir **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!dir || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, dir, NULL, "hfdir.arg", "dir or out is NULL");
    *out = NULL;
    fp4_hfdir *d = calloc(1, sizeof *d);
    if (!d) return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "hfdir.nomem", "out of memory");
    fp4_status s = open_weights(d, dir, err);
    if (!s) s = build_view(d, dir, err);
    char path[HF_PATH_MAX];
    for (int i = 0; i < 2 && !s; i++) {
        s = join_path(path, dir, json_names[i], err);
        if (!s && file_exists(path))
            s = load_json_file(path, HF_MAX_CONFIG, &d->json[i], json_rules[i], json_rules[i], err);
    }
    if (s) {
        fp4_hfdir_close(d);
        return s;
    }
    *out = d;
    return FP4_OK;
}

int64_t fp4_hfdir_n_tensors(const fp4_hfdir *d) { return d ? (int64_t)d->n : 0; }
const fp4_st_tensor *fp4_hfdir_tensor_at(const fp4_hfdir *d, int64_t i) {
    return d && i >= 0 && (uint64_t)i < d->n ? d->all[i] : NULL;
}
int64_t fp4_hfdir_n_shards(const fp4_hfdir *d) { return d ? (int64_t)d->n_shards : 0; }
const fp4_st *fp4_hfdir_shard(const fp4_hfdir *d, int64_t i) {
    return d && i >= 0 && (uint64_t)i < d->n_shards ? d->shards[i] : NULL;
}

const fp4_st_tensor *fp4_hfdir_find(const fp4_hfdir *d, const char *name) {
    if (!d || !name) return NULL;
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(d->by_name[mid]->name, name);
        if (c == 0) return d->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- config access ---- */

int fp4_hfdir_has_json(const fp4_hfdir *d, fp4_hf_json which) {
    return d && (unsigned)which < 2 && d->json[which] != NULL;
}

static const json_t *json_at(const fp4_hfdir *d, fp4_hf_json which, const char *path) {
    if (!d || (unsigned)which >= 2 || !d->json[which] || !path) return NULL;
    const json_t *cur = d->json[which];
    if (!*path) return cur;
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, p, len);
        } else if (json_is_array(cur) && len > 0 && len < 10 && strspn(p, "0123456789") >= len) {
            cur = json_array_get(cur, (size_t)strtoul(p, NULL, 10));
        } else {
            return NULL;
        }
        if (!cur || !dot) return cur;
        p = dot + 1;
    }
}

static fp4_status copy_out(const char *s, size_t len, char *buf, size_t n, size_t *needed) {
    if (needed) *needed = len + 1;
    if (!buf || n < len + 1) return FP4_ERR_LIMIT;
    memcpy(buf, s, len);
    buf[len] = 0;
    return FP4_OK;
}

fp4_status fp4_hfdir_json_string(const fp4_hfdir *d, fp4_hf_json which, const char *path, char *buf, size_t n,
                                 size_t *needed) {
    const json_t *v = json_at(d, which, path);
    if (!v) return FP4_ERR_NOT_FOUND;
    if (!json_is_string(v)) return FP4_ERR_DTYPE;
    return copy_out(json_string_value(v), json_string_length(v), buf, n, needed);
}

fp4_status fp4_hfdir_json_int(const fp4_hfdir *d, fp4_hf_json which, const char *path, int64_t *out) {
    const json_t *v = json_at(d, which, path);
    if (!v) return FP4_ERR_NOT_FOUND;
    if (!json_is_integer(v)) return FP4_ERR_DTYPE;
    if (out) *out = (int64_t)json_integer_value(v);
    return FP4_OK;
}

fp4_status fp4_hfdir_json_dump(const fp4_hfdir *d, fp4_hf_json which, const char *path, char *buf, size_t n,
                               size_t *needed) {
    const json_t *v = json_at(d, which, path);
    if (!v) return FP4_ERR_NOT_FOUND;
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!s) return FP4_ERR_NOMEM;
    fp4_status st = copy_out(s, strlen(s), buf, n, needed);
    free(s);
    return st;
}

/* ---- Python-style JSON output ---- */

/* Python's repr(float): shortest round-trip digits; exponent form when decpt <= -4 or > 16. */
static void py_float(fp4_sbuf *b, double x) {
    char tmp[40], digits[24];
    int p = 0;
    for (; p < 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p, x);
        if (strtod(tmp, NULL) == x) break;
    }
    const char *s = tmp;
    if (*s == '-') fp4_sbuf_putc(b, '-'), s++;
    size_t nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    int decpt = atoi(s + 1) + 1;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (x == 0) decpt = 1;
    if (decpt <= -4 || decpt > 16) {
        fp4_sbuf_putc(b, digits[0]);
        if (nd > 1) fp4_sbuf_putc(b, '.'), fp4_sbuf_put(b, digits + 1, nd - 1);
        snprintf(tmp, sizeof tmp, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
        fp4_sbuf_puts(b, tmp);
    } else if (decpt <= 0) {
        fp4_sbuf_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) fp4_sbuf_putc(b, '0');
        fp4_sbuf_put(b, digits, nd);
    } else if ((size_t)decpt < nd) {
        fp4_sbuf_put(b, digits, (size_t)decpt);
        fp4_sbuf_putc(b, '.');
        fp4_sbuf_put(b, digits + decpt, nd - (size_t)decpt);
    } else {
        fp4_sbuf_put(b, digits, nd);
        for (size_t i = nd; i < (size_t)decpt; i++) fp4_sbuf_putc(b, '0');
        fp4_sbuf_puts(b, ".0");
    }
}

static void py_newline(fp4_sbuf *b, int indent, int level) {
    fp4_sbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) fp4_sbuf_putc(b, ' ');
}

static void py_dump(fp4_sbuf *b, const json_t *v, int indent, int level, bool sort);

static void py_object(fp4_sbuf *b, const json_t *v, int indent, int level, bool sort) {
    size_t n = json_object_size(v), k = 0;
    if (n == 0) {
        fp4_sbuf_puts(b, "{}");
        return;
    }
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) {
        b->oom = true;
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) keys[k++] = key;
    if (sort) qsort(keys, n, sizeof *keys, pstr_cmp);
    fp4_sbuf_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        if (i) fp4_sbuf_putc(b, ',');
        py_newline(b, indent, level + 1);
        fp4_sbuf_json_string(b, keys[i], strlen(keys[i]), true);
        fp4_sbuf_puts(b, ": ");
        py_dump(b, json_object_get(v, keys[i]), indent, level + 1, sort);
    }
    py_newline(b, indent, level);
    fp4_sbuf_putc(b, '}');
    free(keys);
}

static void py_dump(fp4_sbuf *b, const json_t *v, int indent, int level, bool sort) {
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: py_object(b, v, indent, level, sort); break;
    case JSON_ARRAY:
        if (json_array_size(v) == 0) {
            fp4_sbuf_puts(b, "[]");
            break;
        }
        fp4_sbuf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) fp4_sbuf_putc(b, ',');
            py_newline(b, indent, level + 1);
            py_dump(b, json_array_get(v, i), indent, level + 1, sort);
        }
        py_newline(b, indent, level);
        fp4_sbuf_putc(b, ']');
        break;
    case JSON_STRING: fp4_sbuf_json_string(b, json_string_value(v), json_string_length(v), true); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(v));
        fp4_sbuf_puts(b, tmp);
        break;
    case JSON_REAL: py_float(b, json_real_value(v)); break;
    case JSON_TRUE: fp4_sbuf_puts(b, "true"); break;
    case JSON_FALSE: fp4_sbuf_puts(b, "false"); break;
    default: fp4_sbuf_puts(b, "null"); break;
    }
}

/* a temporary name, fsync, rename: the file appears whole or not at all */
static fp4_status write_file_atomic(const char *path, const char *data, size_t len, fp4_error *err) {
    fp4_outfile *o;
    fp4_status s = fp4_outfile_open(path, &o, err);
    if (s) return s;
    if ((s = fp4_outfile_write(o, data, len, err))) {
        fp4_outfile_abort(o);
        return s;
    }
    return fp4_outfile_commit(o, err);
}

static fp4_status write_json_value(const char *path, const json_t *v, int indent, bool sort, fp4_error *err) {
    fp4_sbuf b = {0};
    py_dump(&b, v, indent, 0, sort);
    fp4_sbuf_putc(&b, '\n');
    fp4_status s = b.oom ? fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "hfdir.nomem", "out of memory")
                         : write_file_atomic(path, b.p, b.len, err);
    fp4_sbuf_free(&b);
    return s;
}

fp4_status fp4_hfdir_write_json(const char *path, const char *json_text, int indent, int sort_keys,
                             fp4_error *err) {
    fp4_error_clear(err);
    if (!path || !json_text || indent < 1 || indent > 8)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "hfjson.arg", "bad path, text or indent");
    json_error_t je;
    json_t *v = json_loads(json_text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v) {
        bool dup = json_error_code(&je) == json_error_duplicate_key;
        return fp4_fail(err, dup ? FP4_ERR_DUPLICATE : FP4_ERR_FORMAT, path, NULL,
                        dup ? "hfjson.dup" : "hfjson.parse", "JSON at byte %d: %s", je.position, je.text);
    }
    fp4_status s = write_json_value(path, v, indent, sort_keys != 0, err);
    json_decref(v);
    return s;
}

/* ---- sharded writer ---- */

typedef struct hfw_tensor {
    char *name;
    fp4_st_dtype dtype;
    int rank;
    int64_t shape[FP4_MAX_DIMS];
    uint64_t nbytes;
    size_t shard;
} hfw_tensor;

struct fp4_hfdir_writer {
    char *dir;
    uint64_t max_shard;
    hfw_tensor *t;
    size_t n, cap;
    fp4_st_writer *meta; /* holds the metadata pairs and validates declarations */
    size_t n_shards, cur_shard, next_tensor; /* next_tensor: first tensor of cur_shard */
    uint64_t shard_left;                     /* data bytes still due to the current shard */
    fp4_st_writer *cur;
    bool planned, failed;
};

fp4_status fp4_hfdir_writer_create(const char *dir, uint64_t max_shard_bytes, fp4_hfdir_writer **out,
                                fp4_error *err) {
    fp4_error_clear(err);
    if (!dir || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, dir, NULL, "hfw.arg", "dir or out is NULL");
    *out = NULL;
    fp4_hfdir_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->dir = strdup(dir))) {
        free(w);
        return fp4_fail(err, FP4_ERR_NOMEM, dir, NULL, "hfw.nomem", "out of memory");
    }
    w->max_shard = max_shard_bytes;
    fp4_status s = fp4_st_writer_create(&w->meta, err);
    if (s) {
        fp4_hfdir_writer_free(w);
        return s;
    }
    *out = w;
    return FP4_OK;
}

void fp4_hfdir_writer_free(fp4_hfdir_writer *w) {
    if (!w) return;
    fp4_st_writer_free(w->cur);
    fp4_st_writer_free(w->meta);
    for (size_t i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w->dir);
    free(w);
}

fp4_status fp4_hfdir_writer_add_metadata(fp4_hfdir_writer *w, const char *key, const char *value,
                                         fp4_error *err) {
    if (!w || w->planned)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "hfw.state", "metadata after writing");
    return fp4_st_writer_add_metadata(w->meta, key, value, err);
}

fp4_status fp4_hfdir_writer_add_tensor(fp4_hfdir_writer *w, const char *name, fp4_st_dtype dtype, int rank,
                                    const int64_t *shape, fp4_error *err) {
    if (!w || w->planned)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, name, "hfw.state", "tensor after writing");
    /* validates name, dtype, shape and counts exactly as a single file would */
    fp4_status s = fp4_st_writer_add_tensor(w->meta, name, dtype, rank, shape, err);
    if (s) return s;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        hfw_tensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return fp4_fail(err, FP4_ERR_NOMEM, NULL, name, "hfw.nomem", "out of memory");
        w->t = t;
        w->cap = cap;
    }
    hfw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, name, "hfw.nomem", "out of memory");
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    const char *rule;
    (void)fp4_st_nbytes(dtype, rank, shape, &t->nbytes, &rule); /* already checked above */
    w->n++;
    return FP4_OK;
}

static void shard_name(const fp4_hfdir_writer *w, size_t k, char *buf, size_t n) {
    if (w->n_shards == 1) snprintf(buf, n, "model.safetensors");
    else snprintf(buf, n, "model-%05zu-of-%05zu.safetensors", k + 1, w->n_shards);
}

/* Opens shard cur_shard: declares its metadata and tensors, writes its header. */
static fp4_status open_shard(fp4_hfdir_writer *w, fp4_error *err) {
    char name[64], path[HF_PATH_MAX];
    shard_name(w, w->cur_shard, name, sizeof name);
    fp4_status s = join_path(path, w->dir, name, err);
    if (!s) s = fp4_st_writer_create(&w->cur, err);
    for (size_t i = 0; !s && i < fp4_stw_n_meta(w->meta); i++) {
        const char *k, *v;
        fp4_stw_meta_at(w->meta, i, &k, &v);
        s = fp4_st_writer_add_metadata(w->cur, k, v, err);
    }
    w->shard_left = 0;
    size_t i = w->next_tensor;
    for (; !s && i < w->n && w->t[i].shard == w->cur_shard; i++) {
        const hfw_tensor *t = &w->t[i];
        s = fp4_st_writer_add_tensor(w->cur, t->name, t->dtype, t->rank, t->shape, err);
        w->shard_left += t->nbytes;
    }
    w->next_tensor = i;
    return s ? s : fp4_st_writer_begin(w->cur, path, err);
}

/* Finishes every shard whose bytes are complete and opens the next one. */
static fp4_status advance_shards(fp4_hfdir_writer *w, fp4_error *err) {
    while (w->cur && w->shard_left == 0) {
        fp4_status s = fp4_st_writer_finish(w->cur, err);
        fp4_st_writer_free(w->cur);
        w->cur = NULL;
        if (s) return s;
        if (++w->cur_shard < w->n_shards && (s = open_shard(w, err))) return s;
    }
    return FP4_OK;
}

/* Weights files in the directory that this writer will not replace (shards of another count, an
 * index beside a single file, ...) would mix two checkpoints: refused before anything is written. */
static fp4_status stale_weights(const fp4_hfdir_writer *w, fp4_error *err) {
    DIR *dir = opendir(w->dir);
    if (!dir) return fp4_fail(err, FP4_ERR_IO, w->dir, NULL, "hfw.io", "cannot list the directory: %s",
                              strerror(errno));
    fp4_status s = FP4_OK;
    struct dirent *de;
    char mine[64];
    while (!s && (de = readdir(dir))) {
        const char *n = de->d_name;
        unsigned k, of;
        int end = 0;
        bool weights = !strcmp(n, "model.safetensors") || !strcmp(n, "model.safetensors.index.json") ||
                       (sscanf(n, "model-%5u-of-%5u.safetensors%n", &k, &of, &end) == 2 && end > 0 &&
                        !n[end]);
        if (!weights) continue;
        bool ours = false;
        if (!strcmp(n, "model.safetensors.index.json")) ours = w->n_shards > 1;
        for (size_t i = 0; !ours && i < w->n_shards; i++) {
            shard_name(w, i, mine, sizeof mine);
            ours = !strcmp(n, mine);
        }
        if (!ours)
            s = fp4_fail(err, FP4_ERR_IO, w->dir, n, "hfw.stale",
                         "the directory holds %.64s from another checkpoint: write into an empty directory",
                         n);
    }
    closedir(dir);
    return s;
}

static fp4_status plan_shards(fp4_hfdir_writer *w, fp4_error *err) {
    w->planned = true;
    fp4_status s = fp4_stw_check_dups(w->meta, w->dir, err); /* names across all shards */
    if (s) return s;
    uint64_t bytes = 0;
    size_t shard = 0, in_shard = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint64_t nb = w->t[i].nbytes;
        if (w->max_shard && in_shard > 0 && nb > w->max_shard - bytes) { /* bytes <= max here */
            shard++;
            bytes = 0;
            in_shard = 0;
        }
        w->t[i].shard = shard;
        if (w->max_shard)
            bytes = nb > w->max_shard ? w->max_shard : bytes + nb; /* oversized: fills its shard */
        in_shard++;
    }
    w->n_shards = shard + 1;
    if (w->n_shards > FP4_MAX_SHARDS)
        return fp4_fail(err, FP4_ERR_LIMIT, w->dir, NULL, "index.shard_count", "%zu shards, above %d",
                        w->n_shards, FP4_MAX_SHARDS);
    if ((s = stale_weights(w, err))) return s;
    w->cur_shard = 0;
    w->next_tensor = 0;
    if ((s = open_shard(w, err))) return s;
    return advance_shards(w, err);
}

fp4_status fp4_hfdir_writer_write(fp4_hfdir_writer *w, const void *data, size_t n, fp4_error *err) {
    if (!w || w->failed || (!data && n))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w ? w->dir : NULL, NULL, "hfw.state", "bad write");
    fp4_status s = w->planned ? FP4_OK : plan_shards(w, err);
    const uint8_t *p = data;
    while (!s && n) {
        if (!w->cur) {
            s = fp4_fail(err, FP4_ERR_INVALID_ARG, w->dir, NULL, "stw.data_size",
                         "bytes past the declared tensors");
            break;
        }
        size_t k = n < w->shard_left ? n : (size_t)w->shard_left;
        if (!(s = fp4_st_writer_write(w->cur, p, k, err))) {
            p += k, n -= k;
            w->shard_left -= k;
            s = advance_shards(w, err);
        }
    }
    if (s) w->failed = true;
    return s;
}

static fp4_status write_index(const fp4_hfdir_writer *w, fp4_error *err) {
    char path[HF_PATH_MAX], name[64];
    fp4_status s = join_path(path, w->dir, "model.safetensors.index.json", err);
    if (s) return s;
    json_t *root = json_object(), *meta = json_object(), *wm = json_object();
    bool ok = root && meta && wm;
    ok = ok && json_object_set_new(meta, "total_size",
                                   json_integer((json_int_t)fp4_st_writer_data_size(w->meta))) == 0;
    for (size_t i = 0; ok && i < w->n; i++) {
        shard_name(w, w->t[i].shard, name, sizeof name);
        ok = json_object_set_new(wm, w->t[i].name, json_string(name)) == 0;
    }
    ok = ok && json_object_set(root, "metadata", meta) == 0 && json_object_set(root, "weight_map", wm) == 0;
    s = ok ? write_json_value(path, root, 2, true, err)
           : fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "hfw.nomem", "out of memory");
    json_decref(meta);
    json_decref(wm);
    json_decref(root);
    return s;
}

fp4_status fp4_hfdir_writer_finish(fp4_hfdir_writer *w, size_t *n_shards, fp4_error *err) {
    if (!w || w->failed)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, w ? w->dir : NULL, NULL, "hfw.state", "bad finish");
    fp4_status s = w->planned ? FP4_OK : plan_shards(w, err);
    if (!s && (w->cur || w->cur_shard < w->n_shards))
        s = fp4_fail(err, FP4_ERR_INVALID_ARG, w->dir, NULL, "stw.data_size",
                     "tensor bytes missing at finish");
    if (!s && w->n_shards > 1) s = write_index(w, err);
    if (s) {
        w->failed = true;
        return s;
    }
    if (n_shards) *n_shards = w->n_shards;
    return FP4_OK;
}
