/* test_sched.c — the generation loop (fp4_session) and the scheduler (fp4_sched) on models/tiny,
 * CPU, exact mode. The batch-invariance property: 16 requests (different prompts, lengths,
 * sampling, seeds, stop strings, prefill chunks, log-probabilities) submitted together and
 * staggered give bit-identical tokens, text, log-probabilities and finishes to each run alone.
 * Then the queue bound, cancellation, the refusals of a request, the paged KV cache, and the
 * prefix cache (requests whose prefix came from the cache equal each alone, bit for bit). */
#include "check.h"
#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TINY_DIR "models/tiny"
#define N_REQ 16
#define MAX_OUT 64

typedef struct out {
    int32_t ids[MAX_OUT];
    float lp[MAX_OUT], top[MAX_OUT][3];
    int32_t top_id[MAX_OUT][3];
    int n;
    char text[4096];
    size_t n_text;
    fp4_finish fin;
    int64_t n_prompt, n_gen;
    int done, cancel_after; /* cancel_after > 0: the callback cancels at that token */
    /* cancel_sched: at token cancel_at the callback cancels request *cancel_id by id (a client
     * that went away, seen between two steps) */
    fp4_sched *cancel_sched;
    volatile uint64_t cancel_id;
    int cancel_at;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    fp4_prefix_cache *pc; /* not NULL: the blocks it holds when the first token comes, in pc_first */
    int64_t pc_first;
} out;

static int on_tok(void *user, const fp4_session_tok *t) {
    out *o = user;
    if (t->id >= 0 && o->n == 0 && o->pc) o->pc_first = fp4_prefix_cache_stats(o->pc).blocks;
    if (t->id >= 0 && o->n < MAX_OUT) {
        o->ids[o->n] = t->id, o->lp[o->n] = t->logprob;
        for (int k = 0; k < t->n_top && k < 3; k++)
            o->top[o->n][k] = t->top_logprobs[k], o->top_id[o->n][k] = t->top_ids[k];
        o->n++;
    }
    if (t->text && o->n_text + t->len < sizeof o->text) {
        memcpy(o->text + o->n_text, t->text, t->len);
        o->n_text += t->len;
    }
    if (o->cancel_sched && o->n == o->cancel_at) {
        for (int i = 0; i < 5000 && !o->cancel_id; i++) /* set by the submitting thread */
            nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        fp4_sched_cancel(o->cancel_sched, o->cancel_id);
    }
    return o->cancel_after && o->n >= o->cancel_after;
}

static void on_done(void *user, fp4_finish f, int64_t np, int64_t ng, const fp4_error *err) {
    out *o = user;
    (void)err;
    pthread_mutex_lock(o->mu);
    o->fin = f, o->n_prompt = np, o->n_gen = ng, o->done = 1;
    pthread_cond_broadcast(o->cv);
    pthread_mutex_unlock(o->mu);
}

static const char *prompts[N_REQ] = {
    "This section describes",
    "The configuration file",
    "To install the package, run",
    "Options",
    "The following example shows how to",
    "If the server",
    "Each line of the file",
    "Note that",
    "When the program starts, it reads the configuration file and then checks whether the",
    "A",
    "The manual page",
    "Use the --help option to",
    "The default value is",
    "Errors are reported",
    "See also",
    "The command line options are described in the following sections. The first one",
};

static fp4_session_req make_req(const fp4_tokenizer *tok, int i, int32_t **ids, const char *const *stops,
                                const int32_t *eos) {
    size_t n = 0;
    CHECK_OK(fp4_tokenizer_encode(tok, prompts[i], strlen(prompts[i]), FP4_TOK_ADD_SPECIAL, ids, &n));
    fp4_session_req r = {0};
    r.prompt = *ids, r.n_prompt = (int64_t)n;
    r.sampling = fp4_sampler_defaults();
    if (i % 3) { /* two in three sampled, each with its own seed */
        r.sampling.temperature = 0.6f + 0.1f * (float)(i % 4);
        r.sampling.top_k = i % 2 ? 40 : 0;
        r.sampling.top_p = i % 5 ? 0.9f : 1.0f;
        r.sampling.seed = 1000u + (uint64_t)i;
    }
    r.max_tokens = 8 + 3 * (i % 7);
    r.stop_ids = eos, r.n_stop_ids = 1;
    r.tok = tok;
    if (i % 4 == 1) r.stops = stops, r.n_stops = 2;
    r.logprobs = i % 2 == 0;
    r.top_logprobs = i % 4 == 0 ? 3 : 0;
    r.prefill_chunk = i % 5 == 0 ? 3 : 0;
    return r;
}

