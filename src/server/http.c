/* http.c — the HTTP side of fp4lane serve on libmicrohttpd: one thread per connection (a request
 * that waits for tokens blocks only its own thread), bounded connections, headers (the connection
 * memory limit: 431), bodies (max_body: 413) and idle time (slowloris); routes; the API key
 * compared in constant time; one access-log line per request; /health 503 while the model loads
 * and while draining; SIGTERM (o->stop) drains: new requests 503, running ones finish, then out. */
#include "server/server.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SRV_CONN_LIMIT 256
/* connections one client address may hold: slow clients from one address (slowloris) cannot take
 * every connection, so other clients are still served (a proxy in front: --conn-per-ip) */
#define SRV_CONN_PER_IP_DEFAULT 64
#define SRV_CONN_TIMEOUT 30        /* seconds a connection may stay idle (slowloris)       */
#define SRV_CONN_MEMORY (64 << 10) /* per connection: the request line and headers       */

static const double ttft_le[SRV_N_BUCKETS - 1] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double itl_le[SRV_N_BUCKETS - 1] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

double fp4_server_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* one request on a connection */
typedef struct req {
    char *body;
    size_t n, cap;
    int too_big, status;
    int64_t n_prompt, n_gen;
    const char *finish;
    struct srv_job *job; /* a streamed request: its counts come at the end */
    double t0;
    char method[8], url[96];
} req;

int fp4_server_reply(struct MHD_Connection *c, int status, char *body, const char *ctype) {
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) return free(body), MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    int rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

int fp4_server_reply_fail(struct MHD_Connection *c, const srv_fail *f) {
    return fp4_server_reply(c, f->status, fp4_server_error_json(f), "application/json");
}

static int fail(struct MHD_Connection *c, req *q, int status, const char *type, const char *param,
                const char *msg) {
    srv_fail f;
    fp4_server_failf(&f, status, type, param, "%s", msg);
    q->status = status;
    return fp4_server_reply_fail(c, &f);
}

/* "Bearer KEY" against the key: every byte of both looked at, whatever differs */
static int key_ok(const char *key, const char *auth) {
    if (!auth || strncmp(auth, "Bearer ", 7)) return 0;
    auth += 7;
    size_t nk = strlen(key), na = strlen(auth);
    unsigned char d = (unsigned char)(nk != na);
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)(auth[i] ^ key[i % (nk ? nk : 1)]);
    return d == 0;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static int tokenize(srv *s, struct MHD_Connection *c, req *q) {
    srv_fail f = {0};
    char *text;
    size_t len, n_ids = 0;
    int add_special;
    int32_t *ids = NULL;
    if (fp4_server_parse_tokenize(q->body, q->n, &text, &len, &add_special, &f))
        return q->status = f.status, fp4_server_reply_fail(c, &f);
    fp4_status st =
        fp4_tokenizer_encode(s->tok, text, len, add_special ? FP4_TOK_ADD_SPECIAL : 0, &ids, &n_ids);
    free(text);
    if (st) return fail(c, q, 500, "server_error", "content", "cannot encode the text");
    json_t *a = json_array();
    for (size_t i = 0; i < n_ids; i++)
        json_array_append_new(a, json_integer(ids[i]));
    free(ids);
    json_t *o = json_pack("{s:o}", "tokens", a);
    char *js = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return q->status = 200, fp4_server_reply(c, 200, js, "application/json");
}

static int detokenize(srv *s, struct MHD_Connection *c, req *q) {
    srv_fail f = {0};
    int32_t *ids;
    size_t n_ids, len;
    char *text = NULL;
    if (fp4_server_parse_detokenize(q->body, q->n, &ids, &n_ids, &f))
        return q->status = f.status, fp4_server_reply_fail(c, &f);
    fp4_error err;
    fp4_status st = fp4_tokenizer_decode(s->tok, ids, n_ids, 0, &text, &len, &err);
    free(ids);
    if (st) return fail(c, q, 400, "invalid_request_error", "tokens", err.msg);
    json_t *o = json_pack("{s:s%}", "content", text, len);
    free(text);
    char *js = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return q->status = 200, fp4_server_reply(c, 200, js, "application/json");
}

