/* model_text.c — what a model folder says about text generation beside its tokenizer: the EOS ids
 * of generation_config.json and the chat template of tokenizer_config.json (or of a GGUF's
 * tokenizer.chat_template). */
#include "fp4_impl.h"
#include "fp4lane_text.h"
#include "io/infile.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define SIDE_FILE_MAX (16u << 20)

/* path's folder: path itself when it is one, else the part before the last '/' ("." if none) */
static void folder_of(const char *path, char *dir, size_t n, int *is_gguf) {
    struct stat sb;
    *is_gguf = 0;
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
        snprintf(dir, n, "%s", path);
        return;
    }
    char m[4];
    size_t got = 0;
    fp4_error ignored; /* not a readable regular file: no GGUF, the folder's files decide */
    if (!fp4_infile_head(path, m, 4, &got, "text.io", &ignored) && got == 4 && !memcmp(m, "GGUF", 4))
        *is_gguf = 1;
    const char *sl = strrchr(path, '/');
    if (sl)
        snprintf(dir, n, "%.*s", (int)(sl - path), path);
    else
        snprintf(dir, n, ".");
}

/* reads dir/name as JSON (tokenizer_config.json: integers as reals, model_max_length can be 1e30); *j NULL
 * (FP4_OK) when the file does not exist */
static fp4_status side_json(const char *dir, const char *name, size_t flags, json_t **j, fp4_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *j = NULL;
    char *buf;
    size_t len;
    fp4_status st = fp4_infile_read(p, SIDE_FILE_MAX, "text.io", "text.limit", true, &buf, &len, err);
    if (st || !buf) return st;
    json_error_t je;
    *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES | flags, &je);
    free(buf);
    if (!*j) return fp4_fail(err, FP4_ERR_FORMAT, p, NULL, "text.json", "line %d: %s", je.line, je.text);
    return FP4_OK;
}

fp4_status fp4_generation_eos(const char *model_path, int32_t *ids, int max, int *n, fp4_error *err) {
    if (!model_path || !n || (max > 0 && !ids))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "text.arg", "NULL argument");
    *n = 0;
    char dir[4096];
    int gguf;
    folder_of(model_path, dir, sizeof dir, &gguf);
    if (gguf) return FP4_OK; /* a GGUF carries its EOS in its own metadata */
    json_t *j;
    fp4_status st = side_json(dir, "generation_config.json", 0, &j, err);
    if (st || !j) return st;
    json_t *e = json_object_get(j, "eos_token_id");
    size_t i;
    json_t *x;
    if (json_is_integer(e)) {
        json_t *one = json_array();
        json_array_append(one, e);
        e = one;
    } else if (e && !json_is_array(e) && !json_is_null(e)) {
        json_decref(j);
        return fp4_fail(err, FP4_ERR_FORMAT, "generation_config.json", "eos_token_id", "text.eos",
                        "eos_token_id is neither an integer nor a list of integers");
    } else
        json_incref(e);
    json_array_foreach(e, i, x) {
        json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
        if (v < 0 || v >= FP4_TOK_MAX_VOCAB) {
            st = fp4_fail(err, FP4_ERR_FORMAT, "generation_config.json", "eos_token_id", "text.eos",
                          "eos_token_id[%zu] is not a token id", i);
            break;
        }
        if (*n < max) ids[(*n)++] = (int32_t)v;
    }
    json_decref(e);
    json_decref(j);
    return st;
}

fp4_status fp4_generation_bos(const char *model_path, int32_t *bos, fp4_error *err) {
    if (!model_path || !bos)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "text.arg", "NULL argument");
    *bos = -1;
    char dir[4096];
    int gguf;
    folder_of(model_path, dir, sizeof dir, &gguf);
    if (gguf) return FP4_OK; /* a GGUF carries its BOS in its own metadata */
    json_t *j;
    fp4_status st = side_json(dir, "generation_config.json", 0, &j, err);
    if (st || !j) return st;
    json_t *b = json_object_get(j, "bos_token_id");
    if (b && !json_is_null(b) &&
        (!json_is_integer(b) || json_integer_value(b) < 0 || json_integer_value(b) >= FP4_TOK_MAX_VOCAB))
        st = fp4_fail(err, FP4_ERR_FORMAT, "generation_config.json", "bos_token_id", "text.bos",
                      "bos_token_id is not a token id (an integer)");
    else if (json_is_integer(b))
        *bos = (int32_t)json_integer_value(b);
    json_decref(j);
    return st;
}

