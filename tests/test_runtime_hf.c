/* test_runtime_hf.c — the CPU runtime against code nobody here wrote: Hugging Face transformers'
 * logits (tests/data/hf/<name>/, made by transformers 5.17 in float64 from the bf16 checkpoint and
 * from its NVFP4 dequantization; see tests/data/hf/README.md), teacher-forced over 24 ids.
 *
 * Tolerances (all relative to the largest |logit| of the reference, ~5.5):
 *   bf16 weights, native and exact, and NVFP4 native against the dequantized reference — 3e-3.
 *     The weights are the reference's exact inputs; what separates the two is float rounding:
 *     our f32 activations and, dominant, the F16 KV cache (relative rounding 2^-11 = 4.9e-4 on
 *     every K and V), plus the reference's own f32 islands (transformers computes RMSNorm, RoPE
 *     cos/sin and the softmax in f32 inside its float64 model). Measured 5.1e-4..7.7e-4; 3e-3 is six
 *     F16 roundings, and far under what a wrong operation does (test_runtime_arch: q/k rows left in
 *     llama.cpp's order move logits of ~3 by 1.8).
 *   NVFP4 exact against the dequantized reference — 0.08. Exact mode quantizes every projection's
 *     input to Q8_K (8 bits, one scale per 256 values: up to 1/254 of the block's max per value)
 *     and rounds every projection's output to F16 (SPEC §4): measured 3.4-4.5 % here.
 * And, bit for bit: NVFP4 exact equals the test's own oracle (rt_fixture.c) at every logit.
 * Mixtures of experts: moe_case below. */
#include "check.h"
#include "rt_data.h"
#include "rt_fixture.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_DIR "tests/data/hf"

static void run(const fp4_model *m, fp4_mode mode, int threads, int chunk, const int32_t *ids, int n,
                float *out) {
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = 64};
    fp4_rt *rt = NULL;
    fp4_error e;
    CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
    if (!rt) return;
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    fp4_rt_tok c[64];
    const int64_t V = fp4_rt_vocab(rt);
    for (int i = 0; i < n; i += chunk) {
        int k = n - i < chunk ? n - i : chunk;
        for (int j = 0; j < k; j++)
            c[j] = (fp4_rt_tok){s, ids[i + j], 1};
        CHECK_OK(fp4_rt_step(rt, c, k, out + (int64_t)i * V, &e));
    }
    fp4_rt_free(rt);
}

static void compare(const char *what, const float *got, const double *ref, int n, int64_t V, double tol) {
    double maxd = 0, maxref = 0, sum = 0;
    int same = 0;
    for (int p = 0; p < n; p++) {
        int64_t a = 0, b = 0;
        for (int64_t i = 0; i < V; i++) {
            double d = fabs(got[p * V + i] - ref[p * V + i]);
            maxd = fmax(maxd, d), sum += d, maxref = fmax(maxref, fabs(ref[p * V + i]));
            if (got[p * V + i] > got[p * V + a]) a = i;
            if (ref[p * V + i] > ref[p * V + b]) b = i;
        }
        same += a == b;
    }
    printf("%-22s max |dlogit| %.3g (%.2e of max |logit| %.3g), mean %.3g, argmax %d/%d (tolerance %.0e)\n",
           what, maxd, maxd / maxref, maxref, sum / (double)(n * V), same, n, tol);
    CHECK_MSG(maxd <= tol * maxref, "%s: %.3g > %.3g x %.3g", what, maxd, tol, maxref);
}

/* Positions whose routing is a near tie in the reference (routing_<kind>.json, written by
 * dev/ref/hf_reference.py: per sparse layer and position the gap between the k-th and (k+1)-th
 * router logit, in f64): gap < tie there marks the position in skip[]. Returns how many. */
