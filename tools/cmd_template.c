/* cmd_template.c — `fp4lane template`: what the model will see. Renders MODEL's own chat template
 * (chat_template.jinja beside it, else tokenizer_config.json's chat_template, else a GGUF's
 * tokenizer.chat_template; --template FILE overrides) with the Jinja engine, over a conversation:
 *   template MODEL [--template FILE.jinja] --messages CONV.json [--now UNIX_SECONDS]
 * CONV.json is {"messages": [...], "tools": [...], "add_generation_prompt": true, ...}: every other
 * member is passed to the template too (enable_thinking, ...). As transformers' apply_chat_template
 * does, tools and documents are none when absent, and bos_token / eos_token come from
 * tokenizer_config.json (or the GGUF's BOS/EOS tokens). The text goes to standard output byte for
 * byte; a template that raises exits 1 with its message. */
#include "cli.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONV_MAX (64u << 20)

/* a whole regular file of at most cap bytes, NUL-terminated; NULL with a message */
static char *read_file(const char *path, size_t cap, size_t *len) {
    struct stat sb;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > cap) {
        fprintf(stderr, "fp4lane template: cannot read ");
        cli_put_escaped(stderr, path);
        fprintf(stderr, " (%s)\n", f ? "not a regular file within the size cap" : "cannot open");
        if (f) fclose(f);
        return NULL;
    }
    size_t n = (size_t)sb.st_size;
    char *p = malloc(n + 1);
    if (p && fread(p, 1, n, f) != n) free(p), p = NULL;
    fclose(f);
    if (!p) {
        fprintf(stderr, "fp4lane template: cannot read ");
        cli_put_escaped(stderr, path);
        fputc('\n', stderr);
        return NULL;
    }
    p[n] = 0;
    *len = n;
    return p;
}

static int is_dir(const char *p) {
    struct stat sb;
    return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

/* the folder that holds MODEL's side files (MODEL itself, or the folder of a file) */
static void folder(const char *model, char *dir, size_t n) {
    if (is_dir(model)) {
        snprintf(dir, n, "%s", model);
        return;
    }
    const char *s = strrchr(model, '/');
    if (!s)
        snprintf(dir, n, ".");
    else
        snprintf(dir, n, "%.*s", (int)(s - model), model);
}

static int is_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    char m[4] = {0};
    int g = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    if (f) fclose(f);
    return g;
}

/* bos_token / eos_token of tokenizer_config.json (a string, or {"content": ...}), or a GGUF's */
static void special_tokens(const char *model, const char *dir, json_t *vars) {
    static const char *const KEYS[] = {"bos_token", "eos_token"};
    if (is_gguf(model)) {
        fp4_tokenizer *t = NULL;
        fp4_error e;
        if (fp4_tokenizer_load(model, &t, &e)) return;
        int32_t ids[2] = {fp4_tokenizer_bos(t), fp4_tokenizer_eos(t)};
        for (int i = 0; i < 2; i++) {
            const char *s;
            size_t l;
            if (ids[i] >= 0 && !json_object_get(vars, KEYS[i]) && !fp4_tokenizer_token(t, ids[i], &s, &l))
                json_object_set_new(vars, KEYS[i], json_stringn(s, l));
        }
        fp4_tokenizer_free(t);
        return;
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    json_error_t je;
    json_t *cfg = json_load_file(p, JSON_DECODE_INT_AS_REAL, &je);
    for (int i = 0; cfg && i < 2; i++) {
        json_t *v = json_object_get(cfg, KEYS[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v) && !json_object_get(vars, KEYS[i])) json_object_set(vars, KEYS[i], v);
    }
    json_decref(cfg);
}

/* MODEL's own template: chat_template.jinja beside it first (transformers' order), then the rest */
static char *model_template(const char *model, const char *dir) {
    char p[4200];
    size_t len;
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    struct stat sb;
    if (!is_gguf(model) && !stat(p, &sb)) return read_file(p, FP4_TEMPLATE_MAX_BYTES, &len);
    char *t = NULL;
    fp4_error e;
    fp4_status st = fp4_chat_template_read(model, &t, &e);
    if (st) {
        cli_report_error("template", st, &e);
        return NULL;
    }
    if (!t) {
        fprintf(stderr, "fp4lane template: ");
        cli_put_escaped(stderr, model);
        fprintf(stderr, " has no chat template (give one with --template FILE.jinja)\n");
    }
    return t;
}

static int render(const char *tmpl, size_t tlen, json_t *conv, int use_now, long long now) {
    fp4_template *t = NULL;
    fp4_error e;
    fp4_status st = fp4_template_compile(tmpl, tlen, &t, &e);
    if (st) return cli_report_error("template", st, &e);
    json_t *msgs = json_object_get(conv, "messages");
    char *m = msgs ? json_dumps(msgs, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int agp = json_is_true(json_object_get(conv, "add_generation_prompt"));
    json_object_del(conv, "messages");
    json_object_del(conv, "add_generation_prompt");
    char *x = json_dumps(conv, JSON_COMPACT);
    fp4_template_opts o = {0};
    o.fixed_clock = use_now, o.now = now;
    char *out = NULL;
    size_t len = 0;
    st = fp4_template_render(t, m, agp, x, &o, &out, &len, &e);
    free(m), free(x);
    fp4_template_free(t);
    if (st && !strcmp(e.rule, "jinja.raise")) {
        fprintf(stderr, "fp4lane template: the template raised an exception (%s): ", e.tensor);
        cli_put_escaped(stderr, e.msg);
        fputc('\n', stderr);
        return 1;
    }
    if (st) return cli_report_error("template", st, &e);
    int rc = fwrite(out, 1, len, stdout) == len ? 0 : 1;
    free(out);
    return rc;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *conv_path = NULL;
    long long now = 0;
    int use_now = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--template") && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(argv[i], "--messages") && i + 1 < argc)
            conv_path = argv[++i];
        else if (!strcmp(argv[i], "--now") && i + 1 < argc) {
            char *end;
            now = strtoll(argv[++i], &end, 10), use_now = 1;
            bad |= *end != 0 || !*argv[i];
        } else if (argv[i][0] == '-' && argv[i][1])
            bad = 1;
        else if (!model)
            model = argv[i];
        else
            bad = 1;
    }
    if (bad || !model || !conv_path) return cli_usage("template");
    size_t clen, tlen = 0;
    char *cj = read_file(conv_path, CONV_MAX, &clen);
    if (!cj) return 1;
    json_error_t je;
    json_t *conv = json_loadb(cj, clen, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    free(cj);
    if (!json_is_object(conv) || !json_is_array(json_object_get(conv, "messages"))) {
        fprintf(stderr, "fp4lane template: ");
        cli_put_escaped(stderr, conv_path);
        fprintf(stderr, ": not a JSON object with a \"messages\" list (%s)\n",
                conv ? "wrong shape" : je.text);
        json_decref(conv);
        return 1;
    }
    char dir[4096];
    folder(model, dir, sizeof dir);
    char *tmpl = file ? read_file(file, FP4_TEMPLATE_MAX_BYTES, &tlen) : model_template(model, dir);
    if (tmpl && !file) tlen = strlen(tmpl);
    int rc = 1;
    if (tmpl) {
        if (!json_object_get(conv, "tools")) json_object_set_new(conv, "tools", json_null());
        if (!json_object_get(conv, "documents")) json_object_set_new(conv, "documents", json_null());
        special_tokens(model, dir, conv);
        rc = render(tmpl, tlen, conv, use_now, now);
    }
    free(tmpl);
    json_decref(conv);
    return rc;
}
