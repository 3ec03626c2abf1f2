/* test_runtime_spec.c — speculative decoding (fp4_spec, `fp4lane run --draft`). On every route the
 * table qualifies for drafting (exact NVFP4 A16 and W4A4, exact dense, the kquant lane in both
 * modes) a speculative generation equals plain decoding bit for bit: the same tokens, every logit
 * of every position processed, the same KV snapshot afterwards — greedy and seeded sampling (with
 * a repetition penalty, so the sampler's history order matters), threads 1/2, draft lengths 1/3/8,
 * a draft that is the target itself (every proposal accepted) and a foreign draft (most rejected:
 * the roll-back paths). Drafting near the context length never writes past it; a draft with a
 * shorter context stops drafting. Refusals: the route table (native NVFP4, native dense), a target
 * not created for drafting, a vocabulary mismatch, bad draft lengths, a history that does not
 * match the caches, a failing emit callback; and the CLI's (usage, vocabulary, tokenizer). */
#include "check.h"
#include "cli_util.h"
#include "rt_data.h"
#include "rt_fixture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NGEN = 24, NCTX = 64, MAXROWS = 64 };
static char tmp[512], bin[512];
static const int32_t prompt[] = {3, 17, 101, 250, 42, 7};
#define PLEN ((int)(sizeof prompt / sizeof prompt[0]))

typedef struct cfg {
    const char *target, *draft; /* draft NULL: plain decoding */
    fp4_mode mode;
    int threads, k, sampled, n_gen;
    int64_t n_ctx, draft_ctx;
} cfg;

typedef struct gen {
    int32_t tok[MAXROWS];
    int n_tok;
    float *rows; /* MAXROWS * V: the target's logits of every position processed */
    int64_t n_rows, V;
    fp4_spec_stats st;
    char kv[700];
    int failed;
} gen;

static fp4_rt *engine(const char *path, fp4_model **m, fp4_mode mode, int threads, int64_t n_ctx,
                      int drafting) {
    fp4_error e;
    fp4_rt *rt = NULL;
    *m = NULL;
    CHECK_OK(fp4_model_open(path, NULL, m, &e));
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = n_ctx, .drafting = drafting};
    fp4_status st = *m ? fp4_rt_create(*m, &o, &rt, &e) : FP4_ERR_INVALID_ARG;
    CHECK_MSG(st == FP4_OK, "%s: %s %s", path, fp4_status_str(st), e.msg);
    return rt;
}

static fp4_sampler_params params(const cfg *c) {
    fp4_sampler_params p = fp4_sampler_defaults();
    if (c->sampled)
        p.temperature = 0.8f, p.top_k = 40, p.top_p = 0.9f, p.repeat_penalty = 1.1f, p.penalty_last_n = 16,
        p.seed = 7;
    return p;
}

static fp4_sampler *sampler(const cfg *c, int64_t V) {
    fp4_sampler_params p = params(c);
    fp4_sampler *s = NULL;
    CHECK_OK(fp4_sampler_create(&p, V, &s));
    for (int i = 0; s && i < PLEN; i++)
        fp4_sampler_accept(s, prompt[i]);
    return s;
}

static int add_row(gen *g, const float *row) {
    if (g->n_rows == MAXROWS) return -1;
    memcpy(g->rows + g->n_rows++ * g->V, row, sizeof(float) * (size_t)g->V);
    return 0;
}
static int on_emit(void *user, int32_t token, const float *row) {
    gen *g = user;
    if (add_row(g, row)) return -1;
    g->tok[g->n_tok++] = token;
    return 0;
}
static int n_gen_of(const cfg *c) {
    return c->n_gen ? c->n_gen : NGEN;
}
typedef struct emit_ctx {
    gen *g;
    int32_t *hist;
    int64_t n_hist;
    int n_gen;
} emit_ctx;
static int on_emit_hist(void *user, int32_t token, const float *row) {
    emit_ctx *c = user;
    if (on_emit(c->g, token, row)) return -1;
    c->hist[c->n_hist++] = token;
    return c->g->n_tok == c->n_gen;
}

