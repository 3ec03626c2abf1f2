/* session.c — one request's generation loop (fp4lane_runtime.h, "Generation"): prefill in chunks,
 * the request's sampler (or the device's greedy choice), log-probabilities, stop ids, streamed text
 * through the detokenizer and the stop strings, the budget, cancellation. fp4_session_run drives
 * it alone; fp4_sched (sched.c) drives many through the same pieces (rt_impl.h), so a request
 * takes the same path whoever runs it. */
#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include "runtime/rt_impl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_CHUNK 256 /* default prefill positions per step (cmd_run's default) */

struct fp4_session {
    fp4_rt *rt;
    int64_t vocab;
    int32_t *prompt;
    int64_t n_prompt, n_fed; /* prompt ids sent to the engine so far                     */
    int64_t chunk, max_tokens, n_gen;
    int32_t stop_ids[FP4_SESSION_MAX_STOP_IDS];
    int32_t n_stop_ids, logprobs, top_n, n_top; /* n_top: alternatives of the last token */
    fp4_sampler *smp;
    fp4_detok_stream *ds; /* NULL without a tokenizer                                   */
    fp4_stop_filter *sf;
    fp4_session_fn fn;
    void *user;
    int32_t pending; /* the last emitted token, fed by the next step                 */
    int want;        /* the columns of the current step end with a want_logits one   */
    fp4_finish finish;
    int32_t top_ids[FP4_SESSION_MAX_TOP_LOGPROBS];
    float top_lp[FP4_SESSION_MAX_TOP_LOGPROBS];
    fp4_rt_tok *cols; /* fp4_session_run's step: chunk + 1 columns                  */
    float *logits;    /* fp4_session_run's logits row                               */
    fp4_rt *draft;    /* speculative decoding's draft engine (borrowed), or NULL     */
    int32_t n_draft;
    int32_t *hist;    /* with a draft: the prompt, then every emitted token          */
    fp4_spec_stats spec;
};

const char *fp4_finish_name(fp4_finish f) {
    static const char *const names[] = {"", "stop", "length", "cancelled", "error"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "";
}

void fp4_session_free(fp4_session *s) {
    if (!s) return;
    fp4_sampler_free(s->smp);
    fp4_detok_stream_free(s->ds);
    fp4_stop_filter_free(s->sf);
    free(s->prompt), free(s->cols), free(s->logits), free(s->hist), free(s);
}

static fp4_status check_req(const fp4_rt *rt, const fp4_session_req *r, fp4_error *err) {
    if (!r->prompt || r->n_prompt < 1)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.prompt", "the prompt is empty");
    if (r->max_tokens < 1)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.max-tokens",
                        "max_tokens %lld: at least 1", (long long)r->max_tokens);
    for (int64_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= fp4_rt_vocab(rt))
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.token",
                            "prompt token id %d is outside the vocabulary [0, %lld)", r->prompt[i],
                            (long long)fp4_rt_vocab(rt));
    if (r->n_stop_ids < 0 || r->n_stop_ids > FP4_SESSION_MAX_STOP_IDS || (r->n_stop_ids && !r->stop_ids))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.stop-ids", "%d stop ids: at most %d",
                        r->n_stop_ids, FP4_SESSION_MAX_STOP_IDS);
    if (r->n_stops < 0 || (r->n_stops && (!r->tok || !r->stops)))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.stops",
                        "stop strings need a tokenizer");
    if (r->top_logprobs < 0 || r->top_logprobs > FP4_SESSION_MAX_TOP_LOGPROBS)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.top-logprobs",
                        "top_logprobs %d: 0 to %d", r->top_logprobs, FP4_SESSION_MAX_TOP_LOGPROBS);
    if (r->prefill_chunk < 0 || r->prefill_chunk > (1 << 20))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.prefill-chunk",
                        "prefill_chunk %lld: 0 to 2^20", (long long)r->prefill_chunk);
    return fp4_rt_check_room(rt, -1, r->n_prompt, r->max_tokens, err);
}

