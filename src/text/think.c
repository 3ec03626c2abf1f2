/* think.c — reasoning spans (<think> ... </think>) shown or hidden in streamed text: a byte-wise
 * matcher of the two tags whose partial match is held back, so that a tag cut between tokens is
 * still recognised and nothing of a hidden span is ever returned. */
#include "fp4_impl.h"
#include "fp4lane_text.h"
#include <stdlib.h>
#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

struct fp4_think_filter {
    int hide, inside, skip_ws; /* skip_ws: right after a hidden span's end */
    char pend[sizeof CLOSE];   /* a partial tag */
    size_t n_pend;
    char *out;
    size_t n_out, cap;
};

void fp4_think_filter_free(fp4_think_filter *f) {
    if (!f) return;
    free(f->out);
    free(f);
}

int fp4_think_filter_inside(const fp4_think_filter *f) { return f ? f->inside : 0; }

fp4_status fp4_think_filter_create(int hide, const char *prompt, size_t prompt_len, fp4_think_filter **out) {
    if (!out || (!prompt && prompt_len)) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    fp4_think_filter *f = calloc(1, sizeof *f);
    if (!f) return FP4_ERR_NOMEM;
    f->hide = hide != 0;
    /* the prompt ends inside a span: "<think>" then only whitespace */
    size_t n = prompt_len;
    while (n > 0 && strchr(" \t\r\n", prompt[n - 1])) n--;
    f->inside = n >= sizeof OPEN - 1 && !memcmp(prompt + n - (sizeof OPEN - 1), OPEN, sizeof OPEN - 1);
    *out = f;
    return FP4_OK;
}

static fp4_status put(fp4_think_filter *f, char c) {
    if (f->hide && f->inside) return FP4_OK;
    if (f->hide && f->skip_ws && strchr(" \t\r\n", c)) return FP4_OK;
    f->skip_ws = 0;
    if (f->n_out + 2 > f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 256;
        char *p = realloc(f->out, cap);
        if (!p) return FP4_ERR_NOMEM;
        f->out = p, f->cap = cap;
    }
    f->out[f->n_out++] = c;
    f->out[f->n_out] = 0;
    return FP4_OK;
}

/* the tags themselves pass only when shown */
static fp4_status put_tag(fp4_think_filter *f, const char *tag, size_t n) {
    fp4_status st = FP4_OK;
    for (size_t i = 0; !f->hide && !st && i < n; i++) st = put(f, tag[i]);
    return st;
}

fp4_status fp4_think_filter_push(fp4_think_filter *f, const char *text, size_t len, const char **out,
                                 size_t *out_len) {
    if (!f || !out || !out_len || (!text && len)) return FP4_ERR_INVALID_ARG;
    f->n_out = 0;
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < len; i++) {
        f->pend[f->n_pend++] = text[i];
        while (!st && f->n_pend) {
            const char *tag = f->inside ? CLOSE : OPEN;
            size_t tl = strlen(tag);
            if (f->n_pend <= tl && !memcmp(f->pend, tag, f->n_pend)) {
                if (f->n_pend == tl) { /* a whole tag */
                    int was = f->inside;
                    f->inside = !f->inside;
                    if (was) st = put_tag(f, tag, tl), f->skip_ws = 1;
                    else st = put_tag(f, tag, tl);
                    f->n_pend = 0;
                }
                break;
            }
            st = put(f, f->pend[0]); /* not the start of a tag: one byte is text */
            memmove(f->pend, f->pend + 1, --f->n_pend);
        }
    }
    *out = f->out ? f->out : "";
    *out_len = f->n_out;
    return st;
}

fp4_status fp4_think_filter_flush(fp4_think_filter *f, const char **out, size_t *out_len) {
    if (!f || !out || !out_len) return FP4_ERR_INVALID_ARG;
    f->n_out = 0;
    fp4_status st = FP4_OK;
    for (size_t i = 0; !st && i < f->n_pend; i++) st = put(f, f->pend[i]);
    f->n_pend = 0;
    *out = f->out ? f->out : "";
    *out_len = f->n_out;
    return st;
}
