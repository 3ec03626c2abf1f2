/* gen.c — the generation endpoints. A request becomes a job: the scheduler's thread feeds it
 * (token callback: text, log-probabilities, Server-Sent Events), the connection's thread waits on
 * it and writes the answer. A client that goes away cancels its job: the connection's thread
 * watches the socket while it waits, so a disconnect ends the request before the next step. */
#include "server/server.h"
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SRV_WAIT_NS (20 * 1000 * 1000) /* the socket is looked at this often while waiting */

typedef struct srv_job {
    srv *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;  /* the scheduler and the connection                                          */
    char *buf; /* stream: SSE bytes not yet sent; else: the answer's text                  */
    size_t n, cap, off;
    json_t *lp; /* chat: logprobs.content; completions: the logprobs object               */
    int done, cancel, stream, chat, include_usage, logprobs, sent_role;
    fp4_finish fin;
    int64_t n_prompt, n_gen;
    uint64_t sched_id;
    char id[48];
    long created;
    double t0, t_last;
    int fd;
    int64_t cancel_step; /* the scheduler's step count when the client went away; -1: never */
    int64_t done_step;   /* ... when the request ended                                          */
} srv_job;
typedef srv_job job;

static void job_release(job *j) {
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    pthread_mutex_destroy(&j->mu), pthread_cond_destroy(&j->cv);
    json_decref(j->lp);
    free(j->buf), free(j);
}

static int put(job *j, const char *p, size_t n) {
    if (j->n + n + 1 > j->cap) {
        size_t cap = j->n + n + 1 > 2 * j->cap ? j->n + n + 1 : 2 * j->cap;
        char *b = realloc(j->buf, cap);
        if (!b) return -1;
        j->buf = b, j->cap = cap;
    }
    memcpy(j->buf + j->n, p, n);
    j->n += n;
    j->buf[j->n] = 0;
    return 0;
}

static json_t *token_text(const srv *s, int32_t id) {
    char *t = NULL;
    size_t n = 0;
    fp4_error err;
    json_t *r = NULL;
    if (!fp4_tokenizer_decode(s->tok, &id, 1, 0, &t, &n, &err)) r = json_stringn(t, n);
    free(t);
    return r ? r : json_string("");
}

/* one token's log-probabilities, in the chat shape or the completions shape */
static void add_logprobs(job *j, const fp4_session_tok *t) {
    if (j->chat) {
        json_t *top = json_array();
        for (int32_t k = 0; k < t->n_top; k++)
            json_array_append_new(top, json_pack("{s:o,s:f}", "token", token_text(j->s, t->top_ids[k]),
                                                 "logprob", (double)t->top_logprobs[k]));
        json_array_append_new(j->lp, json_pack("{s:o,s:f,s:o}", "token", token_text(j->s, t->id), "logprob",
                                               (double)t->logprob, "top_logprobs", top));
        return;
    }
    json_array_append_new(json_object_get(j->lp, "tokens"), token_text(j->s, t->id));
    json_array_append_new(json_object_get(j->lp, "token_logprobs"), json_real(t->logprob));
    json_t *top = json_object();
    for (int32_t k = 0; k < t->n_top; k++) {
        json_t *tt = token_text(j->s, t->top_ids[k]);
        json_object_set_new(top, json_string_value(tt), json_real(t->top_logprobs[k]));
        json_decref(tt);
    }
    json_array_append_new(json_object_get(j->lp, "top_logprobs"), top);
}

static json_t *new_lp(int chat) {
    return chat ? json_array() : json_pack("{s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs");
}