fp4_status fp4_session_create(fp4_rt *rt, const fp4_session_req *req, fp4_session_fn fn, void *user,
                              fp4_session **out, fp4_error *err) {
    if (!rt || !req || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.arg", "NULL");
    *out = NULL;
    fp4_status st = check_req(rt, req, err);
    if (st) return st;
    fp4_session *s = calloc(1, sizeof *s);
    if (!s) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "session.nomem", "out of memory");
    s->rt = rt, s->vocab = fp4_rt_vocab(rt), s->fn = fn, s->user = user;
    s->n_prompt = req->n_prompt, s->max_tokens = req->max_tokens;
    s->chunk = req->prefill_chunk > 0 ? req->prefill_chunk
                                      : (req->n_prompt < SESSION_CHUNK ? req->n_prompt : SESSION_CHUNK);
    s->n_stop_ids = req->n_stop_ids;
    if (req->n_stop_ids) memcpy(s->stop_ids, req->stop_ids, sizeof(int32_t) * (size_t)req->n_stop_ids);
    s->logprobs = req->logprobs || req->top_logprobs;
    s->top_n = req->top_logprobs;
    s->prompt = malloc(sizeof(int32_t) * (size_t)req->n_prompt);
    s->cols = malloc(sizeof *s->cols * (size_t)(s->chunk + 1));
    s->logits = malloc(sizeof(float) * (size_t)s->vocab);
    if (!s->prompt || !s->cols || !s->logits) {
        fp4_session_free(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "session.nomem", "out of memory");
    }
    memcpy(s->prompt, req->prompt, sizeof(int32_t) * (size_t)req->n_prompt);
    if ((st = fp4_sampler_create(&req->sampling, s->vocab, &s->smp))) {
        fp4_session_free(s);
        return fp4_fail(err, st, NULL, NULL, "session.sampling", "sampling parameters out of range");
    }
    for (int64_t i = 0; i < s->n_prompt; i++)
        fp4_sampler_accept(s->smp, s->prompt[i]);
    if (req->tok) {
        if ((st = fp4_stop_filter_create(req->stops, (size_t)req->n_stops, &s->sf, err)) ||
            (st = fp4_detok_stream_create(req->tok, FP4_TOK_SKIP_SPECIAL, &s->ds))) {
            fp4_session_free(s);
            return st == FP4_ERR_NOMEM ? fp4_fail(err, st, NULL, NULL, "session.nomem", "out of memory") : st;
        }
    }
    *out = s;
    return FP4_OK;
}

fp4_finish fp4_session_finish(const fp4_session *s) {
    return s ? s->finish : FP4_FINISH_ERROR;
}
void fp4_session_counts(const fp4_session *s, int64_t *n_prompt, int64_t *n_gen) {
    if (n_prompt) *n_prompt = s ? s->n_fed : 0;
    if (n_gen) *n_gen = s ? s->n_gen : 0;
}

int fp4_session_live(const fp4_session *s) {
    return s->finish == FP4_FINISH_NONE;
}
int fp4_session_host_logits(const fp4_session *s) {
    return s->logprobs || !fp4_sampler_is_greedy(s->smp);
}
int fp4_session_decoding(const fp4_session *s) {
    return s->n_fed == s->n_prompt;
}
int fp4_session_wants(const fp4_session *s) {
    return s->want;
}
const int32_t *fp4_session_prompt(const fp4_session *s, int64_t *n) {
    *n = s->n_prompt;
    return s->prompt;
}
void fp4_session_skip(fp4_session *s, int64_t n) {
    if (s->n_fed == 0 && n > 0 && n < s->n_prompt) s->n_fed = n;
}

int64_t fp4_session_cols(fp4_session *s, int32_t seq, fp4_rt_tok *cols, int64_t budget) {
    s->want = 0;
    if (s->finish || budget < 1) return 0;
    if (s->n_fed < s->n_prompt) {
        int64_t k = s->n_prompt - s->n_fed;
        k = k < s->chunk ? k : s->chunk;
        k = k < budget ? k : budget;
        for (int64_t i = 0; i < k; i++)
            cols[i] = (fp4_rt_tok){seq, s->prompt[s->n_fed + i], 0};
        s->n_fed += k;
        if (s->n_fed == s->n_prompt) cols[k - 1].want_logits = 1, s->want = 1;
        return k;
    }
    cols[0] = (fp4_rt_tok){seq, s->pending, 1};
    s->want = 1;
    return 1;
}

/* log-softmax of the raw logits in double (one fixed order: the same bits for the same row), and
 * the top_n best ids (ties: lower id first) */
