/* api.c — request bodies of the OpenAI API, parsed with jansson (which refuses invalid UTF-8 and
 * bad JSON) and checked field by field: a refusal names the field (400), everything a request
 * may hold is bounded. What fp4lane does not do yet (n > 1, response_format json_object, tools,
 * frequency penalties) is refused, never silently ignored. */
#include "server/server.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fp4_server_failf(srv_fail *f, int status, const char *type, const char *param, const char *fmt, ...) {
    f->status = status;
    snprintf(f->type, sizeof f->type, "%s", type);
    snprintf(f->param, sizeof f->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return -1;
}

char *fp4_server_error_json(const srv_fail *f) {
    json_t *e = json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", f->msg, "type", f->type, "param",
                          f->param[0] ? json_string(f->param) : json_null(), "code",
                          f->status == 429 ? json_string("queue_full") : json_null());
    char *s = e ? json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(e);
    return s;
}

static int bad(srv_fail *f, const char *param, const char *fmt, const char *what) {
    return fp4_server_failf(f, 400, "invalid_request_error", param, fmt, param, what);
}

static json_t *load(const char *body, size_t n, srv_fail *f) {
    json_error_t je;
    json_t *root = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fp4_server_failf(f, 400, "invalid_request_error", "", "the body is not valid JSON: %s (line %d)",
                         je.text, je.line);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fp4_server_failf(f, 400, "invalid_request_error", "", "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* number fields: NULL (absent, null) keeps *v; a number outside [lo, hi] is refused */
static int num(json_t *o, const char *k, double lo, double hi, double *v, srv_fail *f) {
    json_t *x = json_object_get(o, k);
    if (!x || json_is_null(x)) return 0;
    if (!json_is_number(x)) return bad(f, k, "'%s' must be %s", "a number");
    double d = json_number_value(x);
    if (!(d >= lo && d <= hi))
        return fp4_server_failf(f, 400, "invalid_request_error", k, "'%s' is %g: it must be in [%g, %g]", k,
                                d, lo, hi);
    *v = d;
    return 0;
}
static int integer(json_t *o, const char *k, long long lo, long long hi, long long *v, srv_fail *f) {
    json_t *x = json_object_get(o, k);
    if (!x || json_is_null(x)) return 0;
    if (!json_is_integer(x)) return bad(f, k, "'%s' must be %s", "an integer");
    long long d = json_integer_value(x);
    if (d < lo || d > hi)
        return fp4_server_failf(f, 400, "invalid_request_error", k,
                                "'%s' is %lld: it must be in [%lld, %lld]", k, d, lo, hi);
    *v = d;
    return 0;
}
static int boolean(json_t *o, const char *k, int *v, srv_fail *f) {
    json_t *x = json_object_get(o, k);
    if (!x || json_is_null(x)) return 0;
    if (!json_is_boolean(x)) return bad(f, k, "'%s' must be %s", "true or false");
    *v = json_is_true(x);
    return 0;
}

/* a message's content: a string, or an array of {"type":"text","text":...} parts (joined into a
 * string owned by the message object) */
static int content(json_t *m, const char **out, srv_fail *f) {
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c)) return *out = json_string_value(c), 0;
    if (!json_is_array(c)) return bad(f, "messages", "'%s': each message needs %s", "a string content");
    size_t total = 0, i;
    json_t *p;
    json_array_foreach(c, i, p) {
        json_t *t = json_object_get(p, "text");
        if (!json_is_string(json_object_get(p, "type")) ||
            strcmp(json_string_value(json_object_get(p, "type")), "text") || !json_is_string(t))
            return bad(f, "messages", "'%s': content parts must be %s",
                       "{\"type\": \"text\", \"text\": ...}");
        total += json_string_length(t);
    }
    char *s = malloc(total + 1);
    if (!s) return fp4_server_failf(f, 500, "server_error", "", "out of memory");
    size_t k = 0;
    json_array_foreach(c, i, p) {
        json_t *t = json_object_get(p, "text");
        memcpy(s + k, json_string_value(t), json_string_length(t));
        k += json_string_length(t);
    }
    s[k] = 0;
    json_t *js = json_stringn_nocheck(s, k);
    free(s);
    if (!js || json_object_set_new(m, "content", js))
        return fp4_server_failf(f, 500, "server_error", "", "no memory");
    *out = json_string_value(json_object_get(m, "content"));
    return 0;
}

