/* cmd_compare.c — fp4lane compare: the determinism comparator. The same teacher-forced prompt ids
 * through two configurations (exact vs native, cpu vs cuda, nvfp4 vs kquant via --model, threads 1
 * vs 2); per position: argmax identity, |Δlogit|, KL(a || b) of the softmaxes (double). */
#include "cli.h"
#include "rt_cli.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: fp4lane compare MODEL --a \"OPTIONS\" --b \"OPTIONS\" --prompt-ids 1,2,3|@FILE "
                    "[--max-drift X] [--json]\n"
                    "  OPTIONS: --mode exact|native --device cpu|cuda --threads N --prefill-chunk N --ctx N "
                    "--model PATH\n");
    return 2;
}

/* splits an OPTIONS string on whitespace into e (engine options only) */
static int parse_side(const char *spec, rt_cli_engine *e, const char *which, char **keep) {
    char *buf = *keep = strdup(spec ? spec : ""), *argv[64];
    if (!buf) return -1;
    int argc = 0;
    for (char *t = strtok(buf, " \t"); t && argc < 63; t = strtok(NULL, " \t"))
        argv[argc++] = t;
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        int r = rt_cli_engine_opt(e, argc, argv, &i);
        if (r == 0)
            fprintf(stderr, "fp4lane compare: %s: '%s' is not an engine option\n", which, argv[i]), rc = -1;
        if (r < 0) rc = -1;
    }
    return rc; /* e->model may point into buf: the caller frees *keep at the end */
}

/* logits of every position of ids, one engine */
static int side_logits(const rt_cli_engine *e, const int32_t *ids, int64_t n, float **out, int64_t *vocab) {
    fp4_model *m;
    fp4_rt *rt;
    int rc = rt_cli_open(e, &m, &rt);
    if (rc) return rc;
    const int64_t V = fp4_rt_vocab(rt);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= V) {
            fprintf(stderr, "fp4lane compare: prompt token id %d is outside the vocabulary [0, %lld)\n",
                    ids[i], (long long)V);
            fp4_rt_free(rt), fp4_model_close(m);
            return 2;
        }
    if (n > fp4_rt_n_ctx(rt)) {
        fprintf(stderr, "fp4lane compare: %lld prompt ids are past the context length %lld\n", (long long)n,
                (long long)fp4_rt_n_ctx(rt));
        fp4_rt_free(rt), fp4_model_close(m);
        return 2;
    }
    float *lg = malloc(sizeof(float) * (size_t)(n * V));
    const int64_t chunk = e->prefill_chunk > 0 ? e->prefill_chunk : n;
    fp4_rt_tok *cols = malloc(sizeof *cols * (size_t)chunk);
    int32_t s = 0;
    fp4_error err;
    rc = !lg || !cols || fp4_rt_seq_open(rt, &s);
    for (int64_t i = 0; !rc && i < n; i += chunk) {
        int64_t c = n - i < chunk ? n - i : chunk;
        for (int64_t j = 0; j < c; j++)
            cols[j] = (fp4_rt_tok){s, ids[i + j], 1};
        if (fp4_rt_step(rt, cols, c, lg + i * V, &err)) rc = cli_report_error("compare", err.code, &err);
    }
    free(cols);
    fp4_rt_free(rt), fp4_model_close(m);
    if (rc) return free(lg), rc;
    *out = lg;
    *vocab = V;
    return 0;
}