/* plain decoding as `fp4lane run` does it (one prefill step, then one column per step), or the
 * speculative loop of tools/run_spec.c; the target's snapshot saved at the end */
static void generate(const cfg *c, gen *g, const char *tag) {
    memset(g, 0, sizeof *g);
    fp4_model *m = NULL, *dm = NULL;
    fp4_rt *rt = engine(c->target, &m, c->mode, c->threads, c->n_ctx ? c->n_ctx : NCTX, c->draft != NULL);
    fp4_rt *dr =
        c->draft ? engine(c->draft, &dm, c->mode, c->threads, c->draft_ctx ? c->draft_ctx : NCTX, 0) : NULL;
    fp4_error e;
    g->failed = 1;
    if (!rt || (c->draft && !dr)) goto out;
    g->V = fp4_rt_vocab(rt);
    g->rows = malloc(sizeof(float) * (size_t)(MAXROWS * g->V));
    fp4_sampler *smp = sampler(c, g->V);
    int32_t seq, dseq = 0;
    CHECK_OK(fp4_rt_seq_open(rt, &seq));
    fp4_rt_tok cols[PLEN];
    for (int i = 0; i < PLEN; i++)
        cols[i] = (fp4_rt_tok){seq, prompt[i], 1};
    CHECK_OK(fp4_rt_step(rt, cols, PLEN, g->rows, &e));
    g->n_rows = PLEN;
    int32_t next = fp4_sampler_sample(smp, g->rows + (PLEN - 1) * g->V);
    const int n_gen = n_gen_of(c);
    if (!dr) {
        for (int i = 0; i < n_gen; i++) {
            g->tok[g->n_tok++] = next;
            fp4_sampler_accept(smp, next);
            if (i + 1 == n_gen) break;
            fp4_rt_tok t = {seq, next, 1};
            float *row = g->rows + g->n_rows * g->V;
            if (g->n_rows == MAXROWS || fp4_rt_step(rt, &t, 1, row, &e)) goto done;
            g->n_rows++;
            next = fp4_sampler_sample(smp, row);
        }
    } else {
        CHECK_OK(fp4_rt_seq_open(dr, &dseq));
        for (int i = 0; i < PLEN; i++)
            cols[i] = (fp4_rt_tok){dseq, prompt[i], 0};
        CHECK_OK(fp4_rt_step(dr, cols, PLEN, NULL, &e));
        fp4_spec *sp = NULL;
        CHECK_OK(fp4_spec_create(rt, seq, dr, dseq, c->k, &sp, &e));
        int32_t hist[PLEN + MAXROWS];
        memcpy(hist, prompt, sizeof prompt);
        emit_ctx ec = {g, hist, PLEN, n_gen};
        g->tok[g->n_tok++] = next, hist[ec.n_hist++] = next;
        fp4_sampler_accept(smp, next);
        int stop = n_gen == 1;
        while (sp && !stop) {
            fp4_status st =
                fp4_spec_round(sp, hist, ec.n_hist, n_gen - g->n_tok, smp, on_emit_hist, &ec, &stop, &e);
            CHECK_MSG(st == FP4_OK, "%s: round: %s %s", tag, fp4_status_str(st), e.msg);
            if (st) goto done;
        }
        g->st = fp4_spec_get_stats(sp);
        fp4_spec_free(sp);
        CHECK_EQ_INT(fp4_rt_seq_pos(rt, seq), PLEN + n_gen - 1); /* the last token pending, as plain */
    }
    snprintf(g->kv, sizeof g->kv, "%s/kv-%d", tmp, (int)getpid());
    CHECK_OK(fp4_rt_kv_save(rt, seq, g->kv, &e));
    g->failed = 0;
done:
    fp4_sampler_free(smp);
out:
    fp4_rt_free(dr), fp4_rt_free(rt);
    fp4_model_close(dm), fp4_model_close(m);
}

