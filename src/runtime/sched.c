/* sched.c — many requests on one engine (fp4lane_runtime.h, "Generation"): continuous batching.
 * One thread owns the engine; between steps it admits queued requests (a sequence each), drops
 * the ended and cancelled ones (their sequences closed at once), and builds the next step: one
 * column per decoding request, then chunks of the new prompts in the budget left, so a long
 * prompt never stalls the running streams. Each request's tokens come from its own session
 * (session.c), whose logits row in exact mode does not depend on the other columns of the step:
 * the batch changes the speed, never a bit of any answer. */
#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include "runtime/rt_impl.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHED_QUEUE_DEFAULT 64
#define SCHED_STEP_DEFAULT 256
#define SCHED_PREFILL_MIN 16 /* prompt columns a step always leaves room for */

typedef struct sreq {
    fp4_session *s;
    uint64_t id;
    fp4_sched_done_fn done;
    void *user;
    int32_t seq; /* -1 while queued                                                */
    int cancel;
    int cached; /* the prefix cache was asked (load before its first column, store after) */
    fp4_error err;
    struct sreq *next;
} sreq;

struct fp4_sched {
    fp4_rt *rt;
    int32_t max_running, max_queue;
    int64_t step_tokens, step_prefill;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sreq *qhead, *qtail; /* waiting, in arrival order                                 */
    sreq **run;          /* in the batch, in admission order                          */
    int32_t n_run, n_queue;
    int quit;
    uint64_t next_id;
    fp4_sched_stats st;
    fp4_rt_tok *cols;
    sreq **owner; /* per want column, in column order                                   */
    float *logits;
    int32_t *gtok;
    fp4_prefix_cache *prefix;
};

static void finish(fp4_sched *s, sreq *r) {
    int64_t np, ng;
    fp4_session_counts(r->s, &np, &ng);
    if (r->seq >= 0) fp4_rt_seq_close(s->rt, r->seq);
    pthread_mutex_lock(&s->mu);
    s->st.finished++;
    s->st.prompt_tokens += np, s->st.generated_tokens += ng;
    pthread_mutex_unlock(&s->mu);
    if (r->done) r->done(r->user, fp4_session_finish(r->s), np, ng, &r->err);
    fp4_session_free(r->s);
    free(r);
}

/* Under the lock: queued requests into the batch; cancelled queued ones out (returned as a list
 * to finish outside the lock). */
