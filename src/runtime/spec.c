/* spec.c — speculative decoding over two engines (fp4lane_runtime.h, "Speculative decoding"): the
 * draft proposes greedily, the target checks every proposal in one step, its own sampler accepts
 * them, both caches roll back to what was accepted. */
#include "runtime/rt_impl.h"
#include <stdlib.h>
#include <string.h>

#define SPEC_CATCHUP_COLS 64 /* draft catch-up (a prompt) in steps of this many columns */

struct fp4_spec {
    fp4_rt *target, *draft;
    int32_t tseq, dseq, n_draft;
    int64_t vocab;
    fp4_rt_tok *cols; /* max(n_draft + 1, SPEC_CATCHUP_COLS)                                 */
    float *tl;        /* (n_draft + 1) rows of target logits                                  */
    float *dl;        /* one row of draft logits                                              */
    int32_t *d;       /* the drafted tokens                                                   */
    fp4_spec_stats st;
};

fp4_status fp4_spec_create(fp4_rt *target, int32_t tseq, fp4_rt *draft, int32_t dseq, int32_t n_draft,
                           fp4_spec **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    if (!target || !draft)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.args", "a target and a draft engine");
    if (!fp4_rt_drafting(target))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.target",
                        "the target engine was not created with fp4_rt_opts.drafting = 1 (the route table "
                        "must qualify its route for drafting)");
    if (fp4_rt_vocab(target) != fp4_rt_vocab(draft))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, NULL, "spec.vocab",
                        "the draft model's vocabulary (%lld tokens) is not the target's (%lld tokens): a "
                        "draft must share the target's tokenizer",
                        (long long)fp4_rt_vocab(draft), (long long)fp4_rt_vocab(target));
    if (n_draft < 1 || n_draft > FP4_SPEC_MAX_DRAFT)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.n-draft",
                        "draft length %d is outside [1, %d]", n_draft, FP4_SPEC_MAX_DRAFT);
    if (fp4_rt_seq_pos(target, tseq) < 0 || fp4_rt_seq_pos(draft, dseq) < 0 ||
        (target == draft && tseq == dseq))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.seq",
                        "the target and draft sequences must be open (and distinct)");
    fp4_spec *s = calloc(1, sizeof *s);
    if (!s) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    const int64_t V = fp4_rt_vocab(target);
    const int64_t nc = n_draft + 1 > SPEC_CATCHUP_COLS ? n_draft + 1 : SPEC_CATCHUP_COLS;
    *s = (fp4_spec){
        .target = target, .draft = draft, .tseq = tseq, .dseq = dseq, .n_draft = n_draft, .vocab = V};
    s->cols = malloc(sizeof *s->cols * (size_t)nc);
    s->tl = malloc(sizeof(float) * (size_t)V * (size_t)(n_draft + 1));
    s->dl = malloc(sizeof(float) * (size_t)V);
    s->d = malloc(sizeof *s->d * (size_t)n_draft);
    if (!s->cols || !s->tl || !s->dl || !s->d) {
        fp4_spec_free(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    }
    *out = s;
    return FP4_OK;
}

void fp4_spec_free(fp4_spec *s) {
    if (!s) return;
    free(s->cols), free(s->tl), free(s->dl), free(s->d);
    free(s);
}

fp4_spec_stats fp4_spec_get_stats(const fp4_spec *s) {
    return s ? s->st : (fp4_spec_stats){0};
}

/* the draft's greedy pick: the largest logit, the lowest id on ties (NaN never wins) */
static int32_t argmax(const float *l, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[best] || l[best] != l[best]) best = i;
    return (int32_t)best;
}

/* the draft proposes k tokens after hist[0..p]: it first caches hist[dpos..p] (in steps of
 * SPEC_CATCHUP_COLS columns, logits of the last only), then feeds each proposal but the last */