static int models(srv *s, struct MHD_Connection *c, req *q) {
    json_t *o = json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list", "data", "id", s->name, "object",
                          "model", "created", (json_int_t)s->created, "owned_by", "fp4lane");
    char *js = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return q->status = 200, fp4_server_reply(c, 200, js, "application/json");
}

/* the routes once the body is in */
static int route(srv *s, struct MHD_Connection *c, req *q) {
    const int get = !strcmp(q->method, "GET"), post = !strcmp(q->method, "POST");
    const char *u = q->url;
    if (!strcmp(u, "/health")) {
        if (!get) return fail(c, q, 405, "invalid_request_error", "", "use GET");
        int ok = s->ready && !s->draining;
        q->status = ok ? 200 : 503;
        return fp4_server_reply(c, q->status,
                                dup_str(ok            ? "{\"status\":\"ok\"}"
                                        : s->draining ? "{\"status\":\"draining\"}"
                                                      : "{\"status\":\"loading\"}"),
                                "application/json");
    }
    if (!strcmp(u, "/") || !strcmp(u, "/index.html")) {
        if (!get) return fail(c, q, 405, "invalid_request_error", "", "use GET");
        return q->status = 200,
               fp4_server_reply(c, 200, dup_str(fp4_server_page), "text/html; charset=utf-8");
    }
    static const char *const known[] = {
        "/v1/chat/completions", "/v1/completions", "/v1/models", "/metrics", "/tokenize", "/detokenize"};
    int k = -1;
    for (int i = 0; i < 6; i++)
        if (!strcmp(u, known[i])) k = i;
    if (k < 0) return fail(c, q, 404, "invalid_request_error", "", "no such endpoint");
    if (s->o.api_key &&
        !key_ok(s->o.api_key, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")))
        return fail(c, q, 401, "invalid_request_error", "",
                    "missing or wrong API key (Authorization: Bearer KEY)");
    if ((k == 2 || k == 3) != get || (k != 2 && k != 3 && !post))
        return fail(c, q, 405, "invalid_request_error", "", k == 2 || k == 3 ? "use GET" : "use POST");
    if (!s->ready) return fail(c, q, 503, "server_error", "", "the model is loading");
    if (k == 3) {
        q->status = 200;
        return fp4_server_reply(c, 200, fp4_server_metrics(s), "text/plain; version=0.0.4");
    }
    if (k == 2) return models(s, c, q);
    if (q->too_big) {
        char m[96];
        snprintf(m, sizeof m, "the body is larger than %zu bytes", s->o.max_body);
        return fail(c, q, 413, "invalid_request_error", "", m);
    }
    if (k == 4) return tokenize(s, c, q);
    if (k == 5) return detokenize(s, c, q);
    if (s->draining) return fail(c, q, 503, "server_error", "", "the server is shutting down");
    return fp4_server_generate(s, c, q->body ? q->body : "", q->n, k == 0, &q->status, &q->n_prompt,
                               &q->n_gen, &q->finish, &q->job);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *data, size_t *size, void **ctx) {
    srv *s = cls;
    (void)version;
    req *q = *ctx;
    if (!q) {
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        q->t0 = fp4_server_now();
        snprintf(q->method, sizeof q->method, "%s", method);
        snprintf(q->url, sizeof q->url, "%s", url);
        *ctx = q;
        return MHD_YES;
    }
    if (*size) {
        if (!q->too_big && q->n + *size > s->o.max_body)
            q->too_big = 1, free(q->body), q->body = NULL, q->n = 0;
        if (!q->too_big) {
            if (q->n + *size + 1 > q->cap) {
                size_t cap = q->n + *size + 1 > 2 * q->cap ? q->n + *size + 1 : 2 * q->cap;
                char *b = realloc(q->body, cap);
                if (!b) return MHD_NO;
                q->body = b, q->cap = cap;
            }
            memcpy(q->body + q->n, data, *size);
            q->n += *size;
            q->body[q->n] = 0;
        }
        *size = 0;
        return MHD_YES;
    }
    return route(s, c, q) == MHD_YES ? MHD_YES : MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode why) {
    srv *s = cls;
    req *q = *ctx;
    (void)c;
    if (!q) return;
    pthread_mutex_lock(&s->mu);
    s->requests++;
    s->failed += q->status >= 400 || !q->status;
    pthread_mutex_unlock(&s->mu);
    int64_t cancel_steps = -1;
    if (q->job) fp4_server_job_log(q->job, &q->n_prompt, &q->n_gen, &q->finish, &cancel_steps);
    if (s->o.log) {
        char line[320], after[80] = "";
        if (cancel_steps >= 0)
            snprintf(after, sizeof after, " %lld step(s) after its client left", (long long)cancel_steps);
        snprintf(line, sizeof line, "%s %s %d %.3fs prompt=%lld gen=%lld%s%s%s%s", q->method, q->url,
                 q->status,
                 fp4_server_now() - q->t0, (long long)q->n_prompt, (long long)q->n_gen, q->finish ? " " : "",
                 q->finish ? q->finish : "", after,
                 why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
        s->o.log(s->o.log_user, line);
    }
    free(q->body), free(q);
    *ctx = NULL;
}

static void logf_(srv *s, const char *fmt, const char *a, long long b) {
    if (!s->o.log) return;
    char line[1200];
    snprintf(line, sizeof line, fmt, a, b);
    s->o.log(s->o.log_user, line);
}

/* the model, its tokenizer, EOS set, chat template and the scheduler */
static fp4_status load(srv *s, fp4_error *err) {
    fp4_status st = fp4_model_open(s->o.model, NULL, &s->m, err);
    if (st) return st;
    fp4_rt_opts ro = {0};
    ro.mode = s->o.mode, ro.device = s->o.device, ro.n_threads = s->o.threads, ro.n_ctx = s->o.ctx;
    ro.max_seqs = s->o.parallel > 0 ? s->o.parallel : 1;
    ro.tp = s->o.tp, ro.cuda_lib = s->o.cuda_lib;
    if ((st = fp4_rt_create(s->m, &ro, &s->rt, err))) return st;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", s->o.model);
    size_t l = strlen(dir);
    if (l > 12 && !strcmp(dir + l - 12, ".safetensors")) {
        char *sl = strrchr(dir, '/');
        snprintf(sl ? sl : dir, sizeof dir - (size_t)(sl ? sl - dir : 0), "%s", sl ? "" : ".");
    }
    if ((st = fp4_tokenizer_load(dir, &s->tok, err))) return st;
    int n = 0;
    if ((st = fp4_generation_eos(s->o.model, s->eos, FP4_ARCH_MAX_EOS, &n, err))) return st;
    const fp4_arch *ar = fp4_rt_arch(s->rt);
    for (int i = 0; !n && i < ar->n_eos; i++)
        s->eos[i] = ar->eos[i], n = ar->n_eos;
    if (!n && fp4_tokenizer_eos(s->tok) >= 0) s->eos[n++] = fp4_tokenizer_eos(s->tok);
    s->n_eos = n;
    const char *t;
    size_t tl;
    int32_t b = fp4_tokenizer_bos(s->tok), e = fp4_tokenizer_eos(s->tok);
    if (b >= 0 && !fp4_tokenizer_token(s->tok, b, &t, &tl))
        snprintf(s->bos_s, sizeof s->bos_s, "%.*s", (int)tl, t);
    if (e >= 0 && !fp4_tokenizer_token(s->tok, e, &t, &tl))
        snprintf(s->eos_s, sizeof s->eos_s, "%.*s", (int)tl, t);
    char *tmpl = NULL;
    s->tmpl = -1;
    if (!fp4_chat_template_read(s->o.model, &tmpl, err)) s->tmpl = fp4_chat_template_detect(tmpl);
    free(tmpl);
    int64_t pb = s->o.prefix_blocks;
    const int64_t block = fp4_rt_kv_blocks(s->rt, NULL, NULL);
    if (!pb) pb = (fp4_rt_n_ctx(s->rt) + block - 1) / block;
    if (pb > 0 && (st = fp4_prefix_cache_create(pb, &s->prefix, err))) return st;
    fp4_sched_opts so = {.max_running = ro.max_seqs, .max_queue = s->o.max_queue, .prefix = s->prefix};
    return fp4_sched_create(s->rt, &so, &s->sched, err);
}

static fp4_status listen_addr(const srv_opts *o, struct sockaddr_in *a, fp4_error *err) {
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)o->port);
    const char *h = !o->host || !strcmp(o->host, "localhost") ? "127.0.0.1" : o->host;
    if (inet_pton(AF_INET, h, &a->sin_addr) != 1) {
        err->code = FP4_ERR_INVALID_ARG;
        snprintf(err->rule, sizeof err->rule, "serve.host");
        snprintf(err->msg, sizeof err->msg, "--host %.100s: give an IPv4 address (default 127.0.0.1)",
                 o->host);
        return FP4_ERR_INVALID_ARG;
    }
    return FP4_OK;
}

static void teardown(srv *s) {
    if (s->d) MHD_stop_daemon(s->d);
    fp4_sched_free(s->sched);
    fp4_prefix_cache_free(s->prefix);
    fp4_rt_free(s->rt);
    fp4_model_close(s->m);
    fp4_tokenizer_free(s->tok);
    pthread_mutex_destroy(&s->mu);
}

fp4_status fp4_server_run(const srv_opts *o, fp4_error *err) {
    srv *s = calloc(1, sizeof *s);
    if (!s) return FP4_ERR_NOMEM;
    s->o = *o;
    if (!s->o.max_body) s->o.max_body = SRV_MAX_BODY_DEFAULT;
    const char *sl = strrchr(o->model, '/');
    while (sl && !sl[1] && sl > o->model) { /* a trailing slash: the folder's own name */
        const char *p = sl - 1;
        while (p > o->model && *p != '/')
            p--;
        snprintf(s->name, sizeof s->name, "%.*s", (int)(sl - p - (*p == '/')), p + (*p == '/'));
        sl = NULL;
    }
    if (o->name)
        snprintf(s->name, sizeof s->name, "%s", o->name);
    else if (!s->name[0])
        snprintf(s->name, sizeof s->name, "%s", sl ? sl + 1 : o->model);
    s->created = (long)time(NULL);
    s->ttft.le = ttft_le, s->itl.le = itl_le;
    pthread_mutex_init(&s->mu, NULL);
    struct sockaddr_in addr;
    fp4_status st = listen_addr(o, &addr, err);
    if (!st) {
        s->d = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL, NULL,
            handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)SRV_CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)(o->conn_per_ip > 0 ? o->conn_per_ip : SRV_CONN_PER_IP_DEFAULT),
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_CONN_TIMEOUT,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
            completed, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
        if (!s->d) {
            st = err->code = FP4_ERR_IO;
            snprintf(err->rule, sizeof err->rule, "serve.listen");
            snprintf(err->msg, sizeof err->msg, "cannot listen on %s:%d (in use?)",
                     o->host ? o->host : "127.0.0.1", o->port);
        }
    }
    if (!st) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
        logf_(s, "fp4lane serve: listening on http://%s:%lld (loading the model)",
              o->host ? o->host : "127.0.0.1", di ? (long long)di->port : (long long)o->port);
        st = load(s, err);
    }
    if (!st) {
        s->ready = 1;
        logf_(s, "fp4lane serve: ready: model %s, %lld sequences", s->name,
              (long long)(o->parallel > 0 ? o->parallel : 1));
        while (!*o->stop)
            usleep(20 * 1000);
        s->draining = 1;
        logf_(s, "fp4lane serve: %s%lld: draining", "stopping, requests in flight ", (long long)s->active);
        for (;;) {
            pthread_mutex_lock(&s->mu);
            int64_t a = s->active;
            pthread_mutex_unlock(&s->mu);
            fp4_sched_stats ss = fp4_sched_get_stats(s->sched);
            if (!a && !ss.running && !ss.queued) break;
            usleep(20 * 1000);
        }
        logf_(s, "fp4lane serve: %s%lld", "drained, requests served: ", (long long)s->requests);
    }
    teardown(s);
    free(s);
    return st;
}
