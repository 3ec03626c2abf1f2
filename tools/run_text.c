/* run_text.c — see run_text.h. */
#include "run_text.h"
#include "cli.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROMPT_MAX (16u << 20)

static int is_model_dir(const char *p) {
    char c[PATH_MAX + 32];
    struct stat sb;
    snprintf(c, sizeof c, "%s/config.json", p);
    return !stat(c, &sb) && S_ISREG(sb.st_mode);
}

int rt_text_default_model(const char *verb, char *buf, size_t n) {
    const char *env = getenv("FP4LANE_MODEL");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return 0;
    }
    char exe[PATH_MAX], tree[PATH_MAX + 32] = "", inst[PATH_MAX + 32] = "";
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *sl = strrchr(exe, '/');
        if (sl) *sl = 0;
        snprintf(tree, sizeof tree, "%s/../models/tiny", exe);
        snprintf(inst, sizeof inst, "%s/../share/fp4lane/tiny", exe);
        char real[PATH_MAX];
        if (is_model_dir(tree)) return snprintf(buf, n, "%s", realpath(tree, real) ? real : tree), 0;
        if (is_model_dir(inst)) return snprintf(buf, n, "%s", realpath(inst, real) ? real : inst), 0;
    }
    fprintf(stderr,
            "fp4lane %s: no MODEL given and no default model found; looked at $FP4LANE_MODEL (unset), "
            "%s (the build tree's models/tiny) and %s (make install's $(PREFIX)/share/fp4lane/tiny)\n",
            verb, tree[0] ? tree : "<exe dir>/../models/tiny",
            inst[0] ? inst : "<exe dir>/../share/fp4lane/tiny");
    return -1;
}

int rt_text_model_present(const char *verb, const char *model) {
    struct stat sb;
    if (!stat(model, &sb)) return 0;
    fp4_error err = {0};
    char why[128];
    snprintf(why, sizeof why, "%s", strerror(errno));
    if (why[0] >= 'A' && why[0] <= 'Z') why[0] = (char)(why[0] - 'A' + 'a');
    err.code = FP4_ERR_IO;
    snprintf(err.file, sizeof err.file, "%s", model);
    snprintf(err.rule, sizeof err.rule, "io.open");
    snprintf(err.msg, sizeof err.msg, "cannot open: %s", why);
    cli_report_error(verb, FP4_ERR_IO, &err);
    return -1;
}

int rt_text_tokenizer(const char *verb, const char *model, fp4_tokenizer **t) {
    char dir[PATH_MAX + 1];
    struct stat sb;
    if (rt_text_model_present(verb, model)) return -1;
    const char *p = model;
    size_t l = strlen(model);
    /* a .safetensors file: its folder holds the tokenizer */
    if (!stat(model, &sb) && S_ISREG(sb.st_mode) && l > 12 && !strcmp(model + l - 12, ".safetensors")) {
        const char *sl = strrchr(model, '/');
        snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - model) : 1, sl ? model : ".");
        p = dir;
    }
    fp4_error err;
    fp4_status st = fp4_tokenizer_load(p, t, &err);
    if (st) {
        if (!stat(model, &sb)) /* a MODEL that is not there: the error below says so alone */
            fprintf(stderr, "fp4lane %s: MODEL's tokenizer is needed for text (or give --prompt-ids):\n",
                    verb);
        return cli_report_error(verb, st, &err);
    }
    return 0;
}

int rt_text_eos(const char *verb, const char *model, const fp4_arch *ar, const fp4_tokenizer *t, int32_t *eos,
                int max) {
    fp4_error err;
    int n = 0;
    fp4_status st = fp4_generation_eos(model, eos, max, &n, &err);
    if (st) return cli_report_error(verb, st, &err), -1;
    if (n) return n;
    for (int i = 0; i < ar->n_eos && n < max; i++)
        eos[n++] = ar->eos[i];
    if (!n && t && fp4_tokenizer_eos(t) >= 0 && max > 0) eos[n++] = fp4_tokenizer_eos(t);
    return n;
}

int32_t rt_text_bos(const char *verb, const char *model, const fp4_arch *ar, const fp4_tokenizer *t) {
    fp4_error err;
    int32_t bos = -1;
    fp4_status st = fp4_generation_bos(model, &bos, &err);
    if (st) return cli_report_error(verb, st, &err), -2;
    if (bos < 0 && ar) bos = ar->bos;
    if (bos < 0 && t) bos = fp4_tokenizer_bos(t);
    return bos;
}

