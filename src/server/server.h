/* server.h — fp4lane serve: an OpenAI-compatible HTTP server (docs/SERVE.md) over fp4_sched.
 * http.c: libmicrohttpd, routes, authentication, the access log, draining; gen.c: the generation
 * requests (jobs fed by the scheduler's callbacks, SSE), metrics; api.c: request bodies parsed
 * and checked (hostile input: the fuzz target fuzz/fuzz_request.c), OpenAI's error shape. */
#ifndef FP4_SERVER_H
#define FP4_SERVER_H

#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#define SRV_MAX_BODY_DEFAULT (1u << 20) /* request body bytes                                   */
#define SRV_MAX_MESSAGES 1024
#define SRV_MAX_STOPS 4             /* OpenAI's bound on `stop`                              */
#define SRV_MAX_TOKEN_IDS (1 << 20) /* /detokenize ids                                       */

/* The line writer for the access log and the start-up lines (the CLI: stderr). */
typedef void (*srv_log_fn)(void *user, const char *line);

typedef struct srv_opts {
    const char *model;   /* checkpoint path                                                   */
    const char *name;    /* the model's id in the API (default: the path's last component)    */
    const char *host;    /* numeric IPv4 or "localhost"; default 127.0.0.1                    */
    int port;            /* 0: any free port (the log's "listening" line names it)            */
    const char *api_key; /* NULL: no authentication                                           */
    int parallel;        /* requests decoded together (sequences)                             */
    int max_queue;       /* requests waiting beyond those                                     */
    int64_t ctx;         /* context per sequence; 0: the engine's default                     */
    fp4_device device;
    fp4_mode mode;
    int threads;
    size_t max_body; /* 0: SRV_MAX_BODY_DEFAULT                                           */
    int64_t prefix_blocks; /* prefix cache blocks; 0: one context's worth, < 0: none            */
    int conn_per_ip;       /* connections one client address may hold; 0: 64                    */
    srv_log_fn log;
    void *log_user;
    volatile sig_atomic_t *stop; /* set (SIGTERM): drain and return                              */
    int tp;                      /* in-process ranks of the split engine (fp4_rt_opts.tp); 0, 1: none */
    const char *cuda_lib;        /* fp4_rt_opts.cuda_lib; NULL: the default search               */
} srv_opts;

/* Listens, loads the model (GET /health says 503 until then), serves until *stop, then drains:
 * new requests get 503, running ones finish. FP4_OK, or the load / listen failure in err. */
fp4_status fp4_server_run(const srv_opts *o, fp4_error *err);

/* A generation request's body, checked. Strings point into root (json_decref(root) frees all). */
typedef struct srv_gen {
    json_t *root;
    int chat; /* /v1/chat/completions (messages) or /v1/completions (prompt)                 */
    fp4_chat_msg msgs[SRV_MAX_MESSAGES];
    size_t n_msgs;
    const char *prompt; /* completions: the prompt text                                          */
    size_t prompt_len;
    int stream, include_usage;
    int64_t max_tokens; /* -1: what the context leaves                                           */
    fp4_sampler_params sp;
    const char *stops[SRV_MAX_STOPS];
    int n_stops;
    int logprobs, top_logprobs;
    int echo;
} srv_gen;

/* A refusal: HTTP status, OpenAI's error type, the parameter at fault (may be ""), a message. */
typedef struct srv_fail {
    int status;
    char type[48], param[48], msg[256];
} srv_fail;

/* Parses and checks a body for chat (chat = 1) or completions; model: the id served (a request
 * naming another model is refused). 0, or -1 with f filled (400 naming the field). */
int fp4_server_parse_gen(const char *body, size_t n, int chat, const char *model, srv_gen *g, srv_fail *f);
void fp4_server_gen_free(srv_gen *g);
/* /tokenize {"content": str, "add_special": bool} and /detokenize {"tokens": [int...]}: the
 * parsed fields (ids malloc'd), 0 or -1 with f filled. */
int fp4_server_parse_tokenize(const char *body, size_t n, char **text, size_t *len, int *add_special,
                              srv_fail *f);
int fp4_server_parse_detokenize(const char *body, size_t n, int32_t **ids, size_t *n_ids, srv_fail *f);

/* OpenAI's error body: {"error":{"message","type","param","code"}} (malloc'd). */
char *fp4_server_error_json(const srv_fail *f);
int fp4_server_failf(srv_fail *f, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The chat page served at / (page.c). */
extern const char fp4_server_page[];

/* The server's state (http.c) and the generation requests (gen.c). */
#include <pthread.h>
struct MHD_Daemon;
struct MHD_Connection;

#define SRV_N_BUCKETS 11
typedef struct srv_hist {
    const double *le; /* SRV_N_BUCKETS - 1 upper bounds, then +Inf                             */
    uint64_t count[SRV_N_BUCKETS];
    double sum;
    uint64_t n;
} srv_hist;

typedef struct srv {
    srv_opts o;
    char name[256];
    fp4_model *m;
    fp4_rt *rt;
    fp4_tokenizer *tok;
    fp4_sched *sched;
    fp4_prefix_cache *prefix; /* NULL: none                                                     */
    int tmpl; /* chat template id, -1: none (chat refused)                              */
    char bos_s[256], eos_s[256];
    int32_t eos[FP4_ARCH_MAX_EOS];
    int n_eos;
    volatile int ready, draining;
    struct MHD_Daemon *d;
    long created;
    pthread_mutex_t mu; /* what follows                                                          */
    int64_t active;     /* generation requests not yet answered                                  */
    uint64_t requests, failed, prompt_tokens, gen_tokens;
    uint64_t finish[5];
    srv_hist ttft, itl;
} srv;

/* gen.c: POST /v1/chat/completions and /v1/completions; GET /metrics */
struct srv_job;
int fp4_server_generate(srv *s, struct MHD_Connection *c, const char *body, size_t n, int chat, int *status,
                        int64_t *n_prompt, int64_t *n_gen, const char **finish, struct srv_job **stream);
/* a streamed request's counts and finish for its access-log line, then its reference dropped; a
 * request still running (its client went away) is cancelled and waited for (bounded): cancel_steps
 * is the engine steps between the cancel and its end (-1: not cancelled by its client) */
void fp4_server_job_log(struct srv_job *j, int64_t *n_prompt, int64_t *n_gen, const char **finish,
                        int64_t *cancel_steps);
char *fp4_server_metrics(srv *s);
void fp4_server_hist_add(srv *s, srv_hist *h, double v);
/* http.c: queue a JSON body (taken) or an error */
int fp4_server_reply(struct MHD_Connection *c, int status, char *json, const char *ctype);
int fp4_server_reply_fail(struct MHD_Connection *c, const srv_fail *f);
double fp4_server_now(void);

#endif