static int same(const out *a, const out *b) {
    if (a->n != b->n || a->n_text != b->n_text || memcmp(a->text, b->text, a->n_text) || a->fin != b->fin ||
        a->n_gen != b->n_gen || memcmp(a->ids, b->ids, sizeof(int32_t) * (size_t)a->n))
        return 0;
    return !memcmp(a->lp, b->lp, sizeof(float) * (size_t)a->n) &&
           !memcmp(a->top, b->top, sizeof a->top[0] * (size_t)a->n) &&
           !memcmp(a->top_id, b->top_id, sizeof a->top_id[0] * (size_t)a->n);
}

static void wait_done(out *o) {
    pthread_mutex_lock(o->mu);
    while (!o->done)
        pthread_cond_wait(o->cv, o->mu);
    pthread_mutex_unlock(o->mu);
}

/* The prompt columns a step carries while requests decode (fp4_sched_opts.step_prefill): the
 * first N_CAP requests submitted at once, uncapped and then capped at one prompt column per step
 * while anything decodes; both equal each alone bit for bit, and the cap spreads the prompts over
 * more steps. Out of range: sched.opts. */
#define N_CAP 6
static void step_prefill(fp4_rt *rt, const fp4_session_req *req, const out *alone, pthread_mutex_t *mu,
                         pthread_cond_t *cv) {
    fp4_error err;
    fp4_sched *sc = NULL;
    fp4_sched_opts so = {.max_running = N_CAP, .max_queue = N_CAP, .step_tokens = 8, .step_prefill = -1};
    CHECK(fp4_sched_create(rt, &so, &sc, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "sched.opts"));
    so.step_prefill = (1 << 20) + 1;
    CHECK(fp4_sched_create(rt, &so, &sc, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "sched.opts"));
    int64_t steps[2] = {0, 0};
    for (int capped = 0; capped < 2; capped++) {
        static out o[N_CAP];
        so.step_prefill = capped;
        CHECK_OK(fp4_sched_create(rt, &so, &sc, &err));
        if (!sc) return;
        for (int i = 0; i < N_CAP; i++) {
            memset(&o[i], 0, sizeof o[i]);
            o[i].mu = mu, o[i].cv = cv;
            CHECK_OK(fp4_sched_submit(sc, &req[i], on_tok, on_done, &o[i], NULL, &err));
        }
        int n_same = 0;
        for (int i = 0; i < N_CAP; i++) {
            wait_done(&o[i]);
            n_same += same(&alone[i], &o[i]);
        }
        CHECK_MSG(n_same == N_CAP, "step_prefill %d: %d of %d equal alone", capped, n_same, N_CAP);
        steps[capped] = fp4_sched_get_stats(sc).steps;
        fp4_sched_free(sc);
    }
    CHECK_MSG(steps[1] > steps[0], "steps: %lld uncapped, %lld capped", (long long)steps[0],
              (long long)steps[1]);
}

/* The paged KV cache: a sequence holds the blocks its positions fill, gives back those past a
 * truncation, and all of them when it is closed. */