/* a streamed chunk: {"choices":[{"delta"|"text", "logprobs", "finish_reason"}]} */
static void sse_chunk(job *j, const char *text, size_t len, const char *finish) {
    json_t *ch = json_pack("{s:i}", "index", 0);
    if (j->chat) {
        json_t *d = json_object();
        if (!j->sent_role) json_object_set_new(d, "role", json_string("assistant")), j->sent_role = 1;
        if (text) json_object_set_new(d, "content", json_stringn(text, len));
        json_object_set_new(ch, "delta", d);
        json_object_set_new(ch, "logprobs",
                            j->lp && json_array_size(j->lp) ? json_pack("{s:O}", "content", j->lp)
                                                            : json_null());
    } else {
        json_object_set_new(ch, "text", json_stringn(text ? text : "", text ? len : 0));
        json_object_set_new(ch, "logprobs", j->lp ? json_copy(j->lp) : json_null());
    }
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:[o]}", "id", j->id, "object",
                          j->chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->s->name, "choices", ch);
    char *js = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (js) put(j, "data: ", 6), put(j, js, strlen(js)), put(j, "\n\n", 2);
    free(js), json_decref(o);
    if (j->lp) json_decref(j->lp), j->lp = new_lp(j->chat);
}

static json_t *usage(const job *j) {
    return json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens",
                     (json_int_t)j->n_gen, "total_tokens", (json_int_t)(j->n_prompt + j->n_gen));
}

static int on_token(void *user, const fp4_session_tok *t) {
    job *j = user;
    const double now = fp4_server_now();
    pthread_mutex_lock(&j->mu);
    if (t->id >= 0) {
        fp4_server_hist_add(j->s, j->t_last > 0 ? &j->s->itl : &j->s->ttft,
                            now - (j->t_last > 0 ? j->t_last : j->t0));
        j->t_last = now;
        if (j->lp && !t->end) add_logprobs(j, t);
    }
    if (j->stream) {
        if (t->len || (j->lp && (j->chat ? json_array_size(j->lp) : 1) && !t->end))
            sse_chunk(j, t->text, t->len, NULL);
    } else if (t->len)
        put(j, t->text, t->len);
    int cancel = j->cancel;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return cancel;
}

static void on_done(void *user, fp4_finish f, int64_t np, int64_t ng, const fp4_error *err) {
    job *j = user;
    (void)err;
    pthread_mutex_lock(&j->s->mu);
    j->s->prompt_tokens += (uint64_t)np, j->s->gen_tokens += (uint64_t)ng;
    j->s->finish[f < 5 ? f : 4]++;
    pthread_mutex_unlock(&j->s->mu);
    pthread_mutex_lock(&j->mu);
    j->fin = f, j->n_prompt = np, j->n_gen = ng, j->done = 1;
    j->done_step = fp4_sched_get_stats(j->s->sched).steps;
    if (j->stream && (f == FP4_FINISH_STOP || f == FP4_FINISH_LENGTH)) {
        json_decref(j->lp), j->lp = NULL;
        sse_chunk(j, NULL, 0, fp4_finish_name(f));
        if (j->include_usage) {
            json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:[],s:o}", "id", j->id, "object",
                                  j->chat ? "chat.completion.chunk" : "text_completion", "created",
                                  (json_int_t)j->created, "model", j->s->name, "choices", "usage", usage(j));
            char *js = o ? json_dumps(o, JSON_COMPACT) : NULL;
            if (js) put(j, "data: ", 6), put(j, js, strlen(js)), put(j, "\n\n", 2);
            free(js), json_decref(o);
        }
    } else if (j->stream && f == FP4_FINISH_ERROR) {
        const char *e = "data: {\"error\":{\"message\":\"the engine failed\",\"type\":\"server_error\"}}\n\n";
        put(j, e, strlen(e));
    }
    if (j->stream) put(j, "data: [DONE]\n\n", 14);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

/* the client is gone: the request is cancelled (once) and the step it happened at kept */
static void cancel_gone(job *j) {
    if (j->cancel_step < 0) j->cancel_step = fp4_sched_get_stats(j->s->sched).steps;
    j->cancel = 1;
}

