/* bench_stats.c — see bench_stats.h. */
#include "bench/bench_stats.h"
#include <math.h>

int fp4b_summarize(const double *x, int n, fp4b_summary *out) {
    if (n < 1) return -1;
    double s = 0, mn = x[0], mx = x[0];
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i])) return -1;
        s += x[i];
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    const double mean = s / n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    out->n = n;
    out->mean = mean;
    out->sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    out->cv = mean != 0 ? out->sd / fabs(mean) : 0.0;
    out->min = mn;
    out->max = mx;
    return 0;
}

int fp4b_compare(const double *a, const double *b, int n, fp4b_result *out) {
    if (n < 1) return -1;
    for (int i = 0; i < n; i++)
        if (!isfinite(a[i]) || !isfinite(b[i]) || !(a[i] > 0) || !(b[i] > 0)) return -1;
    if (fp4b_summarize(a, n, &out->a) || fp4b_summarize(b, n, &out->b)) return -1;
    out->n_pairs = n;
    out->ratio = out->b.mean / out->a.mean;
    out->pair_min = out->pair_max = b[0] / a[0];
    out->n_a_higher = out->n_b_higher = 0;
    for (int i = 0; i < n; i++) {
        const double r = b[i] / a[i];
        out->pair_min = r < out->pair_min ? r : out->pair_min;
        out->pair_max = r > out->pair_max ? r : out->pair_max;
        out->n_b_higher += b[i] > a[i];
        out->n_a_higher += a[i] > b[i];
    }
    out->noise = out->a.cv > out->b.cv ? out->a.cv : out->b.cv;
    out->verdict = FP4B_PARITY;
    if (n >= FP4B_MIN_PAIRS) {
        if (out->pair_min > 1.0 + out->noise)
            out->verdict = FP4B_B_FASTER;
        else if (out->pair_max * (1.0 + out->noise) < 1.0)
            out->verdict = FP4B_A_FASTER;
    }
    return 0;
}

const char *fp4b_verdict_text(fp4b_verdict v) {
    static const char *const t[] = {"parity within noise", "A faster", "B faster"};
    return (unsigned)v < 3 ? t[v] : "?";
}

const char *fp4b_rule_text(void) {
    return "ratio = mean(B)/mean(A) of tok/s; spread = min..max of the per-pair ratios B_i/A_i; noise = the "
           "larger CV "
           "(sample sd / mean); 'B faster' only with >= 3 pairs and every B_i/A_i > 1 + noise, 'A faster' "
           "only with >= 3 "
           "pairs and every A_i/B_i > 1 + noise; otherwise 'parity within noise'";
}
