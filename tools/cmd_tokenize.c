/* cmd_tokenize.c — `fp4lane tokenize` and `fp4lane detokenize`: text to token ids and back, for
 * scripts and for checking a tokenizer against another implementation.
 *   tokenize MODEL|tokenizer.json [-f FILE | [--] TEXT] [--json] [--add-special] [--parse-special]
 *     ids separated by spaces on one line; --json prints {"ids": [...], "tokens": [...]}. Without
 *     TEXT or -f the text is read from standard input. No special tokens are added unless
 *     --add-special is given; special tokens written in the text are matched only with
 *     --parse-special. After "--" every argument is positional (a TEXT starting with '-').
 *   detokenize MODEL|tokenizer.json [--] IDS... [--skip-special] [--cleanup]
 *     ids as arguments (commas or spaces between them), at least one; the text is written as is,
 *     no newline. */
#include "cli.h"
#include "fp4lane_text.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(FILE *f, size_t *n) {
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap);
    while (p) {
        size_t got = fread(p + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *q = realloc(p, cap * 2);
        if (!q) {
            free(p);
            return NULL;
        }
        p = q;
        cap *= 2;
    }
    if (p && ferror(f)) {
        free(p);
        return NULL;
    }
    *n = len;
    return p;
}

static int load(const char *verb, const char *path, fp4_tokenizer **t) {
    fp4_error e;
    fp4_status st = fp4_tokenizer_load(path, t, &e);
    return st ? cli_report_error(verb, st, &e) : 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    int json = 0, bad = 0;
    unsigned flags = 0;
    for (int i = 1, opts = 1; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        else if (opts && !strcmp(argv[i], "--json")) json = 1;
        else if (opts && !strcmp(argv[i], "--add-special")) flags |= FP4_TOK_ADD_SPECIAL;
        else if (opts && !strcmp(argv[i], "--parse-special")) flags |= FP4_TOK_PARSE_SPECIAL;
        else if (opts && !strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (opts && argv[i][0] == '-' && argv[i][1]) bad = 1;
        else if (!model) model = argv[i];
        else if (!text) text = argv[i];
        else bad = 1;
    }
    if (bad || !model || (file && text)) {
        fprintf(stderr, "usage: fp4lane tokenize MODEL|tokenizer.json [-f FILE | [--] TEXT] [--json] "
                        "[--add-special] [--parse-special]\n");
        return 2;
    }
    char *buf = NULL;
    size_t n = 0;
    if (text) n = strlen(text);
    else {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (!f) {
            fprintf(stderr, "fp4lane tokenize: %s: %s\n", file, strerror(errno));
            return 1;
        }
        buf = slurp(f, &n);
        if (file) fclose(f);
        if (!buf) {
            fprintf(stderr, "fp4lane tokenize: cannot read %s\n", file ? file : "standard input");
            return 1;
        }
        text = buf;
    }
    fp4_tokenizer *t = NULL;
    int rc = load("tokenize", model, &t);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!rc) {
        fp4_error e;
        fp4_status st = fp4_tokenizer_encode_err(t, text, n, flags, &ids, &n_ids, &e);
        if (st) rc = cli_report_error("tokenize", st, &e);
    }
    if (!rc && json) {
        json_t *o = json_object(), *ja = json_array(), *jt = json_array();
        for (size_t i = 0; i < n_ids; i++) {
            const char *s;
            size_t l;
            json_array_append_new(ja, json_integer(ids[i]));
            json_t *js = fp4_tokenizer_token(t, ids[i], &s, &l) == FP4_OK ? json_stringn(s, l) : NULL;
            json_array_append_new(jt, js ? js : json_null());
        }
        json_object_set_new(o, "ids", ja);
        json_object_set_new(o, "tokens", jt);
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        else rc = 1;
        free(s);
        json_decref(o);
    } else if (!rc) {
        for (size_t i = 0; i < n_ids; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
    }
    free(ids);
    free(buf);
    fp4_tokenizer_free(t);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    unsigned flags = 0;
    int bad = 0;
    size_t cap = 256, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return 1;
    for (int i = 1, opts = 1; i < argc && !bad; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        else if (opts && !strcmp(argv[i], "--skip-special")) flags |= FP4_TOK_SKIP_SPECIAL;
        else if (opts && !strcmp(argv[i], "--cleanup")) flags |= FP4_TOK_CLEANUP_SPACES;
        else if (opts && argv[i][0] == '-' && !(argv[i][1] >= '0' && argv[i][1] <= '9')) bad = 1;
        else if (!model) model = argv[i];
        else {
            for (char *p = argv[i]; *p && !bad;) {
                while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t') p++;
                if (!*p) break;
                char *end;
                errno = 0;
                long long v = strtoll(p, &end, 10);
                if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
                    bad = 1;
                    break;
                }
                if (n == cap) {
                    int32_t *q = realloc(ids, 2 * cap * sizeof *q);
                    if (!q) {
                        free(ids);
                        return 1;
                    }
                    ids = q;
                    cap *= 2;
                }
                ids[n++] = (int32_t)v;
                p = end;
            }
        }
    }
    if (bad || !model || !n) {
        free(ids);
        if (!bad && model) fprintf(stderr, "fp4lane detokenize: no token ids given\n");
        fprintf(stderr,
                "usage: fp4lane detokenize MODEL|tokenizer.json [--] IDS... [--skip-special] [--cleanup]\n");
        return 2;
    }
    fp4_tokenizer *t = NULL;
    int rc = load("detokenize", model, &t);
    if (!rc) {
        char *text = NULL;
        size_t len = 0;
        fp4_error e;
        fp4_status st = fp4_tokenizer_decode(t, ids, n, flags, &text, &len, &e);
        if (st) rc = cli_report_error("detokenize", st, &e);
        else fwrite(text, 1, len, stdout);
        free(text);
    }
    free(ids);
    fp4_tokenizer_free(t);
    return rc;
}
