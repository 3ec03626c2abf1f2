/* hf_compare.c — see hf_compare.h. */
#include "hf_compare.h"
#include "check.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void hfc_run(const fp4_model *m, fp4_mode mode, int threads, int chunk, const int32_t *ids, int n,
             float *out) {
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = n};
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    if (!rt) {
        fprintf(stderr, "fp4_rt_create: %s (%s)\n", e.msg, e.rule);
        return;
    }
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    fp4_rt_tok *c = malloc(sizeof(fp4_rt_tok) * (size_t)chunk);
    const int64_t V = fp4_rt_vocab(rt);
    for (int i = 0; c && i < n; i += chunk) {
        int k = n - i < chunk ? n - i : chunk;
        for (int j = 0; j < k; j++)
            c[j] = (fp4_rt_tok){s, ids[i + j], 1};
        CHECK_OK(fp4_rt_step(rt, c, k, out + (int64_t)i * V, &e));
    }
    free(c);
    fp4_rt_free(rt);
}

double hfc_compare(const char *what, const float *got, const double *ref, int n, int64_t V, double tol,
                   const int *skip) {
    double maxd = 0, maxref = 0, sum = 0;
    int same = 0, kept = 0;
    for (int p = 0; p < n; p++) {
        if (skip && skip[p]) continue;
        int64_t a = 0, b = 0;
        for (int64_t i = 0; i < V; i++) {
            double d = fabs(got[p * V + i] - ref[p * V + i]);
            maxd = fmax(maxd, d), sum += d, maxref = fmax(maxref, fabs(ref[p * V + i]));
            if (got[p * V + i] > got[p * V + a]) a = i;
            if (ref[p * V + i] > ref[p * V + b]) b = i;
        }
        same += a == b, kept++;
    }
    printf("%-30s max |dlogit| %.3g (%.2e of max |logit| %.3g), mean %.3g, argmax %d/%d (tolerance %.0e)\n",
           what, maxd, maxd / maxref, maxref, kept ? sum / (double)((int64_t)kept * V) : 0.0, same, kept,
           tol);
    CHECK_MSG(kept > 0 && maxd <= tol * maxref, "%s: %.3g > %.3g x %.3g", what, maxd, tol, maxref);
    return maxref > 0 ? maxd / maxref : INFINITY;
}

int hfc_near_ties(const char *path, int n, double tie, int *skip) {
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    if (!json_is_object(r)) {
        json_decref(r);
        return -1;
    }
    int count = 0;
    const char *layer;
    json_t *v;
    json_object_foreach(r, layer, v) {
        json_t *gap = json_object_get(v, "gap");
        for (int p = 0; p < n && p < (int)json_array_size(gap); p++)
            if (json_number_value(json_array_get(gap, (size_t)p)) < tie && !skip[p]) skip[p] = 1, count++;
    }
    json_decref(r);
    return count;
}

int hfc_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}
