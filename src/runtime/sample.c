/* sample.c — deterministic samplers: greedy, temperature, top-k, top-p, min-p, repetition and
 * presence penalties, seeded with splitmix64 → xoshiro256**. Pure functions over a logits array
 * and a small state, so a GPU twin can follow the same steps: penalties → (greedy | temperature →
 * sort by logit desc, id asc → top-k → softmax in double → top-p → min-p → one draw). */
#include "fp4lane_runtime.h"
#include "format/argmax.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fp4_sampler {
    fp4_sampler_params p;
    int64_t vocab;
    uint64_t s[4];
    int32_t *hist; /* ring of the last penalty_last_n tokens (or all, growing)   */
    int64_t n_hist, cap_hist, head;
    float *work;
    struct cand {
        float l;
        int32_t id;
    } * cand;
    double *prob;
    uint8_t *seen;
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}
static uint64_t xoshiro(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
}

fp4_sampler_params fp4_sampler_defaults(void) {
    fp4_sampler_params p = {0};
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

void fp4_sampler_free(fp4_sampler *s) {
    if (!s) return;
    free(s->hist), free(s->work), free(s->cand), free(s->prob), free(s->seen);
    free(s);
}

fp4_status fp4_sampler_create(const fp4_sampler_params *p, int64_t vocab, fp4_sampler **out) {
    if (!p || !out || vocab <= 0 || vocab > (1 << 26)) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    /* NaN and infinities are refused; out-of-range values keep their documented meaning (off) */
    if (!isfinite(p->temperature) || !isfinite(p->top_p) || !isfinite(p->min_p) ||
        !(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty) || !isfinite(p->presence_penalty) ||
        p->penalty_last_n < 0)
        return FP4_ERR_INVALID_ARG;
    fp4_sampler *s = calloc(1, sizeof *s);
    if (!s) return FP4_ERR_NOMEM;
    s->p = *p;
    s->vocab = vocab;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->s[i] = splitmix64(&x);
    s->cap_hist = p->penalty_last_n > 0 ? p->penalty_last_n : 256;
    s->hist = malloc(sizeof *s->hist * (size_t)s->cap_hist);
    s->work = malloc(sizeof *s->work * (size_t)vocab);
    s->cand = malloc(sizeof *s->cand * (size_t)vocab);
    s->prob = malloc(sizeof *s->prob * (size_t)vocab);
    s->seen = calloc((size_t)vocab, 1);
    if (!s->hist || !s->work || !s->cand || !s->prob || !s->seen) {
        fp4_sampler_free(s);
        return FP4_ERR_NOMEM;
    }
    *out = s;
    return FP4_OK;
}

void fp4_sampler_accept(fp4_sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->vocab) return;
    if (s->p.penalty_last_n > 0) {
        s->hist[s->head] = token;
        s->head = (s->head + 1) % s->cap_hist;
        if (s->n_hist < s->cap_hist) s->n_hist++;
        return;
    }
    if (s->n_hist == s->cap_hist) {
        int32_t *h = realloc(s->hist, sizeof *h * (size_t)(s->cap_hist * 2));
        if (!h) return; /* the history stops growing; sampling stays deterministic for a given run */
        s->hist = h, s->cap_hist *= 2;
    }
    s->hist[s->n_hist++] = token;
}

/* logit descending, id ascending: a total order, so the result never depends on qsort's algorithm */
static int by_logit(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->l > y->l) return -1;
    if (x->l < y->l) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Greedy without penalties, straight from the logits (argmax.h): the same token as the general
 * path, which copies the logits with NaN as -inf and keeps the first maximum. */
static int plain_greedy(const fp4_sampler_params *p) {
    return !(p->temperature > 0.0f) && p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f;
}

int fp4_sampler_is_greedy(const fp4_sampler *s) {
    return s && plain_greedy(&s->p);
}

int32_t fp4_sampler_sample(fp4_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const int64_t V = s->vocab;
    if (plain_greedy(&s->p)) return fp4_rt_greedy_argmax(logits, V);
    float *w = s->work;
    memcpy(w, logits, sizeof *w * (size_t)V);
    for (int64_t i = 0; i < V; i++)
        if (w[i] != w[i]) w[i] = -INFINITY;
    if (s->p.repeat_penalty != 1.0f || s->p.presence_penalty != 0.0f) {
        for (int64_t i = 0; i < s->n_hist; i++) {
            int32_t t = s->hist[i];
            if (s->seen[t]) continue;
            s->seen[t] = 1;
            if (s->p.repeat_penalty != 1.0f)
                w[t] = w[t] > 0.0f ? w[t] / s->p.repeat_penalty : w[t] * s->p.repeat_penalty;
            w[t] -= s->p.presence_penalty;
        }
        for (int64_t i = 0; i < s->n_hist; i++)
            s->seen[s->hist[i]] = 0;
    }
    if (!(s->p.temperature > 0.0f)) {
        int64_t best = 0;
        for (int64_t i = 1; i < V; i++)
            if (w[i] > w[best]) best = i;
        return (int32_t)best;
    }
    int64_t n = V;
    if (s->p.top_k > 0 && s->p.top_k < V) {
        /* the k first of the total order, by a heap whose root is the worst kept candidate */
        n = s->p.top_k;
        struct cand *h = s->cand;
        for (int64_t i = 0; i < V; i++) {
            struct cand c = {w[i] / s->p.temperature, (int32_t)i};
            if (i < n) {
                int64_t j = i;
                h[j] = c;
                while (j > 0 && by_logit(&h[(j - 1) / 2], &h[j]) < 0) {
                    struct cand t = h[j];
                    h[j] = h[(j - 1) / 2], h[(j - 1) / 2] = t, j = (j - 1) / 2;
                }
            } else if (by_logit(&c, &h[0]) < 0) {
                int64_t j = 0;
                h[0] = c;
                for (;;) {
                    int64_t l = 2 * j + 1, r = l + 1, m = j;
                    if (l < n && by_logit(&h[l], &h[m]) > 0) m = l;
                    if (r < n && by_logit(&h[r], &h[m]) > 0) m = r;
                    if (m == j) break;
                    struct cand t = h[j];
                    h[j] = h[m], h[m] = t, j = m;
                }
            }
        }
        qsort(h, (size_t)n, sizeof *h, by_logit);
    } else {
        for (int64_t i = 0; i < V; i++)
            s->cand[i] = (struct cand){w[i] / s->p.temperature, (int32_t)i};
        qsort(s->cand, (size_t)V, sizeof *s->cand, by_logit);
    }
    const double mx = s->cand[0].l;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (s->prob[i] = exp((double)s->cand[i].l - mx));
    for (int64_t i = 0; i < n; i++)
        s->prob[i] /= sum;
    if (s->p.top_p < 1.0f) {
        double c = 0.0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            c += s->prob[i];
            if (c >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (s->p.min_p > 0.0f) {
        int64_t keep = 1;
        while (keep < n && s->prob[keep] >= s->p.min_p * s->prob[0])
            keep++;
        n = keep;
    }
    sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += s->prob[i];
    const double u = (double)(xoshiro(s->s) >> 11) * 0x1p-53 * sum;
    double c = 0.0;
    for (int64_t i = 0; i < n; i++) {
        c += s->prob[i];
        if (u < c) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