static float logprobs(fp4_session *s, const float *lg, int32_t tok) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < s->vocab; i++)
        if (lg[i] > m) m = lg[i];
    for (int64_t i = 0; i < s->vocab; i++)
        if (isfinite(lg[i])) sum += exp((double)lg[i] - m);
    const double lse = m + log(sum);
    int32_t n = 0;
    for (int64_t i = 0; i < s->vocab && s->top_n; i++) {
        if (!isfinite(lg[i]) || (n == s->top_n && !(lg[i] > lg[s->top_ids[n - 1]]))) continue;
        int32_t j = n < s->top_n ? n++ : n - 1;
        while (j > 0 && lg[i] > lg[s->top_ids[j - 1]]) {
            s->top_ids[j] = s->top_ids[j - 1];
            j--;
        }
        s->top_ids[j] = (int32_t)i;
    }
    for (int32_t j = 0; j < n; j++)
        s->top_lp[j] = (float)((double)lg[s->top_ids[j]] - lse);
    s->n_top = n;
    return isfinite(lg[tok]) ? (float)((double)lg[tok] - lse) : -INFINITY;
}

static int is_stop_id(const fp4_session *s, int32_t t) {
    for (int32_t i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == t) return 1;
    return 0;
}

static void end_text(fp4_session *s) {
    if (!s->ds || fp4_stop_filter_stopped(s->sf)) return;
    const char *t, *o1 = NULL, *o2 = NULL;
    size_t n, n1 = 0, n2 = 0;
    int stopped = 0;
    if (fp4_detok_stream_flush(s->ds, &t, &n) || fp4_stop_filter_push(s->sf, t, n, &o1, &n1, &stopped))
        return;
    char *buf = NULL;
    if (!stopped) {
        /* o1 is valid until the next call on the filter: keep it before the flush */
        if (n1 && !(buf = malloc(n1))) return;
        if (n1) memcpy(buf, o1, n1);
        if (fp4_stop_filter_flush(s->sf, &o2, &n2)) n2 = 0;
    }
    size_t total = n1 + n2;
    char *all = total ? malloc(total) : NULL;
    if (all) {
        if (n1) memcpy(all, stopped ? o1 : buf, n1);
        if (n2) memcpy(all + n1, o2, n2);
        fp4_session_tok e = {.id = -1, .text = all, .len = total};
        if (s->fn) s->fn(s->user, &e);
    }
    free(all), free(buf);
}

void fp4_session_end(fp4_session *s, fp4_finish f) {
    if (s->finish) return;
    s->finish = f;
    if (f == FP4_FINISH_STOP || f == FP4_FINISH_LENGTH) end_text(s);
}

/* A token leaves the engine: reported, then it ends the request or is fed by the next step.
 * accepted: a speculative round told the sampler already. */
static void emit(fp4_session *s, int32_t tok, const float *lg, int accepted) {
    fp4_session_tok e = {.id = tok, .text = s->ds ? "" : NULL};
    if (s->logprobs && lg) {
        e.logprob = logprobs(s, lg, tok);
        e.n_top = s->n_top, e.top_ids = s->top_ids, e.top_logprobs = s->top_lp;
    }
    if (s->hist) s->hist[s->n_prompt + s->n_gen] = tok;
    s->n_gen++;
    if (!accepted) fp4_sampler_accept(s->smp, tok);
    int stopped = 0;
    if (is_stop_id(s, tok))
        e.end = 1;
    else if (s->ds) {
        const char *t;
        size_t n;
        fp4_error err;
        if (fp4_detok_stream_push(s->ds, tok, &t, &n, &err) ||
            fp4_stop_filter_push(s->sf, t, n, &e.text, &e.len, &stopped)) {
            fp4_session_end(s, FP4_FINISH_ERROR);
            return;
        }
    }
    if (s->fn && s->fn(s->user, &e))
        fp4_session_end(s, FP4_FINISH_CANCELLED);
    else if (e.end || stopped)
        fp4_session_end(s, FP4_FINISH_STOP);
    else if (s->n_gen == s->max_tokens)
        fp4_session_end(s, FP4_FINISH_LENGTH);
    else
        s->pending = tok;
}

void fp4_session_take(fp4_session *s, const float *lg, int32_t greedy) {
    if (!s->want || s->finish) return;
    s->want = 0;
    emit(s, lg ? fp4_sampler_sample(s->smp, lg) : greedy, lg, 0);
}