/* the library's generation loop (fp4_session: `fp4lane run`'s one prompt, the server's requests) on
 * a plain engine, the prompt as one step: the ids speculative decoding must give too */
static int loop_id(void *user, const fp4_session_tok *t) {
    gen *g = user;
    if (t->id >= 0 && g->n_tok < MAXROWS) g->tok[g->n_tok++] = t->id;
    return 0;
}
static void loop_tokens(const cfg *c, gen *g, int with_draft) {
    memset(g, 0, sizeof *g);
    g->failed = 1;
    fp4_model *m = NULL, *dm = NULL;
    const int spec = with_draft && c->draft;
    fp4_rt *rt = engine(c->target, &m, c->mode, c->threads, c->n_ctx ? c->n_ctx : NCTX, spec);
    fp4_rt *dr =
        spec ? engine(c->draft, &dm, c->mode, c->threads, c->draft_ctx ? c->draft_ctx : NCTX, 0) : NULL;
    fp4_session_req r = {.prompt = prompt,
                         .n_prompt = PLEN,
                         .sampling = params(c),
                         .max_tokens = n_gen_of(c),
                         .prefill_chunk = PLEN};
    fp4_session *s = NULL;
    fp4_error e;
    if (rt && (!spec || dr) && !fp4_session_create(rt, &r, loop_id, g, &s, &e) &&
        (!spec || !fp4_session_set_draft(s, dr, c->k, &e)) && !fp4_session_run(s, NULL, &e))
        g->failed = 0;
    g->st = fp4_session_spec_stats(s);
    fp4_session_free(s);
    fp4_rt_free(dr), fp4_rt_free(rt);
    fp4_model_close(dm), fp4_model_close(m);
}

/* speculative == plain: tokens, every logit's bits, the KV snapshot's bytes; and the tokens are
 * the library's loop's, with the draft and without */
static void same_as_plain(const cfg *spec, const char *tag) {
    cfg plain = *spec;
    plain.draft = NULL;
    gen a, b;
    generate(&plain, &a, tag);
    long la = 0, lb = 0;
    char *kva = a.failed ? NULL : cu_slurp(a.kv, &la);
    generate(spec, &b, tag);
    char *kvb = b.failed ? NULL : cu_slurp(b.kv, &lb);
    CHECK_MSG(!a.failed && !b.failed, "%s: generation failed", tag);
    CHECK_MSG(a.n_tok == b.n_tok && !memcmp(a.tok, b.tok, sizeof(int32_t) * (size_t)a.n_tok), "%s: tokens",
              tag);
    CHECK_MSG(a.n_rows == b.n_rows && a.n_rows == PLEN + n_gen_of(spec) - 1 && a.rows && b.rows &&
                  !memcmp(a.rows, b.rows, sizeof(float) * (size_t)(a.n_rows * a.V)),
              "%s: logits (%lld vs %lld rows)", tag, (long long)a.n_rows, (long long)b.n_rows);
    CHECK_MSG(kva && kvb && la > 0 && la == lb && !memcmp(kva, kvb, (size_t)la), "%s: KV snapshot", tag);
    CHECK_MSG(b.st.emitted == n_gen_of(spec) - 1 && b.st.accepted <= b.st.drafted, "%s: stats", tag);
    gen l, ld;
    loop_tokens(spec, &l, 0);
    CHECK_MSG(!l.failed && l.n_tok == b.n_tok && !memcmp(l.tok, b.tok, sizeof(int32_t) * (size_t)b.n_tok),
              "%s: the library's loop gave %d tokens, speculative decoding %d (or others)", tag, l.n_tok,
              b.n_tok);
    /* the loop with the draft (fp4_session_set_draft: `fp4lane run --draft`): the same tokens, the
     * same rounds as the hand-made speculative loop */
    loop_tokens(spec, &ld, 1);
    CHECK_MSG(!ld.failed && ld.n_tok == b.n_tok && !memcmp(ld.tok, b.tok, sizeof(int32_t) * (size_t)b.n_tok),
              "%s: the loop with a draft gave %d tokens, plain decoding %d (or others)", tag, ld.n_tok,
              b.n_tok);
    CHECK_MSG(!memcmp(&ld.st, &b.st, sizeof b.st),
              "%s: the loop's rounds %lld/%lld/%lld, the spec loop's %lld/%lld/%lld", tag,
              (long long)ld.st.rounds, (long long)ld.st.drafted, (long long)ld.st.accepted,
              (long long)b.st.rounds, (long long)b.st.drafted, (long long)b.st.accepted);
    /* the draft is the target: every proposal is the target's greedy pick */
    if (!strcmp(spec->draft, spec->target) && !spec->sampled)
        CHECK_MSG(b.st.drafted > 0 && b.st.accepted == b.st.drafted, "%s: self-draft accepted %lld of %lld",
                  tag, (long long)b.st.accepted, (long long)b.st.drafted);
    if (strstr(spec->draft, "foreign"))
        CHECK_MSG(b.st.drafted > 0 && b.st.accepted < b.st.drafted, "%s: foreign draft accepted %lld of %lld",
                  tag, (long long)b.st.accepted, (long long)b.st.drafted);
    if (a.kv[0]) unlink(a.kv);
    free(kva), free(kvb), free(a.rows), free(b.rows);
}