static int near_ties(const char *path, int n, double tie, int *skip) {
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
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

/* compare() over the positions not in skip[] */
static void compare_kept(const char *what, const float *got, const double *ref, int n, int64_t V, double tol,
                         const int *skip) {
    float *g = malloc(sizeof(float) * (size_t)(n * V));
    double *r = malloc(sizeof(double) * (size_t)(n * V));
    int k = 0;
    for (int p = 0; p < n; p++)
        if (!skip[p]) {
            memcpy(g + k * V, got + p * V, sizeof(float) * (size_t)V);
            memcpy(r + k * V, ref + p * V, sizeof(double) * (size_t)V);
            k++;
        }
    compare(what, g, r, k, V, tol);
    free(g), free(r);
}

/* Mixtures of experts (issue 28): tiny Qwen3-MoE (per expert, a dense layer by mlp_only_layers,
 * norm_topk_prob), the same weights in the fused 3-D form, and Mixtral, 64 positions each. The
 * tolerances are the dense models' (above) and for the same reasons; in addition a routing decision
 * at a near tie may go either way between two correct implementations (transformers computes the
 * softmax of the router logits in f32), and one flipped expert moves the logits far more than any
 * tolerance: positions where the reference's own gap between the k-th and (k+1)-th router logit is
 * below 1e-3 (bf16; NVFP4 exact, whose Q8_K activations move router logits by ~1 %: 0.05) in any
 * layer are left out of the comparison, and counted. Absent data (the lead drops it into
 * tests/data/hf/ after running dev/ref/hf_reference.py on the GPU machine): SKIP, neither a pass
 * nor a failure. */
static void moe_case(const char *name) {
    char dir[256], nv[300], path[400], what[64];
    snprintf(dir, sizeof dir, HF_DIR "/%s", name);
    snprintf(path, sizeof path, "%s/logits_bf16.npy", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP %s: %s is absent (dev/ref/hf_reference.py make OUT %s; see tests/data/hf/README.md)\n",
               name, path, name);
        return;
    }
    fclose(f);
    snprintf(nv, sizeof nv, "%s/nvfp4", dir);
    int32_t ids[64];
    snprintf(path, sizeof path, "%s/ids.txt", dir);
    const int n = rtd_read_ids(path, ids, 64);
    CHECK_MSG(n == 64, "%s: %d ids", path, n);
    if (n != 64) return;
    fp4_model *mb = NULL, *mn = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &mb, &e));
    if (!mb) return;
    fp4_arch a;
    CHECK_OK(fp4_arch_from_hf_config(fp4_model_config_json(mb), &a, &e));
    CHECK(a.n_experts == 4 && a.n_experts_used == 2);
    const int64_t V = a.vocab;
    snprintf(path, sizeof path, "%s/logits_bf16.npy", dir);
    double *rb = rtd_read_npy_f64(path, n, V);
    float *got = malloc(sizeof(float) * (size_t)(n * V)), *alt = malloc(sizeof(float) * (size_t)(n * V));
    int skip[64] = {0}, skipn[64] = {0};
    snprintf(path, sizeof path, "%s/routing_bf16.json", dir);
    int ties = near_ties(path, n, 1e-3, skip);
    CHECK(rb != NULL);
    if (rb) {
        printf("%s: %d of %d positions at a near routing tie (bf16 reference)\n", name, ties, n);
        run(mb, FP4_MODE_NATIVE, 2, 5, ids, n, got);
        snprintf(what, sizeof what, "%s bf16 native", name);
        compare_kept(what, got, rb, n, V, 3e-3, skip);
        run(mb, FP4_MODE_EXACT, 1, n, ids, n, got);
        snprintf(what, sizeof what, "%s bf16 exact", name);
        compare_kept(what, got, rb, n, V, 3e-3, skip);
    }
    snprintf(path, sizeof path, "%s/logits_nvfp4.npy", dir);
    f = fopen(path, "rb");
    if (f) fclose(f);
    if (!f) printf("SKIP %s nvfp4: %s is absent (dev/ref/hf_reference.py dequant)\n", name, path);
    if (f) CHECK_OK(fp4_model_open(nv, NULL, &mn, &e));
    double *rn = mn ? rtd_read_npy_f64(path, n, V) : NULL;
    if (mn && rn) {
        snprintf(path, sizeof path, "%s/routing_nvfp4.json", dir);
        ties = near_ties(path, n, 1e-3, skip);
        run(mn, FP4_MODE_NATIVE, 2, 7, ids, n, got);
        snprintf(what, sizeof what, "%s nvfp4 native", name);
        compare_kept(what, got, rn, n, V, 3e-3, skip);
        memcpy(skipn, skip, sizeof skip);
        ties = near_ties(path, n, 0.05, skipn);
        printf("%s: %d more positions within 0.05 of a routing tie (nvfp4 exact)\n", name, ties);
        run(mn, FP4_MODE_EXACT, 3, 4, ids, n, got);
        snprintf(what, sizeof what, "%s nvfp4 exact", name);
        compare_kept(what, got, rn, n, V, 0.08, skipn);
        CHECK(rtfx_oracle_exact(mn, &a, ids, n, alt) == 0);
        int64_t d = 0;
        for (int64_t i = 0; i < n * V; i++)
            d += f32_bits(got[i]) != f32_bits(alt[i]);
        CHECK_MSG(d == 0, "%s nvfp4 exact: %lld logits differ from the oracle", name, (long long)d);
    }
    free(got), free(alt), free(rb), free(rn);
    fp4_model_close(mb), fp4_model_close(mn);
}