/* the peer closed its side (or the socket failed): the request is not wanted any more */
static int peer_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* under j->mu: waits for news; 0, or -1 when the client went away (the request is cancelled) */
static int wait_news(job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SRV_WAIT_NS;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    if (j->done || !peer_gone(j->fd)) return 0;
    cancel_gone(j);
    pthread_mutex_unlock(&j->mu);
    fp4_sched_cancel(j->s->sched, j->sched_id);
    pthread_mutex_lock(&j->mu);
    return -1;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
    job *j = cls;
    (void)pos;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->n > j->off) {
            size_t k = j->n - j->off < max ? j->n - j->off : max;
            memcpy(buf, j->buf + j->off, k);
            j->off += k;
            if (j->off == j->n) j->off = j->n = 0;
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)k;
        }
        if (j->done) break;
        if (wait_news(j)) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void reader_free(void *cls) {
    job *j = cls;
    pthread_mutex_lock(&j->mu);
    int running = !j->done;
    j->cancel = 1;
    pthread_mutex_unlock(&j->mu);
    if (running) fp4_sched_cancel(j->s->sched, j->sched_id);
    pthread_mutex_lock(&j->s->mu);
    j->s->active--;
    pthread_mutex_unlock(&j->s->mu);
    job_release(j);
}

/* the prompt's ids: the chat template rendered then encoded (its special tokens parsed), or the
 * completion's text with the tokenizer's BOS */
static int prompt_ids(srv *s, const srv_gen *g, int32_t **ids, size_t *n, srv_fail *f) {
    *ids = NULL, *n = 0;
    if (!g->chat)
        return fp4_tokenizer_encode(s->tok, g->prompt, g->prompt_len, FP4_TOK_ADD_SPECIAL, ids, n)
                   ? fp4_server_failf(f, 500, "server_error", "prompt", "cannot encode the prompt")
                   : 0;
    if (s->tmpl < 0)
        return fp4_server_failf(f, 400, "invalid_request_error", "messages",
                                "the model has no chat template fp4lane knows: use /v1/completions");
    char *text = NULL;
    size_t len = 0;
    fp4_error err;
    if (fp4_chat_render(s->tmpl, g->msgs, g->n_msgs, s->bos_s, s->eos_s, 1, &text, &len, &err))
        return fp4_server_failf(f, 400, "invalid_request_error", "messages", "%s", err.msg);
    int bad = fp4_tokenizer_encode(s->tok, text, len, FP4_TOK_PARSE_SPECIAL, ids, n) != FP4_OK;
    free(text);
    return bad ? fp4_server_failf(f, 500, "server_error", "messages", "cannot encode the conversation") : 0;
}

static job *job_new(srv *s, const srv_gen *g, struct MHD_Connection *c) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    static unsigned long long seq;
    j->s = s, j->refs = 2, j->stream = g->stream, j->chat = g->chat, j->include_usage = g->include_usage;
    j->logprobs = g->logprobs;
    j->lp = g->logprobs ? new_lp(g->chat) : NULL;
    j->created = (long)time(NULL);
    j->t0 = fp4_server_now();
    snprintf(j->id, sizeof j->id, "%s-%llx%04llx", g->chat ? "chatcmpl" : "cmpl",
             (unsigned long long)j->created, __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) & 0xffff);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    j->cancel_step = -1;
    pthread_mutex_init(&j->mu, NULL), pthread_cond_init(&j->cv, NULL);
    return j;
}

/* the whole answer of a request that does not stream */
static char *answer_json(job *j) {
    json_t *ch = json_pack("{s:i,s:s}", "index", 0, "finish_reason", fp4_finish_name(j->fin));
    if (j->chat) {
        json_object_set_new(
            ch, "message",
            json_pack("{s:s,s:s%}", "role", "assistant", "content", j->buf ? j->buf : "", j->n));
        json_object_set_new(ch, "logprobs", j->lp ? json_pack("{s:O}", "content", j->lp) : json_null());
    } else {
        json_object_set_new(ch, "text", json_stringn(j->buf ? j->buf : "", j->n));
        json_object_set_new(ch, "logprobs", j->lp ? json_incref(j->lp) : json_null());
    }
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:[o],s:o}", "id", j->id, "object",
                          j->chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created,
                          "model", j->s->name, "choices", ch, "usage", usage(j));
    char *r = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return r;
}