fp4_status fp4_session_set_draft(fp4_session *s, fp4_rt *draft, int32_t n_draft, fp4_error *err) {
    if (!s || !draft) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.arg", "NULL");
    if (s->n_fed || s->finish)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.draft",
                        "a draft is set before the session runs");
    int32_t *h = realloc(s->hist, sizeof(int32_t) * (size_t)(s->n_prompt + s->max_tokens));
    if (!h) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "session.nomem", "out of memory");
    memcpy(h, s->prompt, sizeof(int32_t) * (size_t)s->n_prompt);
    s->hist = h, s->draft = draft, s->n_draft = n_draft;
    return FP4_OK;
}
fp4_spec_stats fp4_session_spec_stats(const fp4_session *s) {
    return s ? s->spec : (fp4_spec_stats){0};
}

/* a round's token: the loop's own emit (the round sampled it and told the sampler); 1 ends the
 * round when the request ended */
static int spec_emit(void *user, int32_t tok, const float *row) {
    fp4_session *s = user;
    emit(s, tok, row, 1);
    return s->finish != FP4_FINISH_NONE;
}

/* After the first token: rounds of fp4_spec_round until the request ends. The draft catches up
 * with the prompt in the first round (fp4_spec_round), on a sequence of its own. */
static fp4_status spec_decode(fp4_session *s, int32_t seq, const volatile int *cancel, fp4_error *err) {
    int32_t dseq;
    fp4_status st = fp4_rt_seq_open(s->draft, &dseq);
    if (st) return fp4_fail(err, st, NULL, NULL, "session.seq", "no free sequence in the draft engine");
    fp4_spec *sp = NULL;
    st = fp4_spec_create(s->rt, seq, s->draft, dseq, s->n_draft, &sp, err);
    while (!st && !s->finish) {
        if (cancel && *cancel) {
            fp4_session_end(s, FP4_FINISH_CANCELLED);
            break;
        }
        int stopped = 0;
        st = fp4_spec_round(sp, s->hist, s->n_prompt + s->n_gen, s->max_tokens - s->n_gen, s->smp, spec_emit,
                            s, &stopped, err);
    }
    if (st) fp4_session_end(s, FP4_FINISH_ERROR);
    s->spec = fp4_spec_get_stats(sp);
    fp4_spec_free(sp);
    fp4_rt_seq_close(s->draft, dseq);
    return st;
}

fp4_status fp4_session_run(fp4_session *s, const volatile int *cancel, fp4_error *err) {
    if (!s) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.arg", "NULL");
    int32_t seq;
    fp4_status st = fp4_rt_seq_open(s->rt, &seq);
    if (st) return fp4_fail(err, st, NULL, NULL, "session.seq", "no free sequence in the engine");
    st = fp4_session_run_on(s, seq, cancel, err);
    fp4_rt_seq_close(s->rt, seq);
    return st;
}

fp4_status fp4_session_run_on(fp4_session *s, int32_t seq, const volatile int *cancel, fp4_error *err) {
    if (!s) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.arg", "NULL");
    const int64_t cached = fp4_rt_seq_pos(s->rt, seq);
    if (cached < 0 || cached >= s->n_prompt || s->n_fed || s->finish)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "session.seq",
                        "sequence %d caches %lld positions: it must be open and hold fewer than the "
                        "prompt's %lld, and the session must not have run",
                        seq, (long long)cached, (long long)s->n_prompt);
    s->n_fed = cached; /* those ids are in the cache already (the sampler saw the whole prompt) */
    fp4_status st = FP4_OK;
    const int host = fp4_session_host_logits(s);
    while (!s->finish) {
        if (cancel && *cancel) {
            fp4_session_end(s, FP4_FINISH_CANCELLED);
            break;
        }
        if (s->draft && s->n_gen) {
            st = spec_decode(s, seq, cancel, err);
            break;
        }
        int64_t n = fp4_session_cols(s, seq, s->cols, s->chunk + 1);
        int32_t g = 0;
        if (s->want && !host)
            st = fp4_rt_step_greedy(s->rt, s->cols, n, &g, err);
        else
            st = fp4_rt_step(s->rt, s->cols, n, s->want ? s->logits : NULL, err);
        if (st) {
            fp4_session_end(s, FP4_FINISH_ERROR);
            break;
        }
        fp4_session_take(s, s->want && host ? s->logits : NULL, g);
    }
    return st;
}