static void paged_kv(fp4_rt *rt) {
    fp4_error err;
    int64_t used = -1, total = 0, used2 = -1;
    const int64_t B = fp4_rt_kv_blocks(rt, &used, &total);
    CHECK(B >= 16 && used == 0 && total == N_REQ * ((256 + B - 1) / B));
    int32_t seq = -1;
    CHECK_OK(fp4_rt_seq_open(rt, &seq));
    fp4_rt_tok cols[64];
    const int64_t n = B + 3 < 64 ? B + 3 : 64;
    for (int64_t i = 0; i < n; i++)
        cols[i] = (fp4_rt_tok){seq, (int32_t)(5 + i), 0};
    CHECK_OK(fp4_rt_step(rt, cols, n, NULL, &err));
    fp4_rt_kv_blocks(rt, &used, NULL);
    CHECK(used == (n + B - 1) / B);
    CHECK_OK(fp4_rt_seq_truncate(rt, seq, 1));
    fp4_rt_kv_blocks(rt, &used2, NULL);
    CHECK(used2 == 1);
    /* the cut positions are written again by the next step, and read back as written */
    CHECK_OK(fp4_rt_step(rt, cols + 1, n - 1, NULL, &err));
    fp4_rt_kv_blocks(rt, &used2, NULL);
    CHECK(used2 == used);
    fp4_rt_seq_close(rt, seq);
    fp4_rt_kv_blocks(rt, &used, NULL);
    CHECK(used == 0);
}

/* fp4_session_run_on: a conversation continued on its own sequence (the second turn's prompt is the
 * first's prompt, its answer and more) gives what the whole prompt gives on a fresh sequence; a
 * sequence that is closed or caches the whole prompt is refused */
static void run_on(fp4_rt *rt, const fp4_session_req *base, pthread_mutex_t *mu, pthread_cond_t *cv) {
    fp4_error err;
    static out t1, t2, fresh;
    t1.mu = t2.mu = fresh.mu = mu, t1.cv = t2.cv = fresh.cv = cv;
    fp4_session_req r = *base;
    r.n_stop_ids = 0, r.max_tokens = 5;
    int32_t seq = -1;
    fp4_session *s = NULL;
    CHECK_OK(fp4_rt_seq_open(rt, &seq));
    CHECK_OK(fp4_session_create(rt, &r, on_tok, &t1, &s, &err));
    if (s) CHECK_OK(fp4_session_run_on(s, seq, NULL, &err));
    fp4_session_free(s);
    CHECK(t1.n == 5 && fp4_rt_seq_pos(rt, seq) == r.n_prompt + 4); /* the last token pending */
    int32_t ids[256];
    int64_t n = 0;
    for (int64_t i = 0; i < r.n_prompt; i++)
        ids[n++] = r.prompt[i];
    for (int i = 0; i < t1.n; i++)
        ids[n++] = t1.ids[i];
    ids[n++] = 7, ids[n++] = 11; /* the next turn's own ids */
    r.prompt = ids, r.n_prompt = n, r.max_tokens = 6;
    CHECK_OK(fp4_session_create(rt, &r, on_tok, &t2, &s, &err));
    if (s) CHECK_OK(fp4_session_run_on(s, seq, NULL, &err));
    fp4_session_counts(s, &t2.n_prompt, &t2.n_gen);
    t2.fin = fp4_session_finish(s);
    fp4_session_free(s);
    CHECK_OK(fp4_session_create(rt, &r, on_tok, &fresh, &s, &err));
    if (s) CHECK_OK(fp4_session_run(s, NULL, &err));
    fp4_session_counts(s, &fresh.n_prompt, &fresh.n_gen);
    fresh.fin = fp4_session_finish(s);
    fp4_session_free(s);
    CHECK(t2.n == 6 && same(&t2, &fresh) && t2.n_prompt == n);
    /* refusals: the sequence holds the whole prompt (and more); a closed sequence */
    CHECK(fp4_rt_seq_pos(rt, seq) >= n);
    CHECK_OK(fp4_session_create(rt, &r, on_tok, &t2, &s, &err));
    CHECK(fp4_session_run_on(s, seq, NULL, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "session.seq"));
    fp4_session_free(s);
    fp4_rt_seq_close(rt, seq);
    CHECK_OK(fp4_session_create(rt, &r, on_tok, &t2, &s, &err));
    CHECK(fp4_session_run_on(s, seq, NULL, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "session.seq"));
    fp4_session_free(s);
}

/* requests sharing a prompt prefix through the prefix cache: bit-identical to each alone; an
 * engine of another mode sharing the cache never gets those blocks */