static void matrix(const char *target, const char *const *drafts, int n_drafts, fp4_mode mode, int full,
                   const char *name) {
    static const int ks[] = {1, 3, 8};
    for (int d = 0; d < n_drafts; d++)
        for (int th = 1; th <= (full ? 2 : 1); th++)
            for (int ki = 0; ki < 3; ki++)
                for (int smp = 0; smp < 2; smp++) {
                    if (!full && ki != 1) continue;
                    cfg c = {target, drafts[d], mode, th, ks[ki], smp, 0, 0, 0};
                    char tag[300];
                    snprintf(tag, sizeof tag, "%s draft %s threads %d k %d %s", name, strrchr(drafts[d], '/'),
                             th, ks[ki], smp ? "sampled" : "greedy");
                    same_as_plain(&c, tag);
                }
}

/* drafting near the context length: the verify step never passes n_ctx; a draft with a shorter
 * context stops drafting; past the end the round fails like plain decoding (rt.context) */
static void test_context(const char *nv, const char *foreign) {
    cfg c = {.target = nv, .draft = nv, .mode = FP4_MODE_EXACT, .threads = 1, .k = 8};
    c.n_ctx = PLEN + 10, c.n_gen = 10; /* the CLI's limit: prompt + -n == n_ctx */
    same_as_plain(&c, "context edge self-draft k 8");
    c.draft = foreign, c.sampled = 1;
    same_as_plain(&c, "context edge foreign k 8 sampled");
    c.draft = nv, c.sampled = 0, c.n_ctx = 40, c.n_gen = 30, c.draft_ctx = PLEN + 3;
    same_as_plain(&c, "draft context shorter");
    /* the library at the very end: n_ctx 16, the pending token at 15, then at 16 */
    fp4_model *m, *dm;
    fp4_rt *rt = engine(nv, &m, FP4_MODE_EXACT, 1, 16, 1), *dr = engine(nv, &dm, FP4_MODE_EXACT, 1, 16, 0);
    fp4_error e;
    int32_t s, ds, hist[20];
    fp4_spec *sp = NULL;
    if (!rt || !dr) goto out;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK_OK(fp4_rt_seq_open(dr, &ds));
    fp4_rt_tok cols[15];
    for (int i = 0; i < 15; i++)
        hist[i] = prompt[i % PLEN], cols[i] = (fp4_rt_tok){s, hist[i], 0};
    hist[15] = 5;
    CHECK_OK(fp4_rt_step(rt, cols, 15, NULL, &e));
    CHECK_OK(fp4_spec_create(rt, s, dr, ds, 8, &sp, &e));
    fp4_sampler *smp = NULL;
    fp4_sampler_params p = fp4_sampler_defaults();
    CHECK_OK(fp4_sampler_create(&p, fp4_rt_vocab(rt), &smp));
    gen g = {.V = fp4_rt_vocab(rt)};
    g.rows = malloc(sizeof(float) * (size_t)(MAXROWS * g.V));
    int stop = 0;
    CHECK_OK(fp4_spec_round(sp, hist, 16, 100, smp, on_emit, &g, &stop, &e));
    CHECK(g.n_tok == 1 && fp4_spec_get_stats(sp).drafted == 0 && fp4_rt_seq_pos(rt, s) == 16);
    hist[16] = g.tok[0];
    CHECK(fp4_spec_round(sp, hist, 17, 100, smp, on_emit, &g, &stop, &e) == FP4_ERR_LIMIT &&
          !strcmp(e.rule, "rt.context"));
    CHECK(g.n_tok == 1 && fp4_rt_seq_pos(rt, s) == 16);
    free(g.rows);
    fp4_sampler_free(smp);
out:
    fp4_spec_free(sp);
    fp4_rt_free(dr), fp4_rt_free(rt);
    fp4_model_close(dm), fp4_model_close(m);
}