fp4_status fp4_chat_template_read(const char *model_path, char **tmpl, fp4_error *err) {
    if (!model_path || !tmpl)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "text.arg", "NULL argument");
    *tmpl = NULL;
    char dir[4096];
    int gguf;
    folder_of(model_path, dir, sizeof dir, &gguf);
    if (gguf) {
        fp4_gguf *g = NULL;
        fp4_status st = fp4_gguf_open(model_path, &g, err);
        if (st) return st;
        const char *s = NULL;
        uint64_t len = 0;
        int64_t k = fp4_gguf_key_index(g, "tokenizer.chat_template");
        if (k >= 0 && (fp4_gguf_get_str(g, k, &s, &len) != FP4_OK || !s))
            st = fp4_fail(err, FP4_ERR_FORMAT, model_path, "tokenizer.chat_template", "text.chat-template",
                          "tokenizer.chat_template is not a string");
        else if (k >= 0 && (len >= SIDE_FILE_MAX || memchr(s, 0, len)))
            st = fp4_fail(err, FP4_ERR_LIMIT, model_path, "tokenizer.chat_template", "text.chat-template",
                          len >= SIDE_FILE_MAX ? "tokenizer.chat_template is %llu bytes, above the cap of %u"
                                               : "tokenizer.chat_template holds a NUL byte (%llu bytes; %u)",
                          (unsigned long long)len, SIDE_FILE_MAX);
        else if (k >= 0) {
            if (!(*tmpl = malloc(len + 1)))
                st = fp4_fail(err, FP4_ERR_NOMEM, model_path, NULL, "text.nomem", "out of memory");
            else
                memcpy(*tmpl, s, len), (*tmpl)[len] = 0;
        }
        fp4_gguf_close(g);
        return st;
    }
    /* chat_template.jinja beside it first: transformers reads it before tokenizer_config.json's */
    char jp[4200], *buf = NULL;
    size_t len = 0;
    snprintf(jp, sizeof jp, "%s/chat_template.jinja", dir);
    fp4_status st = fp4_infile_read(jp, SIDE_FILE_MAX, "text.io", "text.limit", true, &buf, &len, err);
    if (st || buf) {
        if (buf && memchr(buf, 0, len))
            st = fp4_fail(err, FP4_ERR_FORMAT, jp, "chat_template", "text.chat-template",
                          "chat_template.jinja holds a NUL byte");
        if (st) free(buf);
        else *tmpl = buf;
        return st;
    }
    json_t *j;
    st = side_json(dir, "tokenizer_config.json", JSON_DECODE_INT_AS_REAL, &j, err);
    if (st || !j) return st;
    json_t *t = json_object_get(j, "chat_template");
    char where[4200];
    snprintf(where, sizeof where, "%s/tokenizer_config.json", dir);
    if (t && !json_is_null(t) && !json_is_string(t) && !json_is_array(t)) {
        json_decref(j);
        return fp4_fail(err, FP4_ERR_FORMAT, where, "chat_template", "text.chat-template",
                        "chat_template is neither a string nor a list of named templates");
    }
    if (json_is_array(t)) { /* [{"name": "default", "template": ...}, ...] */
        size_t i;
        json_t *x, *pick = NULL;
        json_array_foreach(t, i, x) {
            const char *name = json_string_value(json_object_get(x, "name"));
            if (json_is_string(json_object_get(x, "template")) &&
                (!pick || (name && !strcmp(name, "default"))))
                pick = json_object_get(x, "template");
        }
        if (!pick && json_array_size(t)) {
            json_decref(j);
            return fp4_fail(err, FP4_ERR_FORMAT, where, "chat_template", "text.chat-template",
                            "chat_template is a list without a {\"name\", \"template\": string} entry");
        }
        t = pick;
    }
    if (json_is_string(t) && strlen(json_string_value(t)) != json_string_length(t))
        st = fp4_fail(err, FP4_ERR_FORMAT, where, "chat_template", "text.chat-template",
                      "chat_template holds a NUL character");
    else if (json_is_string(t) && !(*tmpl = strdup(json_string_value(t))))
        st = fp4_fail(err, FP4_ERR_NOMEM, where, NULL, "text.nomem", "out of memory");
    json_decref(j);
    return st;
}