static int messages(json_t *root, srv_gen *g, srv_fail *f) {
    json_t *a = json_object_get(root, "messages"), *m;
    size_t i;
    if (!json_is_array(a) || !json_array_size(a))
        return bad(f, "messages", "'%s' must be %s", "a non-empty array of messages");
    if (json_array_size(a) > SRV_MAX_MESSAGES)
        return fp4_server_failf(f, 400, "invalid_request_error", "messages", "more than %d messages",
                                SRV_MAX_MESSAGES);
    json_array_foreach(a, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role ||
            (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
             strcmp(role, "developer")))
            return bad(f, "messages", "'%s': each message needs %s", "a role: system, user or assistant");
        if (content(m, &g->msgs[i].content, f)) return -1;
        g->msgs[i].role = strcmp(role, "developer") ? role : "system";
    }
    g->n_msgs = json_array_size(a);
    return 0;
}

static int stops(json_t *root, srv_gen *g, srv_fail *f) {
    json_t *s = json_object_get(root, "stop"), *x;
    size_t i;
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) s = json_pack("[O]", s), json_object_set_new(root, "stop", s);
    if (!json_is_array(s) || json_array_size(s) > SRV_MAX_STOPS)
        return bad(f, "stop", "'%s' must be %s", "a string or an array of at most 4 strings");
    json_array_foreach(s, i, x) {
        if (!json_is_string(x) || !json_string_length(x) || json_string_length(x) > 1024)
            return bad(f, "stop", "'%s' must hold %s", "non-empty strings of at most 1024 bytes");
        g->stops[g->n_stops++] = json_string_value(x);
    }
    return 0;
}

/* fields that would change the answer in ways fp4lane does not do: refused by name */
static int refused(json_t *root, srv_fail *f) {
    json_t *rf = json_object_get(root, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!t || strcmp(t, "text"))
            return fp4_server_failf(f, 400, "invalid_request_error", "response_format",
                                    "response_format '%s' is not supported (only \"text\"): fp4lane has no "
                                    "constrained decoding yet",
                                    t ? t : "?");
    }
    static const char *const unsupported[] = {"tools", "functions", "tool_choice", "logit_bias", "suffix"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        json_t *x = json_object_get(root, unsupported[i]);
        if (x && !json_is_null(x) && !(json_is_array(x) && !json_array_size(x)))
            return fp4_server_failf(f, 400, "invalid_request_error", unsupported[i], "'%s' is not supported",
                                    unsupported[i]);
    }
    double fp = 0;
    if (num(root, "frequency_penalty", -2, 2, &fp, f)) return -1;
    if (fp != 0)
        return fp4_server_failf(f, 400, "invalid_request_error", "frequency_penalty",
                                "'frequency_penalty' is not supported (use presence_penalty)");
    long long n = 1, bo = 1;
    if (integer(root, "n", 1, 1, &n, f) || integer(root, "best_of", 1, 1, &bo, f)) return -1;
    return 0;
}

static int sampling(json_t *root, srv_gen *g, srv_fail *f) {
    double t = 1.0, tp = 1.0, pp = 0.0, mp = 0.0;
    long long seed = 0, mt = -1, mct = -1, tk = 0;
    if (num(root, "temperature", 0, 2, &t, f) || num(root, "top_p", 0, 1, &tp, f) ||
        num(root, "presence_penalty", -2, 2, &pp, f) || num(root, "min_p", 0, 1, &mp, f) ||
        integer(root, "top_k", 0, 1 << 30, &tk, f) || integer(root, "seed", INT64_MIN, INT64_MAX, &seed, f) ||
        integer(root, "max_tokens", 1, 1 << 24, &mt, f) ||
        integer(root, "max_completion_tokens", 1, 1 << 24, &mct, f))
        return -1;
    g->sp = fp4_sampler_defaults();
    g->sp.temperature = (float)t, g->sp.top_p = (float)tp, g->sp.presence_penalty = (float)pp;
    g->sp.min_p = (float)mp, g->sp.top_k = (int32_t)tk, g->sp.seed = (uint64_t)seed;
    g->max_tokens = mct > 0 ? mct : mt;
    return 0;
}