int rt_text_read_prompt(const char *verb, const char *p, const char *file, char **text, size_t *len) {
    *text = NULL, *len = 0;
    if (p && strcmp(p, "-")) {
        size_t n = strlen(p);
        if (!(*text = malloc(n + 1))) return -1;
        memcpy(*text, p, n + 1);
        *len = n;
        return 0;
    }
    FILE *f = p ? stdin : fopen(file, "rb");
    const char *name = p ? "standard input" : file;
    if (!f) return fprintf(stderr, "fp4lane %s: -f %s: %s\n", verb, file, strerror(errno)), -1;
    size_t cap = 4096, n = 0, r;
    char *b = malloc(cap);
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n > PROMPT_MAX) break;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    int bad = f != stdin && ferror(f);
    if (f != stdin) fclose(f);
    if (!b) return fprintf(stderr, "fp4lane %s: out of memory\n", verb), -1;
    if (bad || n > PROMPT_MAX) {
        free(b);
        return fprintf(stderr, "fp4lane %s: %s: %s\n", verb, name,
                       bad ? "read error" : "prompt larger than 16 MiB"),
               -1;
    }
    b[n] = 0;
    *text = b, *len = n;
    return 0;
}

int rt_text_out_open(rt_text_out *o, const char *verb, const fp4_tokenizer *t, const char *const *stops,
                     size_t n_stops, FILE *f) {
    memset(o, 0, sizeof *o);
    o->f = f;
    fp4_error err;
    fp4_status st = fp4_stop_filter_create(stops, n_stops, &o->sf, &err);
    if (st) {
        fprintf(stderr, "fp4lane %s: --stop: %s\n", verb, err.msg);
        return -1;
    }
    if (fp4_detok_stream_create(t, FP4_TOK_SKIP_SPECIAL, &o->ds)) {
        fp4_stop_filter_free(o->sf);
        o->sf = NULL;
        return fprintf(stderr, "fp4lane %s: out of memory\n", verb), -1;
    }
    return 0;
}

static int emit(rt_text_out *o, const char *s, size_t n) {
    if (!n) return 0;
    if (o->n_text + n + 1 > o->cap) {
        size_t cap = o->n_text + n + 1 > 2 * o->cap ? o->n_text + n + 1 : 2 * o->cap;
        char *p = realloc(o->text, cap);
        if (!p) return o->failed = 1, -1;
        o->text = p, o->cap = cap;
    }
    memcpy(o->text + o->n_text, s, n);
    o->n_text += n;
    o->text[o->n_text] = 0;
    if (o->f && (fwrite(s, 1, n, o->f) != n || fflush(o->f))) return o->failed = 1, -1;
    return 0;
}

/* the text the stop strings let through, past the reasoning-span filter when there is one */
static int emit_shown(rt_text_out *o, const char *s, size_t n) {
    if (!o->tf) return emit(o, s, n);
    const char *out;
    size_t len;
    if (fp4_think_filter_push(o->tf, s, n, &out, &len)) return o->failed = 1, -1;
    return emit(o, out, len);
}

int rt_text_out_think(rt_text_out *o, int hide, const char *prompt, size_t n) {
    fp4_think_filter_free(o->tf);
    o->tf = NULL;
    return hide && fp4_think_filter_create(1, prompt, n, &o->tf) ? -1 : 0;
}

static int through_stops(rt_text_out *o, const char *s, size_t n) {
    const char *out;
    size_t len;
    int stopped;
    if (fp4_stop_filter_push(o->sf, s, n, &out, &len, &stopped) || emit_shown(o, out, len)) return -1;
    o->stopped = stopped;
    return stopped;
}

int rt_text_out_push(rt_text_out *o, int32_t id) {
    if (o->stopped) return 1;
    const char *s;
    size_t n;
    fp4_error err;
    if (fp4_detok_stream_push(o->ds, id, &s, &n, &err)) return -1;
    return through_stops(o, s, n);
}

int rt_text_out_prime(rt_text_out *o, const int32_t *ids, size_t n) {
    const char *s;
    size_t len;
    fp4_error err;
    for (size_t i = 0; i < n; i++)
        if (fp4_detok_stream_push(o->ds, ids[i], &s, &len, &err)) return -1;
    return 0;
}

int rt_text_out_finish(rt_text_out *o) {
    if (o->stopped) return 0;
    const char *s;
    size_t n;
    if (fp4_detok_stream_flush(o->ds, &s, &n) || through_stops(o, s, n) < 0) return -1;
    if (o->stopped) return 0;
    if (fp4_stop_filter_flush(o->sf, &s, &n) || emit_shown(o, s, n)) return -1;
    if (o->tf && (fp4_think_filter_flush(o->tf, &s, &n) || emit(o, s, n))) return -1;
    return 0;
}

void rt_text_out_close(rt_text_out *o) {
    fp4_detok_stream_free(o->ds);
    fp4_stop_filter_free(o->sf);
    fp4_think_filter_free(o->tf);
    free(o->text);
    memset(o, 0, sizeof *o);
}