static fp4_status draft_tokens(fp4_spec *s, const int32_t *hist, int64_t p, int64_t dpos, int64_t k,
                               fp4_error *err) {
    for (int64_t a = dpos; a <= p;) {
        const int64_t m = p + 1 - a < SPEC_CATCHUP_COLS ? p + 1 - a : SPEC_CATCHUP_COLS;
        for (int64_t j = 0; j < m; j++)
            s->cols[j] = (fp4_rt_tok){s->dseq, hist[a + j], a + j == p};
        fp4_status st = fp4_rt_step(s->draft, s->cols, m, s->dl, err);
        if (st) return st;
        a += m;
    }
    s->d[0] = argmax(s->dl, s->vocab);
    for (int64_t i = 1; i < k; i++) {
        s->cols[0] = (fp4_rt_tok){s->dseq, s->d[i - 1], 1};
        fp4_status st = fp4_rt_step(s->draft, s->cols, 1, s->dl, err);
        if (st) return st;
        s->d[i] = argmax(s->dl, s->vocab);
    }
    return FP4_OK;
}

fp4_status fp4_spec_round(fp4_spec *s, const int32_t *hist, int64_t n_hist, int64_t max_new, fp4_sampler *smp,
                          fp4_spec_emit_fn emit, void *user, int *stopped, fp4_error *err) {
    fp4_error_clear(err);
    if (stopped) *stopped = 0;
    if (!s || !hist || n_hist < 1 || max_new < 1 || !smp || !emit || !stopped)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.args",
                        "a history with a pending token, max_new >= 1, a sampler, an emit callback");
    const int64_t p = n_hist - 1; /* the pending token's position */
    const int64_t tpos = fp4_rt_seq_pos(s->target, s->tseq), dpos = fp4_rt_seq_pos(s->draft, s->dseq);
    if (tpos != p || dpos < 0 || dpos > p)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "spec.pos",
                        "the target caches %lld and the draft %lld positions; the history holds %lld tokens, "
                        "the last one pending",
                        (long long)tpos, (long long)dpos, (long long)n_hist);
    /* how many to draft: the caller's budget, then the target writes p..p+k, the draft p..p+k-1 */
    int64_t k = s->n_draft;
    if (k > max_new - 1) k = max_new - 1;
    if (k > fp4_rt_n_ctx(s->target) - 1 - p) k = fp4_rt_n_ctx(s->target) - 1 - p;
    if (k > fp4_rt_n_ctx(s->draft) - p) k = fp4_rt_n_ctx(s->draft) - p;
    if (k < 0) k = 0;
    fp4_status st = k ? draft_tokens(s, hist, p, dpos, k, err) : FP4_OK;
    if (st) return st;
    /* the target checks the pending token and every proposal in one step */
    s->cols[0] = (fp4_rt_tok){s->tseq, hist[p], 1};
    for (int64_t i = 0; i < k; i++)
        s->cols[i + 1] = (fp4_rt_tok){s->tseq, s->d[i], 1};
    if ((st = fp4_rt_step(s->target, s->cols, k + 1, s->tl, err))) return st;
    s->st.rounds++;
    s->st.drafted += k;
    /* the target's picks, in order, while they equal the proposals */
    int64_t j = 0;
    int rc = 0;
    for (;; j++) {
        const float *row = s->tl + j * s->vocab;
        const int32_t c = fp4_sampler_sample(smp, row);
        fp4_sampler_accept(smp, c);
        const int match = j < k && c == s->d[j];
        s->st.accepted += match;
        s->st.emitted++;
        rc = emit(user, c, row);
        if (rc || !match) break;
    }
    /* roll back: the target keeps the pending token and the j accepted ones; the draft keeps
     * what it cached of them (it fed the proposals but the last) */
    fp4_rt_seq_truncate(s->target, s->tseq, p + 1 + j);
    if (k) fp4_rt_seq_truncate(s->draft, s->dseq, p + 1 + (j < k - 1 ? j : k - 1));
    if (rc < 0)
        return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "spec.emit", "the emit callback failed (%d)", rc);
    *stopped = rc > 0;
    return FP4_OK;
}
