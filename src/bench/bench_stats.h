/* bench_stats.h — the statistics and the verdict rule of `fp4lane bench` (internal to the project:
 * the CLI and tests/test_bench.c link it from libfp4lane.a; not part of the public API, not
 * exported from libfp4lane.so). Pure functions: no I/O, no allocation.
 *
 * The discipline (seed chapter §7.5): cells of two configurations A and B alternate A B A B ...;
 * each cell yields one throughput (tokens per second, higher is better). A difference is called
 * only when it stands clear of the noise; otherwise the verdict is "parity within noise", never
 * "faster".
 *
 * The rule, exactly (fp4b_compare):
 *   per side: mean, sample standard deviation (n - 1 denominator; 0 when n = 1), CV = sd / mean;
 *   ratio      = mean(B) / mean(A)                         (the point estimate);
 *   pair ratio = B_i / A_i for each pair i, spread = [min, max] over the pairs;
 *   noise      = max(CV(A), CV(B));
 *   "B faster" when n_pairs >= FP4B_MIN_PAIRS and every pair ratio > 1 + noise
 *              (so min pair ratio > 1 + noise: all pairs agree in sign, by more than the noise);
 *   "A faster" when n_pairs >= FP4B_MIN_PAIRS and every pair ratio < 1 / (1 + noise)
 *              (the same rule with A and B exchanged: every A_i / B_i > 1 + noise);
 *   otherwise "parity within noise".
 */
#ifndef FP4_BENCH_STATS_H
#define FP4_BENCH_STATS_H

#define FP4B_MIN_PAIRS 3

typedef struct fp4b_summary {
    int n;
    double mean, sd, cv, min, max;
} fp4b_summary;

typedef enum fp4b_verdict { FP4B_PARITY = 0, FP4B_A_FASTER = 1, FP4B_B_FASTER = 2 } fp4b_verdict;

typedef struct fp4b_result {
    fp4b_summary a, b;
    int n_pairs;
    double ratio;               /* mean(B) / mean(A)                                         */
    double pair_min, pair_max;  /* min and max of B_i / A_i                                  */
    double noise;               /* max(CV(A), CV(B))                                         */
    int n_b_higher, n_a_higher; /* pairs with B_i > A_i, with A_i > B_i                      */
    fp4b_verdict verdict;
} fp4b_result;

/* Summary of n values (n >= 1). Returns 0, or -1 for n < 1 or a value that is not finite. */
int fp4b_summarize(const double *x, int n, fp4b_summary *out);
/* a[i], b[i]: the throughputs of pair i (> 0, finite). Returns 0, or -1 for n < 1 or a value
 * that is not finite and positive. */
int fp4b_compare(const double *a, const double *b, int n, fp4b_result *out);
/* "parity within noise", "A faster", "B faster" */
const char *fp4b_verdict_text(fp4b_verdict v);
/* The rule above in one sentence (for receipts and output). */
const char *fp4b_rule_text(void);

#endif