int main(void) {
    static const char *const names[] = {"llama", "llama31", "qwen2", "qwen3", "mistral"};
    int found = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char dir[256], nv[300], path[400], what[64];
        snprintf(dir, sizeof dir, HF_DIR "/%s", names[k]);
        snprintf(nv, sizeof nv, "%s/nvfp4", dir);
        int32_t ids[64];
        snprintf(path, sizeof path, "%s/ids.txt", dir);
        const int n = rtd_read_ids(path, ids, 64);
        CHECK_MSG(n == 24, "%s: %d ids", path, n);
        if (n != 24) continue;
        found++;
        fp4_model *mb = NULL, *mn = NULL;
        fp4_error e;
        CHECK_OK(fp4_model_open(dir, NULL, &mb, &e));
        CHECK_OK(fp4_model_open(nv, NULL, &mn, &e));
        if (!mb || !mn) continue;
        fp4_arch a;
        CHECK_OK(fp4_arch_from_hf_config(fp4_model_config_json(mb), &a, &e));
        const int64_t V = a.vocab;
        snprintf(path, sizeof path, "%s/logits_bf16.npy", dir);
        double *rb = rtd_read_npy_f64(path, n, V);
        snprintf(path, sizeof path, "%s/logits_nvfp4.npy", dir);
        double *rn = rtd_read_npy_f64(path, n, V);
        CHECK(rb && rn);
        float *got = malloc(sizeof(float) * (size_t)(n * V)), *alt = malloc(sizeof(float) * (size_t)(n * V));
        if (rb && rn) {
            run(mb, FP4_MODE_NATIVE, 2, 5, ids, n, got);
            snprintf(what, sizeof what, "%s bf16 native", names[k]);
            compare(what, got, rb, n, V, 3e-3);
            run(mb, FP4_MODE_EXACT, 1, n, ids, n, got);
            snprintf(what, sizeof what, "%s bf16 exact", names[k]);
            compare(what, got, rb, n, V, 3e-3);
            run(mn, FP4_MODE_NATIVE, 2, 7, ids, n, got);
            snprintf(what, sizeof what, "%s nvfp4 native", names[k]);
            compare(what, got, rn, n, V, 3e-3);
            run(mn, FP4_MODE_EXACT, 3, 4, ids, n, got);
            snprintf(what, sizeof what, "%s nvfp4 exact", names[k]);
            compare(what, got, rn, n, V, 0.08);
            CHECK(rtfx_oracle_exact(mn, &a, ids, n, alt) == 0);
            int64_t d = 0;
            for (int64_t i = 0; i < n * V; i++)
                d += f32_bits(got[i]) != f32_bits(alt[i]);
            CHECK_MSG(d == 0, "%s nvfp4 exact: %lld logits differ from the oracle", names[k], (long long)d);
        }
        free(got), free(alt), free(rb), free(rn);
        fp4_model_close(mb), fp4_model_close(mn);
    }
    CHECK_EQ_INT(found, 5);
    static const char *const moe[] = {"qwen3_moe", "qwen3_moe_fused", "mixtral"};
    for (size_t k = 0; k < sizeof moe / sizeof moe[0]; k++)
        moe_case(moe[k]);
    return check_report();
}