void fp4_server_job_log(srv_job *j, int64_t *n_prompt, int64_t *n_gen, const char **finish,
                        int64_t *cancel_steps) {
    pthread_mutex_lock(&j->mu);
    if (!j->done) { /* the connection ended first: the request is not wanted; it ends at the next step */
        cancel_gone(j);
        pthread_mutex_unlock(&j->mu);
        fp4_sched_cancel(j->s->sched, j->sched_id);
        pthread_mutex_lock(&j->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10; /* bounded: a step that never comes leaves the line saying "running" */
        while (!j->done && pthread_cond_timedwait(&j->cv, &j->mu, &ts) == 0) {
        }
    }
    *n_prompt = j->n_prompt, *n_gen = j->n_gen;
    *finish = j->done ? fp4_finish_name(j->fin) : "running";
    *cancel_steps = j->cancel_step >= 0 && j->done ? j->done_step - j->cancel_step : -1;
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

int fp4_server_generate(srv *s, struct MHD_Connection *c, const char *body, size_t n, int chat, int *status,
                        int64_t *n_prompt, int64_t *n_gen, const char **finish, srv_job **stream) {
    srv_fail f = {0};
    srv_gen *g = calloc(1, sizeof *g);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!g)
        return *status = 500, fp4_server_failf(&f, 500, "server_error", "", "out of memory"),
               fp4_server_reply_fail(c, &f);
    int rc;
    if (fp4_server_parse_gen(body, n, chat, s->name, g, &f) || prompt_ids(s, g, &ids, &n_ids, &f))
        goto refuse;
    const int64_t ctx = fp4_rt_n_ctx(s->rt), np = (int64_t)n_ids;
    if (np < 1 || np >= ctx) {
        fp4_server_failf(&f, 400, "invalid_request_error", chat ? "messages" : "prompt",
                         "the prompt is %lld tokens: the context holds %lld (prompt and answer)",
                         (long long)np, (long long)ctx);
        goto refuse;
    }
    if (g->max_tokens > ctx - np) {
        fp4_server_failf(&f, 400, "invalid_request_error", "max_tokens",
                         "%lld prompt tokens + max_tokens %lld is past the context length %lld",
                         (long long)np, (long long)g->max_tokens, (long long)ctx);
        goto refuse;
    }
    fp4_session_req r = {.prompt = ids,
                         .n_prompt = np,
                         .sampling = g->sp,
                         .max_tokens = g->max_tokens > 0 ? g->max_tokens : ctx - np,
                         .stop_ids = s->eos,
                         .n_stop_ids = s->n_eos,
                         .stops = g->stops,
                         .n_stops = g->n_stops,
                         .tok = s->tok,
                         .logprobs = g->logprobs,
                         .top_logprobs = g->top_logprobs};
    job *j = job_new(s, g, c);
    if (!j) {
        fp4_server_failf(&f, 500, "server_error", "", "out of memory");
        goto refuse;
    }
    pthread_mutex_lock(&j->mu); /* the scheduler's callbacks wait until sched_id is known */
    fp4_error err;
    fp4_status st = fp4_sched_submit(s->sched, &r, on_token, on_done, j, &j->sched_id, &err);
    pthread_mutex_unlock(&j->mu);
    free(ids), ids = NULL;
    if (st) {
        j->refs = 1, job_release(j);
        if (st == FP4_ERR_LIMIT && !strcmp(err.rule, "sched.queue"))
            fp4_server_failf(&f, 429, "rate_limit_error", "", "the server is busy: %s; retry later", err.msg);
        else
            fp4_server_failf(&f, 400, "invalid_request_error", "", "%s", err.msg);
        goto refuse;
    }
    pthread_mutex_lock(&s->mu);
    s->active++;
    pthread_mutex_unlock(&s->mu);
    fp4_server_gen_free(g), free(g);
    if (j->stream) {
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, j, reader_free);
        if (!resp) return reader_free(j), *status = 500, MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        rc = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        *status = 200;
        pthread_mutex_lock(&j->mu);
        j->refs++; /* the access log's (fp4_server_job_log) */
        pthread_mutex_unlock(&j->mu);
        *stream = j;
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    int gone = 0;
    while (!j->done && !gone)
        gone = wait_news(j);
    while (!j->done) /* cancelled: the scheduler ends it before its next step */
        pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
    *n_prompt = j->n_prompt, *n_gen = j->n_gen, *finish = fp4_finish_name(j->fin);
    char *js = j->fin == FP4_FINISH_ERROR || j->fin == FP4_FINISH_CANCELLED ? NULL : answer_json(j);
    if (!js) fp4_server_failf(&f, 500, "server_error", "", "the request ended: %s", fp4_finish_name(j->fin));
    reader_free(j); /* the connection's reference */
    if (!js) return *status = 500, fp4_server_reply_fail(c, &f);
    return *status = 200, fp4_server_reply(c, 200, js, "application/json");
refuse:
    free(ids);
    fp4_server_gen_free(g), free(g);
    *status = f.status;
    return fp4_server_reply_fail(c, &f);
}

void fp4_server_hist_add(srv *s, srv_hist *h, double v) {
    pthread_mutex_lock(&s->mu);
    int b = 0;
    while (b < SRV_N_BUCKETS - 1 && v > h->le[b])
        b++;
    h->count[b]++, h->sum += v, h->n++;
    pthread_mutex_unlock(&s->mu);
}

static void hist_text(char **out, size_t *n, const char *name, const char *help, const srv_hist *h) {
    FILE *f = open_memstream(out, n);
    if (!f) return;
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < SRV_N_BUCKETS; b++) {
        cum += h->count[b];
        if (b < SRV_N_BUCKETS - 1)
            fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[b], (unsigned long long)cum);
        else
            fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    }
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
    fclose(f);
}

