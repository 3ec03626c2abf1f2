/* run_spec.c — see run_spec.h. The loop is plain decoding's (cmd_run.c decode) with fp4_spec_round
 * in place of the one-column step: the same callback, the same logits rows, the same sampler calls
 * in the same order, so in exact mode the output is the plain run's bit for bit. */
#include "run_spec.h"
#include "cli.h"
#include "run_text.h"
#include <stdlib.h>
#include <string.h>

#define SPEC_PREFILL_COLS 64

int run_spec_same_tokenizer(const char *draft, const fp4_tokenizer *t) {
    fp4_tokenizer *d = NULL;
    if (rt_text_tokenizer("run --draft", draft, &d)) return 1;
    char why[200] = "";
    const int32_t n = fp4_tokenizer_n_vocab(t);
    if (fp4_tokenizer_n_vocab(d) != n)
        snprintf(why, sizeof why, "%d tokens, the target's %d", fp4_tokenizer_n_vocab(d), n);
    else if (fp4_tokenizer_bos(d) != fp4_tokenizer_bos(t) || fp4_tokenizer_eos(d) != fp4_tokenizer_eos(t))
        snprintf(why, sizeof why, "BOS/EOS %d/%d, the target's %d/%d", fp4_tokenizer_bos(d),
                 fp4_tokenizer_eos(d), fp4_tokenizer_bos(t), fp4_tokenizer_eos(t));
    for (int32_t i = 0; !why[0] && i < n; i++) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        const int ea = fp4_tokenizer_token(t, i, &a, &la) != FP4_OK,
                  eb = fp4_tokenizer_token(d, i, &b, &lb) != FP4_OK;
        if (ea != eb || la != lb || (la && memcmp(a, b, la)) ||
            fp4_tokenizer_is_special(t, i) != fp4_tokenizer_is_special(d, i))
            snprintf(why, sizeof why, "token id %d differs", i);
    }
    fp4_tokenizer_free(d);
    if (!why[0]) return 0;
    fprintf(stderr,
            "fp4lane run: refused: the draft model %s has another tokenizer (%s): a draft must share "
            "the target's tokenizer\n",
            draft, why);
    return 1;
}

int run_spec_prefill(run_spec *r, const int32_t *prompt, int64_t n) {
    fp4_rt_tok cols[SPEC_PREFILL_COLS];
    fp4_error err;
    if (n > fp4_rt_n_ctx(r->draft)) n = fp4_rt_n_ctx(r->draft); /* a shorter draft context: no drafting */
    for (int64_t a = 0; a < n; a += SPEC_PREFILL_COLS) {
        const int64_t m = n - a < SPEC_PREFILL_COLS ? n - a : SPEC_PREFILL_COLS;
        for (int64_t j = 0; j < m; j++)
            cols[j] = (fp4_rt_tok){r->dseq, prompt[a + j], 0};
        fp4_status st = fp4_rt_step(r->draft, cols, m, NULL, &err);
        if (st) return cli_report_error("run --draft", st, &err);
    }
    return 0;
}

typedef struct emit_ctx {
    run_spec *r;
    int32_t *hist;
    int64_t n_hist;
} emit_ctx;

static int is_eos(const run_spec *r, int32_t t) {
    for (int i = 0; i < r->n_eos; i++)
        if (r->eos[i] == t) return 1;
    return 0;
}

/* run's side of a token: the logits row it was picked from (NULL for the first: the prefill wrote
 * it), the callback, then 1 when it ends the generation (a stop, EOS, -n) */
static int emit_one(emit_ctx *c, int32_t token, const float *row) {
    run_spec *r = c->r;
    if (row && r->npy && rt_npy_row(r->npy, row)) return -1;
    if (!r->n_decode) r->t_first = rt_cli_now();
    const int stop = r->token(r->token_ctx, 0, token);
    if (stop < 0) {
        fprintf(stderr, "fp4lane run: cannot write the output\n");
        return -1;
    }
    c->hist[c->n_hist++] = token;
    r->n_decode++;
    return stop || (!r->ignore_eos && is_eos(r, token)) || r->n_decode == r->n_gen;
}
static int on_emit(void *user, int32_t token, const float *logits) {
    return emit_one(user, token, logits);
}

int run_spec_decode(run_spec *r, const int32_t *prompt, int64_t n, int32_t first) {
    if (r->n_gen <= 0) return 0;
    emit_ctx c = {r, malloc(sizeof(int32_t) * (size_t)(n + r->n_gen)), n};
    fp4_spec *sp = NULL;
    fp4_error err;
    int rc = 0;
    if (!c.hist) return fprintf(stderr, "fp4lane run: out of memory\n"), 1;
    memcpy(c.hist, prompt, sizeof(int32_t) * (size_t)n);
    fp4_status st = fp4_spec_create(r->target, r->tseq, r->draft, r->dseq, r->draft_n, &sp, &err);
    if (st) {
        free(c.hist);
        return cli_report_error("run --draft", st, &err);
    }
    int stop = emit_one(&c, first, NULL);
    fp4_sampler_accept(r->smp, first);
    while (stop == 0 && !*r->interrupted) {
        st = fp4_spec_round(sp, c.hist, c.n_hist, r->n_gen - r->n_decode, r->smp, on_emit, &c, &stop, &err);
        if (st) {
            stop = -1; /* an emit failure was printed where it happened */
            if (strcmp(err.rule, "spec.emit")) cli_report_error("run --draft", st, &err);
        }
    }
    if (stop < 0) rc = 1;
    r->stats = fp4_spec_get_stats(sp);
    fp4_spec_free(sp);
    free(c.hist);
    return rc;
}
