/* stop.c — stop strings over streamed text: what is safe to print now, what must be held back
 * because it may be the start of a stop string that the next tokens complete, and where the first
 * stop string begins. The held-back text is at most (longest stop string - 1) bytes. */
#include "fp4_impl.h"
#include "fp4lane_text.h"
#include <stdlib.h>
#include <string.h>

struct fp4_stop_filter {
    char **stop;
    size_t *len, n, max_len;
    char *buf; /* held-back text, then the newly pushed text */
    size_t n_buf, cap;
    int stopped;
};

void fp4_stop_filter_free(fp4_stop_filter *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++)
        free(f->stop[i]);
    free(f->stop), free(f->len), free(f->buf), free(f);
}

/* strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF) */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (!k || (k == 2 && c < 0xC2) || (c == 0xF4 && i + 1 < n && s[i + 1] > 0x8F) || c > 0xF4 ||
            i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        if (k == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F))) return 0;
        if (k == 4 && c == 0xF0 && s[i + 1] < 0x90) return 0;
        i += k;
    }
    return 1;
}

fp4_status fp4_stop_filter_create(const char *const *stops, size_t n, fp4_stop_filter **out, fp4_error *err) {
    if (!out || (n && !stops))
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stop.arg", "NULL argument");
    *out = NULL;
    if (n > FP4_STOP_MAX)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "stop.count", "%zu stop strings (at most %d)", n,
                        FP4_STOP_MAX);
    for (size_t i = 0; i < n; i++) {
        size_t l = stops[i] ? strlen(stops[i]) : 0;
        if (!l)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stop.empty", "stop string %zu is empty",
                            i + 1);
        if (l > FP4_STOP_MAX_BYTES)
            return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "stop.length",
                            "stop string %zu is %zu bytes (at most %d)", i + 1, l, FP4_STOP_MAX_BYTES);
        if (!utf8_valid((const unsigned char *)stops[i], l))
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "stop.utf8",
                            "stop string %zu is not valid UTF-8", i + 1);
    }
    fp4_stop_filter *f = calloc(1, sizeof *f);
    if (!f || (n && (!(f->stop = calloc(n, sizeof *f->stop)) || !(f->len = calloc(n, sizeof *f->len))))) {
        fp4_stop_filter_free(f);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "stop.nomem", "out of memory");
    }
    for (size_t i = 0; i < n; i++, f->n++) {
        f->len[i] = strlen(stops[i]);
        if (!(f->stop[i] = malloc(f->len[i] + 1))) {
            fp4_stop_filter_free(f);
            return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "stop.nomem", "out of memory");
        }
        memcpy(f->stop[i], stops[i], f->len[i] + 1);
        if (f->len[i] > f->max_len) f->max_len = f->len[i];
    }
    *out = f;
    return FP4_OK;
}

static const char *find(const char *h, size_t hn, const char *x, size_t xn) {
    for (size_t i = 0; i + xn <= hn; i++)
        if (h[i] == x[0] && !memcmp(h + i, x, xn)) return h + i;
    return NULL;
}

fp4_status fp4_stop_filter_push(fp4_stop_filter *f, const char *text, size_t len, const char **out,
                                size_t *out_len, int *stopped) {
    if (!f || !out || !out_len || !stopped || (len && !text)) return FP4_ERR_INVALID_ARG;
    *out = "", *out_len = 0, *stopped = f->stopped;
    if (f->stopped) return FP4_OK; /* nothing after a stop string */
    /* the text returned last time was at the front of buf: drop it, keep what was held back */
    if (f->n_buf + len + 1 > f->cap) {
        size_t cap = f->n_buf + len + 1 > 2 * f->cap ? f->n_buf + len + 1 : 2 * f->cap;
        char *b = realloc(f->buf, cap);
        if (!b) return FP4_ERR_NOMEM;
        f->buf = b, f->cap = cap;
    }
    if (len) memcpy(f->buf + f->n_buf, text, len);
    f->n_buf += len;
    /* the earliest stop string wins */
    const char *first = NULL;
    for (size_t i = 0; i < f->n; i++) {
        const char *p = find(f->buf, f->n_buf, f->stop[i], f->len[i]);
        if (p && (!first || p < first)) first = p;
    }
    size_t emit;
    if (first) {
        emit = (size_t)(first - f->buf);
        f->stopped = 1;
        *stopped = 1;
    } else {
        /* hold back the longest tail that is a proper prefix of some stop string */
        size_t hold = 0;
        for (size_t i = 0; i < f->n; i++)
            for (size_t k = f->len[i] - 1; k > hold; k--)
                if (k <= f->n_buf && !memcmp(f->buf + f->n_buf - k, f->stop[i], k)) {
                    hold = k;
                    break;
                }
        emit = f->n_buf - hold;
    }
    if (f->n_buf + emit + 1 > f->cap) {
        char *b = realloc(f->buf, f->n_buf + emit + 1);
        if (!b) return FP4_ERR_NOMEM;
        f->buf = b, f->cap = f->n_buf + emit + 1;
    }
    /* layout after the call: [held][emitted copy] — the held text stays at the front */
    size_t held = f->stopped ? 0 : f->n_buf - emit;
    memmove(f->buf + f->n_buf, f->buf, emit);        /* the emitted text, copied past the end */
    memmove(f->buf, f->buf + emit, held);            /* the held-back tail to the front      */
    memmove(f->buf + held, f->buf + f->n_buf, emit); /* the emitted text right after it     */
    f->buf[held + emit] = 0;
    f->n_buf = held;
    *out = f->buf + held;
    *out_len = emit;
    return FP4_OK;
}

fp4_status fp4_stop_filter_flush(fp4_stop_filter *f, const char **out, size_t *out_len) {
    if (!f || !out || !out_len) return FP4_ERR_INVALID_ARG;
    if (f->stopped) {
        *out = "", *out_len = 0;
        return FP4_OK;
    }
    /* the end of the text: what was held back can no longer become a stop string */
    if (f->n_buf + 1 > f->cap) {
        char *b = realloc(f->buf, f->n_buf + 1);
        if (!b) return FP4_ERR_NOMEM;
        f->buf = b, f->cap = f->n_buf + 1;
    }
    f->buf[f->n_buf] = 0;
    *out = f->buf, *out_len = f->n_buf;
    f->n_buf = 0;
    return FP4_OK;
}

int fp4_stop_filter_stopped(const fp4_stop_filter *f) {
    return f ? f->stopped : 0;
}