char *fp4_server_metrics(srv *s) {
    fp4_sched_stats st = s->sched ? fp4_sched_get_stats(s->sched) : (fp4_sched_stats){0};
    char *a = NULL, *b = NULL, *out = NULL;
    size_t na = 0, nb = 0, no = 0;
    pthread_mutex_lock(&s->mu);
    hist_text(&a, &na, "fp4lane_time_to_first_token_seconds", "Time from the request to its first token.",
              &s->ttft);
    hist_text(&b, &nb, "fp4lane_inter_token_seconds", "Time between two tokens of a request.", &s->itl);
    FILE *f = open_memstream(&out, &no);
    if (f) {
        fprintf(
            f,
            "# HELP fp4lane_requests_total HTTP requests answered.\n# TYPE fp4lane_requests_total counter\n"
            "fp4lane_requests_total %llu\n"
            "# HELP fp4lane_requests_failed_total HTTP requests answered with a status >= 400.\n"
            "# TYPE fp4lane_requests_failed_total counter\nfp4lane_requests_failed_total %llu\n"
            "# HELP fp4lane_prompt_tokens_total Prompt tokens processed.\n"
            "# TYPE fp4lane_prompt_tokens_total counter\nfp4lane_prompt_tokens_total %llu\n"
            "# HELP fp4lane_generation_tokens_total Tokens generated.\n"
            "# TYPE fp4lane_generation_tokens_total counter\nfp4lane_generation_tokens_total %llu\n"
            "# HELP fp4lane_requests_running Requests in the running batch.\n"
            "# TYPE fp4lane_requests_running gauge\nfp4lane_requests_running %lld\n"
            "# HELP fp4lane_queue_depth Requests waiting for a place in the batch.\n"
            "# TYPE fp4lane_queue_depth gauge\nfp4lane_queue_depth %lld\n"
            "# HELP fp4lane_steps_total Engine steps.\n# TYPE fp4lane_steps_total counter\n"
            "fp4lane_steps_total %lld\n"
            "# HELP fp4lane_finished_total Generation requests by how they ended.\n"
            "# TYPE fp4lane_finished_total counter\n",
            (unsigned long long)s->requests, (unsigned long long)s->failed,
            (unsigned long long)s->prompt_tokens, (unsigned long long)s->gen_tokens, (long long)st.running,
            (long long)st.queued, (long long)st.steps);
        for (int k = 1; k < 5; k++)
            fprintf(f, "fp4lane_finished_total{reason=\"%s\"} %llu\n", fp4_finish_name((fp4_finish)k),
                    (unsigned long long)s->finish[k]);
        const fp4_prefix_stats ps = fp4_prefix_cache_stats(s->prefix);
        fprintf(f,
                "# HELP fp4lane_kv_blocks_used KV cache blocks held by running requests.\n"
                "# TYPE fp4lane_kv_blocks_used gauge\nfp4lane_kv_blocks_used %lld\n"
                "# HELP fp4lane_kv_blocks_free KV cache blocks not held (of every sequence's full context).\n"
                "# TYPE fp4lane_kv_blocks_free gauge\nfp4lane_kv_blocks_free %lld\n"
                "# HELP fp4lane_kv_block_positions Positions per KV cache block.\n"
                "# TYPE fp4lane_kv_block_positions gauge\nfp4lane_kv_block_positions %lld\n"
                "# HELP fp4lane_prefix_cache_blocks KV blocks of prompt prefixes kept for reuse.\n"
                "# TYPE fp4lane_prefix_cache_blocks gauge\nfp4lane_prefix_cache_blocks %lld\n"
                "# HELP fp4lane_prefix_cache_hits_total Requests whose prompt prefix came from the cache.\n"
                "# TYPE fp4lane_prefix_cache_hits_total counter\nfp4lane_prefix_cache_hits_total %lld\n"
                "# HELP fp4lane_prefix_cache_tokens_total Prompt tokens loaded from the cache.\n"
                "# TYPE fp4lane_prefix_cache_tokens_total counter\nfp4lane_prefix_cache_tokens_total %lld\n"
                "# HELP fp4lane_prefix_cache_stored_blocks_total KV blocks copied into the prefix cache.\n"
                "# TYPE fp4lane_prefix_cache_stored_blocks_total counter\n"
                "fp4lane_prefix_cache_stored_blocks_total %lld\n"
                "# HELP fp4lane_prefix_cache_seconds_total Time the engine spent on the prefix cache.\n"
                "# TYPE fp4lane_prefix_cache_seconds_total counter\n"
                "fp4lane_prefix_cache_seconds_total{op=\"store\"} %.6f\n"
                "fp4lane_prefix_cache_seconds_total{op=\"load\"} %.6f\n",
                (long long)st.kv_blocks_used, (long long)(st.kv_blocks_total - st.kv_blocks_used),
                (long long)st.kv_block, (long long)ps.blocks, (long long)ps.hits, (long long)ps.reused_tokens,
                (long long)ps.stored_blocks, ps.store_seconds, ps.load_seconds);
        static const char *const kind[2] = {"decode", "prompt"};
        fprintf(
            f,
            "# HELP fp4lane_engine_steps_total Engine steps: decode columns only, or with prompt columns.\n"
            "# TYPE fp4lane_engine_steps_total counter\n");
        for (int k = 0; k < 2; k++)
            fprintf(f, "fp4lane_engine_steps_total{step=\"%s\"} %lld\n", kind[k],
                    (long long)st.kind_steps[k]);
        fprintf(f, "# HELP fp4lane_engine_columns_total Columns (tokens) of those steps.\n"
                   "# TYPE fp4lane_engine_columns_total counter\n");
        for (int k = 0; k < 2; k++)
            fprintf(f, "fp4lane_engine_columns_total{step=\"%s\"} %lld\n", kind[k],
                    (long long)st.kind_columns[k]);
        fprintf(f, "# HELP fp4lane_engine_seconds_total Time in the engine's step calls of those steps.\n"
                   "# TYPE fp4lane_engine_seconds_total counter\n");
        for (int k = 0; k < 2; k++)
            fprintf(f, "fp4lane_engine_seconds_total{step=\"%s\"} %.6f\n", kind[k], st.kind_seconds[k]);
        fprintf(f, "%s%s", a ? a : "", b ? b : "");
        fclose(f);
    }
    pthread_mutex_unlock(&s->mu);
    free(a), free(b);
    return out;
}