static sreq *admit(fp4_sched *s) {
    sreq *gone = NULL, **pp = &s->qhead, *prev = NULL;
    while (*pp) {
        sreq *r = *pp;
        int take = r->cancel || s->quit;
        if (!take && s->n_run < s->max_running && fp4_rt_seq_open(s->rt, &r->seq) == FP4_OK) {
            s->run[s->n_run++] = r;
            take = 2;
        }
        if (!take) {
            prev = r, pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (s->qtail == r) s->qtail = prev;
        s->n_queue--;
        if (take == 1) {
            fp4_session_end(r->s, FP4_FINISH_CANCELLED);
            r->next = gone, gone = r;
        }
    }
    return gone;
}

/* The prefix cache around a request's prefill: its cached prefix loaded before its first column,
 * its prompt's blocks stored once the prompt is fed (the columns of a step that failed are not). */
static void prefix_load(fp4_sched *s, sreq *r) {
    int64_t n;
    const int32_t *ids = fp4_session_prompt(r->s, &n);
    const int64_t m = fp4_prefix_cache_load(s->prefix, s->rt, r->seq, ids, n);
    fp4_session_skip(r->s, m);
    r->cached = 1;
    pthread_mutex_lock(&s->mu);
    s->st.cached_tokens += m;
    pthread_mutex_unlock(&s->mu);
}
static void prefix_store(fp4_sched *s, sreq *r) {
    int64_t n;
    const int32_t *ids = fp4_session_prompt(r->s, &n);
    fp4_prefix_cache_store(s->prefix, s->rt, r->seq, ids, n);
    r->cached = 2;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The prompt columns of a step that carries n_dec decodes: what step_tokens leaves (at least
 * SCHED_PREFILL_MIN, so that new requests always move), and while anything decodes at most
 * step_prefill: a prompt chunk lengthens every running stream's step, so capping it trades the
 * streams' inter-token time against the new requests' first token. Exact mode's rows do not
 * depend on the chunking or the batch: the cap changes no bit of any answer. */
static int64_t prefill_budget(const fp4_sched *s, int64_t n_dec) {
    int64_t budget = s->step_tokens - n_dec;
    if (budget < SCHED_PREFILL_MIN) budget = SCHED_PREFILL_MIN;
    if (n_dec && s->step_prefill && budget > s->step_prefill) budget = s->step_prefill;
    return budget;
}

/* One step over the batch; every request of a failed step ends in error. */
static void step(fp4_sched *s) {
    int64_t n = 0, n_want = 0, n_dec = 0;
    int host = 0;
    for (int32_t i = 0; s->prefix && i < s->n_run; i++)
        if (!s->run[i]->cached && fp4_session_live(s->run[i]->s)) prefix_load(s, s->run[i]);
    for (int32_t i = 0; i < s->n_run; i++)
        if (fp4_session_live(s->run[i]->s) && __atomic_load_n(&s->run[i]->cancel, __ATOMIC_RELAXED))
            fp4_session_end(s->run[i]->s, FP4_FINISH_CANCELLED);
    /* decodes first (one column each), then prefill chunks in the budget left */
    for (int pass = 0; pass < 2; pass++) {
        const int64_t budget = prefill_budget(s, n_dec);
        for (int32_t i = 0; i < s->n_run; i++) {
            sreq *r = s->run[i];
            const int decoding = fp4_session_decoding(r->s);
            if (!fp4_session_live(r->s) || decoding != (pass == 0)) continue;
            int64_t k = fp4_session_cols(r->s, r->seq, s->cols + n, pass == 0 ? 1 : budget - (n - n_dec));
            n += k;
            if (pass == 0) n_dec += k;
            if (fp4_session_wants(r->s)) {
                s->owner[n_want++] = r;
                host |= fp4_session_host_logits(r->s);
            }
        }
    }
    if (!n) return;
    fp4_error err;
    const double t0 = now_s();
    fp4_status st = n_want && !host ? fp4_rt_step_greedy(s->rt, s->cols, n, s->gtok, &err)
                                    : fp4_rt_step(s->rt, s->cols, n, n_want ? s->logits : NULL, &err);
    const int kind = n > n_dec;
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    s->st.kind_steps[kind]++, s->st.kind_columns[kind] += n, s->st.kind_seconds[kind] += now_s() - t0;
    pthread_mutex_unlock(&s->mu);
    const int64_t V = fp4_rt_vocab(s->rt);
    for (int32_t i = 0; i < s->n_run; i++) {
        sreq *r = s->run[i];
        if (!st || !fp4_session_live(r->s)) continue;
        for (int64_t c = 0; c < n; c++)
            if (s->cols[c].seq == r->seq) {
                r->err = err;
                fp4_session_end(r->s, FP4_FINISH_ERROR);
                break;
            }
    }
    /* a prompt fed whole is stored before its first token is told: the copy is the prompt's cost
     * (its time to first token), not a gap in the stream that follows */
    for (int32_t i = 0; !st && s->prefix && i < s->n_run; i++)
        if (s->run[i]->cached == 1 && fp4_session_decoding(s->run[i]->s)) prefix_store(s, s->run[i]);
    for (int64_t w = 0; !st && w < n_want; w++)
        fp4_session_take(s->owner[w]->s, host ? s->logits + w * V : NULL, host ? 0 : s->gtok[w]);
}

static void *loop(void *arg) {
    fp4_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sreq *gone = admit(s);
        if (!gone && !s->n_run) {
            if (s->quit) break;
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        if (s->quit)
            for (int32_t i = 0; i < s->n_run; i++)
                __atomic_store_n(&s->run[i]->cancel, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&s->mu);
        while (gone) {
            sreq *nx = gone->next;
            finish(s, gone);
            gone = nx;
        }
        step(s);
        /* the ended ones leave the batch (in order: the others keep their admission order) */
        pthread_mutex_lock(&s->mu);
        int32_t k = 0;
        sreq *ended = NULL;
        for (int32_t i = 0; i < s->n_run; i++) {
            if (fp4_session_live(s->run[i]->s)) {
                s->run[k++] = s->run[i];
                continue;
            }
            s->run[i]->next = ended, ended = s->run[i];
        }
        s->n_run = k;
        pthread_mutex_unlock(&s->mu);
        while (ended) {
            sreq *nx = ended->next;
            finish(s, ended);
            ended = nx;
        }
        /* the blocks held, counted on the engine's thread (the only one that changes them) */
        int64_t used, total, block = fp4_rt_kv_blocks(s->rt, &used, &total);
        pthread_mutex_lock(&s->mu);
        s->st.kv_block = block, s->st.kv_blocks_used = used, s->st.kv_blocks_total = total;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

fp4_status fp4_sched_create(fp4_rt *rt, const fp4_sched_opts *o, fp4_sched **out, fp4_error *err) {
    if (!rt || !out) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "sched.arg", "NULL");
    *out = NULL;
    fp4_sched_opts d = {0};
    if (!o) o = &d;
    int32_t slots = rt->opts.max_seqs > 0 ? rt->opts.max_seqs : 1;
    if (o->max_running < 0 || o->max_running > slots || o->max_queue < 0 || o->max_queue > (1 << 20) ||
        o->step_tokens < 0 || o->step_tokens > (1 << 20) || o->step_prefill < 0 ||
        o->step_prefill > (1 << 20))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "sched.opts",
                        "max_running %d (the engine holds %d sequences), max_queue %d, step_tokens %lld, "
                        "step_prefill %lld",
                        o->max_running, slots, o->max_queue, (long long)o->step_tokens,
                        (long long)o->step_prefill);
    fp4_sched *s = calloc(1, sizeof *s);
    if (!s) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "sched.nomem", "out of memory");
    s->rt = rt;
    s->max_running = o->max_running ? o->max_running : slots;
    s->max_queue = o->max_queue ? o->max_queue : SCHED_QUEUE_DEFAULT;
    s->step_tokens = o->step_tokens ? o->step_tokens : SCHED_STEP_DEFAULT;
    s->step_prefill = o->step_prefill;
    s->prefix = o->prefix;
    s->st.kv_block = fp4_rt_kv_blocks(rt, &s->st.kv_blocks_used, &s->st.kv_blocks_total);
    const int64_t max_cols = s->step_tokens + s->max_running + SCHED_PREFILL_MIN;
    s->run = calloc((size_t)s->max_running, sizeof *s->run);
    s->owner = calloc((size_t)s->max_running, sizeof *s->owner);
    s->cols = malloc(sizeof *s->cols * (size_t)max_cols);
    s->logits = malloc(sizeof(float) * (size_t)fp4_rt_vocab(rt) * (size_t)s->max_running);
    s->gtok = malloc(sizeof *s->gtok * (size_t)s->max_running);
    s->next_id = 1;
    if (!s->run || !s->owner || !s->cols || !s->logits || !s->gtok) {
        free(s->run), free(s->owner), free(s->cols), free(s->logits), free(s->gtok), free(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "sched.nomem", "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, loop, s)) {
        pthread_mutex_destroy(&s->mu), pthread_cond_destroy(&s->cv);
        free(s->run), free(s->owner), free(s->cols), free(s->logits), free(s->gtok), free(s);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "sched.thread", "cannot start the thread");
    }
    *out = s;
    return FP4_OK;
}

void fp4_sched_free(fp4_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_mutex_destroy(&s->mu), pthread_cond_destroy(&s->cv);
    free(s->run), free(s->owner), free(s->cols), free(s->logits), free(s->gtok), free(s);
}

fp4_status fp4_sched_submit(fp4_sched *s, const fp4_session_req *req, fp4_session_fn fn,
                            fp4_sched_done_fn done, void *user, uint64_t *id, fp4_error *err) {
    if (!s || !req) return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "sched.arg", "NULL");
    sreq *r = calloc(1, sizeof *r);
    if (!r) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "sched.nomem", "out of memory");
    fp4_status st = fp4_session_create(s->rt, req, fn, user, &r->s, err);
    if (st) return free(r), st;
    r->done = done, r->user = user, r->seq = -1;
    pthread_mutex_lock(&s->mu);
    if (s->n_queue >= s->max_queue || s->quit) {
        int full = !s->quit;
        pthread_mutex_unlock(&s->mu);
        fp4_session_free(r->s), free(r);
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "sched.queue", "%s",
                        full ? "the queue is full" : "the scheduler is stopping");
    }
    r->id = s->next_id++;
    if (id) *id = r->id;
    if (s->qtail)
        s->qtail->next = r;
    else
        s->qhead = r;
    s->qtail = r;
    s->n_queue++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return FP4_OK;
}

void fp4_sched_cancel(fp4_sched *s, uint64_t id) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    for (sreq *r = s->qhead; r; r = r->next)
        if (r->id == id) __atomic_store_n(&r->cancel, 1, __ATOMIC_RELAXED);
    for (int32_t i = 0; i < s->n_run; i++)
        if (s->run[i]->id == id) __atomic_store_n(&s->run[i]->cancel, 1, __ATOMIC_RELAXED);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

fp4_sched_stats fp4_sched_get_stats(fp4_sched *s) {
    fp4_sched_stats st = {0};
    if (!s) return st;
    pthread_mutex_lock(&s->mu);
    st = s->st;
    st.running = s->n_run, st.queued = s->n_queue;
    pthread_mutex_unlock(&s->mu);
    return st;
}