#define N_PFX 6
static void prefix_cache(const fp4_model *m, fp4_rt *rt, const fp4_tokenizer *tok, pthread_mutex_t *mu,
                         pthread_cond_t *cv) {
    fp4_error err;
    static const char *base = "The command line options are described in the following sections, each with "
                              "its default value, the environment variable that sets it and an example of "
                              "its use; the first one";
    static const char *tails[N_PFX] = {" is", " is", " sets the", " names", ". See", ""};
    const int32_t eos[1] = {1};
    int32_t *ids[N_PFX];
    fp4_session_req req[N_PFX];
    static out alone[N_PFX], cached[N_PFX], other;
    const int64_t B = fp4_rt_kv_blocks(rt, NULL, NULL);
    for (int i = 0; i < N_PFX; i++) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", base, tails[i]);
        size_t n = 0;
        CHECK_OK(fp4_tokenizer_encode(tok, text, strlen(text), FP4_TOK_ADD_SPECIAL, &ids[i], &n));
        req[i] = (fp4_session_req){.prompt = ids[i], .n_prompt = (int64_t)n, .max_tokens = 6 + i};
        req[i].sampling = fp4_sampler_defaults();
        if (i % 2) req[i].sampling.temperature = 0.7f, req[i].sampling.seed = 77u + (uint64_t)i;
        req[i].stop_ids = eos, req[i].n_stop_ids = 1, req[i].tok = tok;
        req[i].logprobs = 1, req[i].top_logprobs = 3, req[i].prefill_chunk = i == 2 ? 5 : 0;
        alone[i].mu = cached[i].mu = mu, alone[i].cv = cached[i].cv = cv;
        CHECK((int64_t)n > 2 * B); /* whole blocks to reuse */
        fp4_session *s = NULL;
        CHECK_OK(fp4_session_create(rt, &req[i], on_tok, &alone[i], &s, &err));
        if (s) CHECK_OK(fp4_session_run(s, NULL, &err));
        alone[i].fin = fp4_session_finish(s);
        fp4_session_counts(s, &alone[i].n_prompt, &alone[i].n_gen);
        fp4_session_free(s);
    }
    fp4_prefix_cache *pc = NULL;
    CHECK(fp4_prefix_cache_create(0, &pc, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "prefix.blocks"));
    CHECK_OK(fp4_prefix_cache_create(64, &pc, &err));
    fp4_sched *sc = NULL;
    fp4_sched_opts so = {.max_running = 4, .max_queue = N_PFX, .step_tokens = 8, .prefix = pc};
    CHECK_OK(fp4_sched_create(rt, &so, &sc, &err));
    if (!sc || !pc) return;
    /* the first alone fills the cache; then all (the first again: its own prefix) at once */
    other.mu = mu, other.cv = cv, other.pc = pc;
    CHECK_OK(fp4_sched_submit(sc, &req[0], on_tok, on_done, &other, NULL, &err));
    wait_done(&other);
    CHECK(same(&alone[0], &other));
    /* its prompt's blocks were stored before its first token was told (no gap after that token) */
    CHECK_MSG(other.pc_first == req[0].n_prompt / B, "%lld blocks at the first token",
              (long long)other.pc_first);
    fp4_prefix_stats ps = fp4_prefix_cache_stats(pc);
    CHECK(ps.hits == 0 && ps.blocks == (req[0].n_prompt / B));
    for (int i = 0; i < N_PFX; i++)
        CHECK_OK(fp4_sched_submit(sc, &req[i], on_tok, on_done, &cached[i], NULL, &err));
    int n_same = 0;
    for (int i = 0; i < N_PFX; i++) {
        wait_done(&cached[i]);
        n_same += same(&alone[i], &cached[i]) && cached[i].n_prompt == req[i].n_prompt;
    }
    CHECK(n_same == N_PFX);
    ps = fp4_prefix_cache_stats(pc);
    fp4_sched_stats st = fp4_sched_get_stats(sc);
    CHECK(ps.hits >= N_PFX - 1 && ps.reused_tokens >= (N_PFX - 1) * 2 * B);
    for (int i = 0; i < 200 && st.kv_blocks_used; i++) { /* counted after the last done callback */
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        st = fp4_sched_get_stats(sc);
    }
    CHECK(st.cached_tokens == ps.reused_tokens && st.kv_blocks_used == 0 && st.kv_block == B);
    fp4_sched_free(sc);
    /* another mode: the identity differs, so the same prompts find nothing */
    fp4_rt_opts o = {0};
    o.mode = FP4_MODE_NATIVE, o.n_threads = 2, o.max_seqs = 2, o.n_ctx = 256;
    fp4_rt *nrt = NULL;
    CHECK_OK(fp4_rt_create(m, &o, &nrt, &err));
    so.max_running = 2;
    if (nrt) CHECK_OK(fp4_sched_create(nrt, &so, &sc, &err));
    if (nrt && sc) {
        static out nat;
        nat.mu = mu, nat.cv = cv;
        CHECK_OK(fp4_sched_submit(sc, &req[1], on_tok, on_done, &nat, NULL, &err));
        wait_done(&nat);
        fp4_prefix_stats ps2 = fp4_prefix_cache_stats(pc);
        CHECK(ps2.hits == ps.hits && ps2.lookups == ps.lookups + 1 && nat.n_gen > 0);
        CHECK(strcmp(fp4_rt_identity(nrt), fp4_rt_identity(rt)) != 0);
        fp4_sched_free(sc);
    }
    fp4_rt_free(nrt);
    /* a cache of two blocks, one request at a time: 0 stores its first two, 1 reuses them, another
     * prompt (the last of N_PFX, made different) evicts them, 2 finds nothing; answers unchanged */
    fp4_prefix_cache_free(pc);
    CHECK_OK(fp4_prefix_cache_create(2, &pc, &err));
    so = (fp4_sched_opts){.max_running = 1, .prefix = pc};
    CHECK_OK(fp4_sched_create(rt, &so, &sc, &err));
    static const char *diff = "Every option of the program can also be given in the configuration file, "
                              "where a line holds one option and its value, and a line that starts with";
    size_t nd = 0;
    free(ids[N_PFX - 1]);
    CHECK_OK(fp4_tokenizer_encode(tok, diff, strlen(diff), FP4_TOK_ADD_SPECIAL, &ids[N_PFX - 1], &nd));
    req[N_PFX - 1].prompt = ids[N_PFX - 1], req[N_PFX - 1].n_prompt = (int64_t)nd;
    CHECK((int64_t)nd > 2 * B);
    fp4_session *s1 = NULL;
    memset(&alone[N_PFX - 1], 0, sizeof alone[0]);
    CHECK_OK(fp4_session_create(rt, &req[N_PFX - 1], on_tok, &alone[N_PFX - 1], &s1, &err));
    if (s1) CHECK_OK(fp4_session_run(s1, NULL, &err));
    alone[N_PFX - 1].fin = fp4_session_finish(s1);
    fp4_session_counts(s1, &alone[N_PFX - 1].n_prompt, &alone[N_PFX - 1].n_gen);
    fp4_session_free(s1);
    static out small[4];
    const int order[4] = {0, 1, N_PFX - 1, 2};
    for (int i = 0; sc && i < 4; i++) {
        small[i].mu = mu, small[i].cv = cv;
        CHECK_OK(fp4_sched_submit(sc, &req[order[i]], on_tok, on_done, &small[i], NULL, &err));
        wait_done(&small[i]);
        CHECK(same(&alone[order[i]], &small[i]));
    }
    ps = fp4_prefix_cache_stats(pc);
    CHECK(ps.blocks == 2 && ps.evicted == 4 && ps.hits == 1 && ps.lookups == 4);
    CHECK(ps.recycled == 4); /* every block stored into the full cache took the evicted one's buffers */
    CHECK(ps.store_seconds > 0 && ps.load_seconds > 0);
    fp4_sched_free(sc);
    fp4_prefix_cache_free(pc);
    for (int i = 0; i < N_PFX; i++)
        free(ids[i]);
}