static int failing_emit(void *user, int32_t token, const float *row) {
    (void)token, (void)row;
    return ++*(int *)user == 2 ? -1 : 0;
}

static void test_refusals(const char *nv, const char *bf, const char *v256) {
    fp4_model *m, *dm, *vm;
    fp4_rt *rt = NULL;
    fp4_error e;
    /* the route table, before any weight is read */
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    fp4_rt_opts o = {.mode = FP4_MODE_NATIVE, .drafting = 1};
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_REFUSED_ROUTE && strstr(e.msg, "unqualified") &&
          strstr(e.msg, "kquant lane"));
    fp4_model_close(m);
    CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
    CHECK(fp4_rt_create(m, &o, &rt, &e) == FP4_ERR_REFUSED_ROUTE && strstr(e.msg, "--mode exact"));
    fp4_model_close(m);
    /* fp4_spec_create */
    fp4_rt *plain = engine(nv, &m, FP4_MODE_EXACT, 1, 32, 0),
           *tgt = engine(nv, &dm, FP4_MODE_EXACT, 1, 32, 1);
    fp4_rt *v = engine(v256, &vm, FP4_MODE_EXACT, 1, 32, 0);
    int32_t s1, s2, s3;
    fp4_spec *sp = NULL;
    if (!plain || !tgt || !v) goto out;
    CHECK_OK(fp4_rt_seq_open(plain, &s1));
    CHECK_OK(fp4_rt_seq_open(tgt, &s2));
    CHECK_OK(fp4_rt_seq_open(v, &s3));
    CHECK(fp4_spec_create(plain, s1, tgt, s2, 4, &sp, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "spec.target"));
    CHECK(fp4_spec_create(tgt, s2, v, s3, 4, &sp, &e) == FP4_ERR_FORMAT && !strcmp(e.rule, "spec.vocab") &&
          strstr(e.msg, "256") && strstr(e.msg, "320"));
    CHECK(fp4_spec_create(tgt, s2, plain, s1, 0, &sp, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "spec.n-draft"));
    CHECK(fp4_spec_create(tgt, s2, plain, s1, FP4_SPEC_MAX_DRAFT + 1, &sp, &e) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_spec_create(tgt, s2, tgt, s2, 4, &sp, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "spec.seq"));
    CHECK(sp == NULL);
    CHECK_OK(fp4_spec_create(tgt, s2, plain, s1, 4, &sp, &e));
    /* a history that is not the target's: spec.pos; a failing callback: FP4_ERR_IO, rolled back */
    fp4_sampler *smp = NULL;
    fp4_sampler_params p = fp4_sampler_defaults();
    CHECK_OK(fp4_sampler_create(&p, 320, &smp));
    int stop = 0, calls = 0;
    CHECK(fp4_spec_round(sp, prompt, PLEN, 8, smp, failing_emit, &calls, &stop, &e) == FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "spec.pos"));
    fp4_rt_tok cols[PLEN - 1];
    for (int i = 0; i < PLEN - 1; i++)
        cols[i] = (fp4_rt_tok){s2, prompt[i], 0};
    CHECK_OK(fp4_rt_step(tgt, cols, PLEN - 1, NULL, &e));
    CHECK(fp4_spec_round(sp, prompt, PLEN, 8, smp, failing_emit, &calls, &stop, &e) == FP4_ERR_IO &&
          !strcmp(e.rule, "spec.emit"));
    CHECK(calls <= 2 && fp4_rt_seq_pos(tgt, s2) == PLEN - 1 + calls && fp4_rt_seq_pos(plain, s1) <= PLEN + 1);
    CHECK(fp4_spec_round(sp, prompt, PLEN, 0, smp, on_emit, NULL, &stop, &e) == FP4_ERR_INVALID_ARG);
    fp4_sampler_free(smp);
    /* fp4_rt_seq_truncate: within [0, pos] of an open sequence */
    CHECK(fp4_rt_seq_truncate(tgt, s2, fp4_rt_seq_pos(tgt, s2) + 1) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_rt_seq_truncate(tgt, s2, -1) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_rt_seq_truncate(tgt, 5, 0) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_rt_seq_truncate(tgt, s2, 2));
    CHECK(fp4_rt_seq_pos(tgt, s2) == 2);
    fp4_rt_seq_close(tgt, s2);
    CHECK(fp4_rt_seq_truncate(tgt, s2, 0) == FP4_ERR_INVALID_ARG);
    fp4_rt_seq_close(plain, s1), fp4_rt_seq_close(v, s3);
    /* the loop with a draft: fp4_spec_create's refusals come from the run, after the prompt's
     * first token, and end it with an error (the sequences closed again); no draft, or one set
     * after the run, refused at once */
    const fp4_session_req r = {.prompt = prompt, .n_prompt = PLEN, .sampling = p, .max_tokens = 4};
    const struct {
        fp4_rt *target, *draft;
        int32_t n;
        const char *rule;
    } bad[] = {{plain, tgt, 4, "spec.target"}, {tgt, v, 4, "spec.vocab"}, {tgt, plain, 0, "spec.n-draft"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fp4_session *ss = NULL;
        CHECK_OK(fp4_session_create(bad[i].target, &r, NULL, NULL, &ss, &e));
        CHECK_OK(fp4_session_set_draft(ss, bad[i].draft, bad[i].n, &e));
        int64_t np = 0, ng = 0;
        CHECK_MSG(fp4_session_run(ss, NULL, &e) != FP4_OK && !strcmp(e.rule, bad[i].rule), "%s: %s",
                  bad[i].rule, e.rule);
        fp4_session_counts(ss, &np, &ng);
        CHECK(fp4_session_finish(ss) == FP4_FINISH_ERROR && np == PLEN && ng == 1);
        CHECK(fp4_session_set_draft(ss, tgt, 4, &e) == FP4_ERR_INVALID_ARG &&
              !strcmp(e.rule, "session.draft"));
        CHECK(fp4_session_set_draft(ss, NULL, 4, &e) == FP4_ERR_INVALID_ARG);
        fp4_session_free(ss);
        CHECK(fp4_rt_seq_open(bad[i].target, &s1) == FP4_OK); /* the run closed its sequence */
        fp4_rt_seq_close(bad[i].target, s1);
    }
out:
    fp4_spec_free(sp);
    fp4_rt_free(plain), fp4_rt_free(tgt), fp4_rt_free(v);
    fp4_model_close(m), fp4_model_close(dm), fp4_model_close(vm);
}

