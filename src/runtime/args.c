/* args.c — the values a user gives the runtime (fp4_arg_parse) and the room a generation needs
 * (fp4_rt_check_room): one table of ranges, so the CLI and the Python binding refuse the same
 * values with the same rule instead of each front end keeping (and drifting from) its own. */
#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef enum { ARG_INT, ARG_UINT, ARG_REAL, ARG_SIZE } arg_kind;

static const struct arg_row {
    const char *name;
    arg_kind kind;
    int64_t lo, hi;  /* ARG_INT */
    double flo, fhi; /* ARG_REAL */
} arg_rows[] = {
    {"threads", ARG_INT, 1, FP4_MAX_THREADS, 0, 0},
    {"tp", ARG_INT, 1, 64, 0, 0},
    {"ctx", ARG_INT, 1, 1 << 24, 0, 0},
    {"max_seqs", ARG_INT, 1, 4096, 0, 0},
    {"prefill_chunk", ARG_INT, 0, 1 << 20, 0, 0},
    {"draft_n", ARG_INT, 1, FP4_SPEC_MAX_DRAFT, 0, 0},
    {"n", ARG_INT, 0, INT64_MAX, 0, 0},
    {"token", ARG_INT, 0, INT32_MAX, 0, 0},
    {"top_k", ARG_INT, 0, INT32_MAX, 0, 0},
    {"penalty_last_n", ARG_INT, 0, INT32_MAX, 0, 0},
    {"temperature", ARG_REAL, 0, 0, 0, 100},
    {"top_p", ARG_REAL, 0, 0, 0, 1},
    {"min_p", ARG_REAL, 0, 0, 0, 1},
    {"repeat_penalty", ARG_REAL, 0, 0, 1e-3, 100},
    {"presence_penalty", ARG_REAL, 0, 0, -100, 100},
    {"seed", ARG_UINT, 0, 0, 0, 0},
    {"shard_size", ARG_SIZE, 0, 0, 0, 0},
};

/* the user's text for a message: at most 40 bytes, control bytes and non-ASCII as '?' */
static void quote(const char *text, char *q, size_t n) {
    size_t k = 0;
    for (; text[k] && k + 1 < n && k < 40; k++)
        q[k] = (unsigned char)text[k] < 0x20 || (unsigned char)text[k] >= 0x7F ? '?' : text[k];
    q[k] = 0;
    if (text[k] && n > 44) memcpy(q + k, "...", 4);
}

static fp4_status refuse(const struct arg_row *r, const char *label, const char *text, fp4_error *err) {
    char q[48], rule[64], what[96];
    quote(text, q, sizeof q);
    snprintf(rule, sizeof rule, "arg.%s", r->name);
    switch (r->kind) {
    case ARG_INT:
        snprintf(what, sizeof what, "expected an integer in [%lld, %lld]", (long long)r->lo,
                 (long long)r->hi);
        break;
    case ARG_UINT:
        snprintf(what, sizeof what, "expected an integer in [0, %llu]", (unsigned long long)UINT64_MAX);
        break;
    case ARG_REAL:
        snprintf(what, sizeof what, "expected a number in [%g, %g]", r->flo, r->fhi);
        break;
    default:
        snprintf(what, sizeof what, "expected a byte count: digits, then K, M or G, at most 2^62");
    }
    return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, rule, "%s %s: %s", label, q, what);
}

/* decimal digits after an optional '-' (strtoll/strtoull would also take space and '+') */
static int integer_text(const char *s) {
    if (*s == '-') s++;
    if (*s < '0' || *s > '9') return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    return 1;
}

/* cli_parse_size's grammar: digits, then nothing or one of K, M, G; the product fits in 62 bits */
static int parse_size(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return -1;
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_C(1) << 62) / 10) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    int shift = *p == 'K' ? 10 : *p == 'M' ? 20 : *p == 'G' ? 30 : 0;
    if (shift) p++;
    if (*p || v > (UINT64_C(1) << 62) >> shift) return -1;
    *out = v << shift;
    return 0;
}

static int parse_row(const struct arg_row *r, const char *text, fp4_arg_val *v) {
    char *end;
    errno = 0;
    switch (r->kind) {
    case ARG_INT: {
        if (!integer_text(text)) return -1;
        long long x = strtoll(text, &end, 10);
        if (*end || errno || x < r->lo || x > r->hi) return -1;
        v->i = x, v->u = x >= 0 ? (uint64_t)x : 0, v->f = (double)x;
        return 0;
    }
    case ARG_UINT: {
        if (!integer_text(text) || text[0] == '-') return -1;
        unsigned long long x = strtoull(text, &end, 10);
        if (*end || errno) return -1;
        v->u = x, v->f = (double)x;
        return 0;
    }
    case ARG_REAL: {
        float x = strtof(text, &end);
        if (end == text || *end || !isfinite(x) || !(x >= r->flo && x <= r->fhi)) return -1;
        v->f = x;
        return 0;
    }
    default:
        if (parse_size(text, &v->u)) return -1;
        v->f = (double)v->u;
        return 0;
    }
}

fp4_status fp4_arg_parse(const char *name, const char *label, const char *text, fp4_arg_val *out,
                         fp4_error *err) {
    fp4_error_clear(err);
    const struct arg_row *r = NULL;
    for (size_t k = 0; name && !r && k < sizeof arg_rows / sizeof arg_rows[0]; k++)
        if (!strcmp(arg_rows[k].name, name)) r = &arg_rows[k];
    if (!r)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, NULL, "arg.name", "no argument named %s",
                        name ? name : "(null)");
    fp4_arg_val v = {0, 0, 0};
    if (!label) label = name;
    if (!text) return refuse(r, label, "(missing)", err);
    if (parse_row(r, text, &v)) return refuse(r, label, text, err);
    if (out) *out = v;
    return FP4_OK;
}

fp4_status fp4_rt_check_room(const fp4_rt *rt, int32_t seq, int64_t n_prompt, int64_t n_gen, fp4_error *err) {
    fp4_error_clear(err);
    if (!rt || n_prompt < 0 || n_gen < 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.context", "negative token count");
    const int64_t cached = seq < 0 ? 0 : fp4_rt_seq_pos(rt, seq);
    if (cached < 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.seq", "sequence %d is not open", seq);
    int64_t need;
    if (fp4_add_overflow_i64(cached, n_prompt, &need) || fp4_add_overflow_i64(need, n_gen, &need) ||
        need > fp4_rt_n_ctx(rt))
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "rt.context",
                        "%lld cached + %lld prompt + %lld tokens to generate is past the context length %lld",
                        (long long)cached, (long long)n_prompt, (long long)n_gen,
                        (long long)fp4_rt_n_ctx(rt));
    return FP4_OK;
}