int main(void) {
    fp4_error err;
    fp4_model *m = NULL;
    fp4_tokenizer *tok = NULL;
    fp4_rt *rt = NULL;
    CHECK_OK(fp4_model_open(TINY_DIR, NULL, &m, &err));
    CHECK_OK(fp4_tokenizer_load(TINY_DIR, &tok, &err));
    if (!m || !tok) return check_report();
    fp4_rt_opts o = {0};
    o.mode = FP4_MODE_EXACT, o.n_threads = 2, o.max_seqs = N_REQ, o.n_ctx = 256;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &err));
    if (!rt) return check_report();
    const int32_t eos[1] = {1};
    const char *stops[2] = {".", " the"};
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    static out alone[N_REQ], batch[N_REQ];
    int32_t *ids[N_REQ];
    fp4_session_req req[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        req[i] = make_req(tok, i, &ids[i], stops, eos);
        alone[i].mu = batch[i].mu = &mu, alone[i].cv = batch[i].cv = &cv;
    }
    /* each alone: fp4_session_run on its own sequence */
    for (int i = 0; i < N_REQ; i++) {
        fp4_session *s = NULL;
        CHECK_OK(fp4_session_create(rt, &req[i], on_tok, &alone[i], &s, &err));
        if (!s) continue;
        CHECK_OK(fp4_session_run(s, NULL, &err));
        alone[i].fin = fp4_session_finish(s);
        fp4_session_counts(s, &alone[i].n_prompt, &alone[i].n_gen);
        CHECK(alone[i].fin == FP4_FINISH_STOP || alone[i].fin == FP4_FINISH_LENGTH);
        CHECK(alone[i].n_prompt == req[i].n_prompt);
        fp4_session_free(s);
    }
    int stopped_by_string = 0, with_text = 0;
    for (int i = 0; i < N_REQ; i++)
        stopped_by_string += alone[i].fin == FP4_FINISH_STOP && req[i].n_stops,
            with_text += alone[i].n_text > 0;
    CHECK(stopped_by_string >= 1); /* the stop strings are exercised */
    CHECK(with_text >= N_REQ - 2);
    /* together: half submitted at once, the rest while those decode; small steps force chunked
     * prefill interleaved with decodes */
    fp4_sched *sc = NULL;
    fp4_sched_opts so = {.max_running = 6, .max_queue = N_REQ, .step_tokens = 8};
    CHECK_OK(fp4_sched_create(rt, &so, &sc, &err));
    if (!sc) return check_report();
    for (int i = 0; i < N_REQ; i++) {
        if (i == N_REQ / 2) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        uint64_t id;
        CHECK_OK(fp4_sched_submit(sc, &req[i], on_tok, on_done, &batch[i], &id, &err));
    }
    for (int i = 0; i < N_REQ; i++)
        wait_done(&batch[i]);
    int n_same = 0;
    for (int i = 0; i < N_REQ; i++) {
        int ok = same(&alone[i], &batch[i]);
        n_same += ok;
        if (!ok)
            fprintf(stderr, "request %d differs: %d/%d tokens, finish %d/%d, text '%.*s' / '%.*s'\n", i,
                    alone[i].n, batch[i].n, alone[i].fin, batch[i].fin, (int)alone[i].n_text, alone[i].text,
                    (int)batch[i].n_text, batch[i].text);
    }
    CHECK(n_same == N_REQ);
    fp4_sched_stats st = fp4_sched_get_stats(sc);
    CHECK(st.finished == N_REQ && st.running == 0 && st.queued == 0);
    CHECK(st.steps < 16 * 30); /* batched: fewer steps than the requests' steps one by one */
    /* the steps apart: with prompt columns and decode columns only, every column counted, timed */
    int64_t n_prompt = 0;
    for (int i = 0; i < N_REQ; i++)
        n_prompt += req[i].n_prompt;
    CHECK(st.kind_steps[0] >= 1 && st.kind_steps[1] >= 1 && st.kind_steps[0] + st.kind_steps[1] == st.steps);
    /* a request feeds its prompt and every token it generated but the last */
    CHECK(st.kind_columns[1] >= n_prompt &&
          st.kind_columns[0] + st.kind_columns[1] == n_prompt + st.generated_tokens - N_REQ);
    CHECK(st.kind_seconds[0] > 0 && st.kind_seconds[1] > 0);

    step_prefill(rt, req, alone, &mu, &cv);

    /* cancellation: by the callback, and by id (the request ends before its budget) */
    static out c1, c2;
    c1.mu = c2.mu = &mu, c1.cv = c2.cv = &cv;
    c1.cancel_after = 2;
    fp4_session_req rc = req[0];
    rc.max_tokens = 100, rc.n_stop_ids = 0;
    uint64_t id2;
    CHECK_OK(fp4_sched_submit(sc, &rc, on_tok, on_done, &c1, NULL, &err));
    CHECK_OK(fp4_sched_submit(sc, &rc, on_tok, on_done, &c2, &id2, &err));
    fp4_sched_cancel(sc, id2);
    wait_done(&c1), wait_done(&c2);
    CHECK(c1.fin == FP4_FINISH_CANCELLED && c1.n == 2);
    CHECK(c2.fin == FP4_FINISH_CANCELLED && c2.n < 100);
    /* a cancel by id ends the request before the next step: no token after it */
    static out c3;
    c3.mu = &mu, c3.cv = &cv, c3.cancel_sched = sc, c3.cancel_at = 3;
    uint64_t id3 = 0;
    CHECK_OK(fp4_sched_submit(sc, &rc, on_tok, on_done, &c3, &id3, &err));
    c3.cancel_id = id3;
    wait_done(&c3);
    CHECK(c3.fin == FP4_FINISH_CANCELLED && c3.n == 3 && c3.n_gen == 3);
    CHECK(!strcmp(fp4_finish_name(FP4_FINISH_LENGTH), "length"));

    /* refusals: a prompt past the context, an id outside the vocabulary, top_logprobs > 20 */
    fp4_session_req bad = req[0];
    bad.max_tokens = 300;
    CHECK(fp4_sched_submit(sc, &bad, on_tok, on_done, &c1, NULL, &err) == FP4_ERR_LIMIT);
    CHECK(!strcmp(err.rule, "rt.context"));
    int32_t big = 99999;
    bad = req[0], bad.prompt = &big, bad.n_prompt = 1;
    CHECK(fp4_sched_submit(sc, &bad, on_tok, on_done, &c1, NULL, &err) == FP4_ERR_INVALID_ARG);
    CHECK(!strcmp(err.rule, "session.token"));
    bad = req[0], bad.top_logprobs = 21;
    CHECK(fp4_sched_submit(sc, &bad, on_tok, on_done, &c1, NULL, &err) == FP4_ERR_INVALID_ARG);
    CHECK(!strcmp(err.rule, "session.top-logprobs"));
    fp4_sched_free(sc);

    /* the queue bound: one running, one queued, the next refused (sched.queue) */
    so = (fp4_sched_opts){.max_running = 1, .max_queue = 1, .step_tokens = 8};
    CHECK_OK(fp4_sched_create(rt, &so, &sc, &err));
    static out q[3];
    fp4_session_req rl = req[0];
    rl.max_tokens = 200, rl.n_stop_ids = 0;
    int refused = 0;
    for (int i = 0; i < 3; i++) {
        q[i].mu = &mu, q[i].cv = &cv;
        fp4_status s2 = fp4_sched_submit(sc, &rl, on_tok, on_done, &q[i], NULL, &err);
        if (s2 == FP4_ERR_LIMIT && !strcmp(err.rule, "sched.queue")) refused++, q[i].done = 1;
        if (i == 0) /* wait until it runs, so that the queue holds the next one only */
            while (fp4_sched_get_stats(sc).running == 0)
                nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    }
    CHECK(refused == 1);
    fp4_sched_free(sc); /* the rest end cancelled */
    for (int i = 0; i < 3; i++)
        wait_done(&q[i]);
    CHECK(q[0].fin == FP4_FINISH_CANCELLED || q[0].fin == FP4_FINISH_LENGTH);

    paged_kv(rt);
    run_on(rt, &req[0], &mu, &cv);
    prefix_cache(m, rt, tok, &mu, &cv);
    for (int i = 0; i < N_REQ; i++)
        free(ids[i]);
    fp4_rt_free(rt);
    fp4_tokenizer_free(tok);
    fp4_model_close(m);
    return check_report();
}