static void softmax64(const float *l, int64_t V, double *p) {
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < V; i++)
        mx = l[i] > mx ? l[i] : mx;
    for (int64_t i = 0; i < V; i++)
        s += (p[i] = exp((double)l[i] - mx));
    for (int64_t i = 0; i < V; i++)
        p[i] /= s;
}
static int64_t argmax(const float *l, int64_t V) {
    int64_t b = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

int cmd_compare(int argc, char **argv) {
    rt_cli_engine A, B;
    rt_cli_engine_init(&A), rt_cli_engine_init(&B);
    A.verb = B.verb = "compare";
    const char *model = NULL, *sa = NULL, *sb = NULL, *prompt = NULL;
    double max_drift = -1;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--a") && v)
            sa = v, i++;
        else if (!strcmp(o, "--b") && v)
            sb = v, i++;
        else if (!strcmp(o, "--prompt-ids") && v)
            prompt = v, i++;
        else if (!strcmp(o, "--json"))
            json = 1;
        else if (!strcmp(o, "--max-drift") && v) {
            char *end;
            max_drift = strtod(v, &end);
            if (!*v || *end || !(max_drift >= 0))
                return fprintf(stderr, "fp4lane compare: --max-drift %s: expected a number >= 0\n", v), 2;
            i++;
        } else if (o[0] != '-' && !model)
            model = o;
        else
            return fprintf(stderr, "fp4lane compare: unknown or incomplete option '%s'\n", o), usage();
    }
    if (!model || !sa || !sb || !prompt) return usage();
    char *ka = NULL, *kb = NULL;
    if (parse_side(sa, &A, "--a", &ka) || parse_side(sb, &B, "--b", &kb)) return free(ka), free(kb), 2;
    if (!A.model) A.model = model;
    if (!B.model) B.model = model;
    int32_t *ids;
    int64_t n;
    if (rt_cli_parse_ids(prompt, &ids, &n)) return free(ka), free(kb), 2;
    if (!n)
        return free(ids), free(ka), free(kb), fprintf(stderr, "fp4lane compare: the prompt is empty\n"), 2;
    float *la = NULL, *lb = NULL;
    int64_t Va = 0, Vb = 0;
    int rc = side_logits(&A, ids, n, &la, &Va);
    if (!rc) rc = side_logits(&B, ids, n, &lb, &Vb);
    if (!rc && Va != Vb)
        fprintf(stderr, "fp4lane compare: vocabularies differ (%lld vs %lld)\n", (long long)Va,
                (long long)Vb),
            rc = 1;
    if (rc) {
        free(la), free(lb), free(ids), free(ka), free(kb);
        return rc;
    }
    double maxd = 0, sumd = 0, kl = 0;
    int64_t same = 0, nbits = 0, ndiff = 0;
    char diffs[256] = "", *dp = diffs; /* the first positions whose argmax differs */
    double *pa = malloc(sizeof(double) * (size_t)Va), *pb = malloc(sizeof(double) * (size_t)Va);
    for (int64_t p = 0; p < n; p++) {
        const float *x = la + p * Va, *y = lb + p * Va;
        const int64_t ax = argmax(x, Va), ay = argmax(y, Va);
        same += ax == ay;
        if (ax != ay && ndiff++ < 12 && dp < diffs + sizeof diffs - 40)
            dp += snprintf(dp, (size_t)(diffs + sizeof diffs - dp), "%s%lld:%lld/%lld", diffs[0] ? "," : "",
                           (long long)p, (long long)ax, (long long)ay);
        for (int64_t i = 0; i < Va; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            maxd = d > maxd ? d : maxd;
            sumd += d;
            nbits += memcmp(&x[i], &y[i], 4) != 0;
        }
        softmax64(x, Va, pa), softmax64(y, Va, pb);
        double k = 0;
        for (int64_t i = 0; i < Va; i++)
            if (pa[i] > 0) k += pa[i] * (log(pa[i]) - log(pb[i] > 0 ? pb[i] : 1e-300));
        kl += k;
    }
    const double mean = sumd / (double)(n * Va);
    kl /= (double)n;
    const int fail = max_drift >= 0 && maxd > max_drift;
    if (json)
        printf("{\"positions\":%lld,\"vocab\":%lld,\"token_identical\":%lld,\"max_abs_dlogit\":%.9g,\"mean_"
               "abs_dlogit\":%.9g,"
               "\"mean_kl\":%.9g,\"logits_bit_different\":%lld,\"argmax_differs\":\"%s\",\"max_drift\":%.9g,"
               "\"ok\":%s}\n",
               (long long)n, (long long)Va, (long long)same, maxd, mean, kl, (long long)nbits, diffs,
               max_drift, fail ? "false" : "true");
    else
        printf("compare: %lld positions, argmax identical at %lld/%lld, max |dlogit| %.6g, mean |dlogit| "
               "%.6g, mean KL %.6g, %lld of %lld "
               "logits differ in bits%s%s%s\n",
               (long long)n, (long long)same, (long long)n, maxd, mean, kl, (long long)nbits,
               (long long)(n * Va), ndiff ? "; argmax differs at (position:a/b) " : "", diffs,
               fail ? " — past --max-drift" : "");
    free(pa), free(pb), free(la), free(lb), free(ids), free(ka), free(kb);
    return fail ? 1 : 0;
}