static int stream_opts(json_t *root, srv_gen *g, srv_fail *f) {
    if (boolean(root, "stream", &g->stream, f)) return -1;
    json_t *so = json_object_get(root, "stream_options");
    if (!so || json_is_null(so)) return 0;
    if (!json_is_object(so)) return bad(f, "stream_options", "'%s' must be %s", "an object");
    if (!g->stream)
        return fp4_server_failf(f, 400, "invalid_request_error", "stream_options",
                                "'stream_options' needs \"stream\": true");
    return boolean(so, "include_usage", &g->include_usage, f);
}

int fp4_server_parse_gen(const char *body, size_t n, int chat, const char *model, srv_gen *g, srv_fail *f) {
    memset(g, 0, sizeof *g);
    g->chat = chat;
    if (!(g->root = load(body, n, f))) return -1;
    json_t *root = g->root, *x;
    x = json_object_get(root, "model");
    if (x && !json_is_string(x)) return bad(f, "model", "'%s' must be %s", "a string");
    if (x && model && strcmp(json_string_value(x), model))
        return fp4_server_failf(f, 400, "invalid_request_error", "model",
                                "the model '%.80s' is not served here (this server serves '%.80s')",
                                json_string_value(x), model);
    if (refused(root, f) || sampling(root, g, f) || stops(root, g, f) || stream_opts(root, g, f)) return -1;
    if (chat) {
        if (messages(root, g, f) || boolean(root, "logprobs", &g->logprobs, f)) return -1;
        long long tl = 0;
        if (integer(root, "top_logprobs", 0, 20, &tl, f)) return -1;
        if (tl && !g->logprobs)
            return fp4_server_failf(f, 400, "invalid_request_error", "top_logprobs",
                                    "'top_logprobs' needs \"logprobs\": true");
        g->top_logprobs = (int)tl;
        return 0;
    }
    x = json_object_get(root, "prompt");
    if (json_is_array(x) && json_array_size(x) == 1 && json_is_string(json_array_get(x, 0)))
        x = json_array_get(x, 0);
    if (!json_is_string(x) || !json_string_length(x))
        return bad(f, "prompt", "'%s' must be %s", "a non-empty string");
    g->prompt = json_string_value(x), g->prompt_len = json_string_length(x);
    long long lp = -1;
    if (integer(root, "logprobs", 0, 5, &lp, f) || boolean(root, "echo", &g->echo, f)) return -1;
    if (g->echo) return fp4_server_failf(f, 400, "invalid_request_error", "echo", "'echo' is not supported");
    g->logprobs = lp >= 0, g->top_logprobs = lp > 0 ? (int)lp : 0;
    return 0;
}

void fp4_server_gen_free(srv_gen *g) {
    if (g) json_decref(g->root), g->root = NULL;
}

int fp4_server_parse_tokenize(const char *body, size_t n, char **text, size_t *len, int *add_special,
                              srv_fail *f) {
    *text = NULL, *len = 0, *add_special = 0;
    json_t *root = load(body, n, f);
    if (!root) return -1;
    json_t *c = json_object_get(root, "content");
    int rc = -1;
    if (!json_is_string(c))
        bad(f, "content", "'%s' must be %s", "a string");
    else if (!boolean(root, "add_special", add_special, f) && (*text = malloc(json_string_length(c) + 1))) {
        *len = json_string_length(c);
        memcpy(*text, json_string_value(c), *len + 1);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

int fp4_server_parse_detokenize(const char *body, size_t n, int32_t **ids, size_t *n_ids, srv_fail *f) {
    *ids = NULL, *n_ids = 0;
    json_t *root = load(body, n, f), *x;
    if (!root) return -1;
    json_t *a = json_object_get(root, "tokens");
    size_t i;
    int rc = -1;
    if (!json_is_array(a) || json_array_size(a) > SRV_MAX_TOKEN_IDS)
        bad(f, "tokens", "'%s' must be %s", "an array of token ids");
    else if ((*ids = malloc(sizeof(int32_t) * (json_array_size(a) + 1)))) {
        rc = 0;
        json_array_foreach(a, i, x) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
                rc = bad(f, "tokens", "'%s' must hold %s", "token ids (integers >= 0)");
                break;
            }
            (*ids)[i] = (int32_t)json_integer_value(x);
        }
        *n_ids = json_array_size(a);
        if (rc) free(*ids), *ids = NULL, *n_ids = 0;
    }
    json_decref(root);
    return rc;
}