static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}
static int same_file(const char *a, const char *b) {
    long la, lb;
    char *x = cu_slurp(a, &la), *y = cu_slurp(b, &lb);
    int same = la > 0 && la == lb && !memcmp(x, y, (size_t)la);
    free(x), free(y);
    return same;
}
static void first_line(const char *s, char *out, size_t n) {
    snprintf(out, n, "%.*s", (int)strcspn(s ? s : "", "\n"), s ? s : "");
}

static void test_cli(const char *nv, const char *bf, const char *foreign, const char *v4096) {
    char a[3000], l1[512], l2[512], f[4][700];
    char *o = NULL, *er = NULL;
    for (int i = 0; i < 4; i++)
        snprintf(f[i], sizeof f[i], "%s/cli-%d", tmp, i);
    /* ids: sampled, threads 2: the same ids, logits file and KV snapshot as the plain run */
    const char *gen_opts =
        "--prompt-ids 3,17,101,250,42,7 -n 20 --ignore-eos --threads 2 --temp 0.8 --top-k 40 "
        "--top-p 0.9 --seed 7";
    snprintf(a, sizeof a, "run %s %s --logits-out %s --kv-save %s", nv, gen_opts, f[0], f[1]);
    CHECK(cli(a, &o, &er) == 0);
    first_line(o, l1, sizeof l1);
    snprintf(a, sizeof a, "run %s %s --logits-out %s --kv-save %s --draft %s --draft-n 3", nv, gen_opts, f[2],
             f[3], foreign);
    CHECK_MSG(cli(a, &o, &er) == 0, "%s", er);
    first_line(o, l2, sizeof l2);
    CHECK_MSG(!strcmp(l1, l2) && strlen(l1) > 20, "%s vs %s", l1, l2);
    CHECK(same_file(f[0], f[2]) && same_file(f[1], f[3]));
    CHECK(cu_has(cu_last_line(o), "draft-n 3: drafted ") && cu_has(cu_last_line(o), "accepted ") &&
          cu_has(cu_last_line(o), "decode 20 tok"));
    /* without --logits-out and --kv-save: the library's loop with the draft, the same ids */
    snprintf(a, sizeof a, "run %s %s --draft %s --draft-n 3", nv, gen_opts, foreign);
    CHECK_MSG(cli(a, &o, &er) == 0, "%s", er);
    first_line(o, l2, sizeof l2);
    CHECK_MSG(!strcmp(l1, l2), "the loop with a draft: %s vs %s", l1, l2);
    CHECK(cu_has(cu_last_line(o), "draft-n 3: drafted ") && cu_has(cu_last_line(o), "decode 20 tok"));
    /* greedy with the target as its own draft: every proposal accepted */
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3 -n 12 --ignore-eos --draft %s", bf, bf);
    CHECK(cli(a, &o, &er) == 0 && cu_has(cu_last_line(o), "(100.0 %)"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1,2,3 -n 12 --ignore-eos --json --draft %s --draft-n 2", bf,
             bf);
    CHECK(cli(a, &o, &er) == 0 && cu_has(o, "\"draft_n\":2") && cu_has(o, "\"drafted\":"));
    /* text: models/tiny drafting for itself gives the plain run's text */
    snprintf(a, sizeof a, "run models/tiny -p 'The history of' -n 24 --ignore-eos");
    CHECK(cli(a, &o, &er) == 0);
    char *plain_text = o;
    o = NULL;
    snprintf(a, sizeof a,
             "run models/tiny -p 'The history of' -n 24 --ignore-eos --draft models/tiny --draft-n 5");
    CHECK(cli(a, &o, &er) == 0 && plain_text && o && !strcmp(plain_text, o) && cu_has(er, "draft-n 5"));
    free(plain_text);
    /* refusals (exit 1): vocabulary, tokenizer, routes; usage (exit 2) */
    snprintf(a, sizeof a, "run models/tiny --prompt-ids 1,2 --draft %s", foreign);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "320") && cu_has(er, "4096") && cu_has(er, "tokenizer"));
    snprintf(a, sizeof a, "run models/tiny -p 'Hello' --draft %s", v4096);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "tokenizer"));
    snprintf(a, sizeof a, "run models/tiny --prompt-ids 1,2 -n 3 --draft %s",
             v4096); /* ids: vocabulary only */
    CHECK(cli(a, &o, &er) == 0 && cu_has(cu_last_line(o), "drafted"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --mode native --draft %s", nv, nv);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "unqualified"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --mode native --draft %s", bf, nv);
    CHECK(cli(a, &o, &er) == 1 && cu_has(er, "--mode exact"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --draft %s --draft-n 0", nv, nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "--draft-n 0"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --draft %s --draft-n 33", nv, nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "33"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --draft-n 3", nv); /* --draft-n alone is not ignored */
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "--draft-n 3") && cu_has(er, "--draft DRAFT"));
    snprintf(a, sizeof a, "run %s --batch-file %s --draft %s", nv, f[0], nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "--batch-file"));
    snprintf(a, sizeof a, "run %s --prompt-ids 1 --kv-load %s --draft %s", nv, f[1], nv);
    CHECK(cli(a, &o, &er) == 2 && cu_has(er, "--kv-load"));
    snprintf(a, sizeof a, "compare %s --a \"--threads 1\" --b \"--draft %s\" --prompt-ids 1,2", nv, nv);
    CHECK(cli(a, &o, &er) != 0 && cu_has(er, "option of `fp4lane run`"));
    snprintf(a, sizeof a, "help run");
    CHECK(cli(a, &o, &er) == 0 && (cu_has(o, "--draft-n") || cu_has(er, "--draft-n")));
    for (int i = 0; i < 4; i++)
        unlink(f[i]);
    free(o), free(er);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-spec-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bf[600], nv[600], foreign[600], v256[600], v4096[600], kq[600], w4[600];
    rtfx_spec s = rtfx_default("llama");
    rtfx_write_pair(tmp, &s, 8, bf, nv, sizeof bf);
    rtfx_spec d = s;
    d.layers = 1; /* another random model: most of its proposals are rejected */
    snprintf(foreign, sizeof foreign, "%s/foreign-draft", tmp);
    CHECK(rtfx_write_hf(foreign, &d, 99) == 0);
    d.vocab = 256;
    snprintf(v256, sizeof v256, "%s/vocab256", tmp);
    CHECK(rtfx_write_hf(v256, &d, 3) == 0);
    d.vocab = 4096; /* models/tiny's vocabulary, no tokenizer */
    snprintf(v4096, sizeof v4096, "%s/vocab4096", tmp);
    CHECK(rtfx_write_hf(v4096, &d, 4) == 0);
    fp4_error e;
    snprintf(kq, sizeof kq, "%s/llama-q4k.gguf", tmp);
    fp4_quantize_opts ko = {.layout = FP4_LAYOUT_GGUF, .to_q4_k = 1};
    CHECK_OK(fp4_quantize_checkpoint(bf, kq, &ko, &e));
    snprintf(w4, sizeof w4, "%s/llama-w4a4", tmp);
    CHECK(rtd_add_input_scales(nv, w4) == 0);

    /* every qualified route: speculative == plain, bit for bit */
    const char *nv_drafts[] = {nv, foreign, bf};
    matrix(nv, nv_drafts, 3, FP4_MODE_EXACT, 1, "nvfp4 a16 exact");
    const char *bf_drafts[] = {bf, foreign};
    matrix(bf, bf_drafts, 2, FP4_MODE_EXACT, 0, "bf16 exact");
    const char *kq_drafts[] = {kq, foreign};
    matrix(kq, kq_drafts, 2, FP4_MODE_EXACT, 0, "q4_k exact");
    matrix(kq, kq_drafts, 2, FP4_MODE_NATIVE, 0, "q4_k native");
    const char *w4_drafts[] = {w4, nv};
    matrix(w4, w4_drafts, 2, FP4_MODE_EXACT, 0, "w4a4 exact");
    test_context(nv, foreign);
    test_refusals(nv, bf, v256);
    test_cli(nv, bf, foreign, v4096);
    rtfx_rmtree(tmp);
    return check_report();
}
