/* test_runtime_step.c — the decode step on tiny checkpoints written here (bf16, and its NVFP4
 * quantization by fp4lane's ModelOpt recipe):
 *   - exact mode equals the oracle (rt_fixture.c: whole-sequence forward from format/'s contract
 *     functions and a literal warp-order reduction) bit for bit, every logit of every position;
 *   - exact mode is invariant: threads 1/2/3 × prefill chunk 1/3/all, and a sequence alone vs inside
 *     a batch of other sequences that join and leave — the same bits;
 *   - both modes agree with a double-precision reference within stated tolerances. */
#include "check.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmp[512];

/* Runs tokens through one sequence in chunks of `chunk` columns; logits of every position. */
static int run_seq(const fp4_model *m, fp4_mode mode, int threads, int chunk, const int32_t *tok, int n, float *logits) {
    fp4_rt_opts o = {.mode = mode, .n_threads = threads, .n_ctx = 64, .max_seqs = 1};
    fp4_rt *rt = NULL;
    fp4_error e;
    if (fp4_rt_create(m, &o, &rt, &e)) {
        fprintf(stderr, "rt_create: %s: %s (%s)\n", e.rule, e.msg, e.tensor);
        return -1;
    }
    int32_t s;
    fp4_rt_seq_open(rt, &s);
    const int64_t V = fp4_rt_vocab(rt);
    fp4_rt_tok cols[64];
    for (int i = 0; i < n; i += chunk) {
        int c = n - i < chunk ? n - i : chunk;
        for (int j = 0; j < c; j++) cols[j] = (fp4_rt_tok){s, tok[i + j], 1};
        if (fp4_rt_step(rt, cols, c, logits + (int64_t)i * V, &e)) {
            fprintf(stderr, "rt_step: %s: %s\n", e.rule, e.msg);
            fp4_rt_free(rt);
            return -1;
        }
    }
    fp4_rt_free(rt);
    return 0;
}

static int64_t bits_differ(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += f32_bits(a[i]) != f32_bits(b[i]);
    return d;
}

enum { NT = 12 };
static const int32_t toks[NT] = {1, 17, 300, 5, 42, 42, 9, 250, 3, 77, 128, 11};

static void test_exact_oracle(const char *dir, const char *what) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    fp4_arch a;
    CHECK_OK(fp4_arch_from_hf_config(fp4_model_config_json(m), &a, &e));
    const int64_t V = a.vocab;
    float *got = malloc(sizeof(float) * NT * V), *want = malloc(sizeof(float) * NT * V), *alt = malloc(sizeof(float) * NT * V);
    CHECK(run_seq(m, FP4_MODE_EXACT, 1, NT, toks, NT, got) == 0);
    CHECK(rtfx_oracle_exact(m, &a, toks, NT, want) == 0);
    int64_t d = bits_differ(got, want, NT * V);
    CHECK_MSG(d == 0, "%s: %lld of %lld logits differ from the oracle (first pos0 %.9g vs %.9g)", what, (long long)d, (long long)(NT * V),
              got[0], want[0]);
    /* invariance: threads × chunking */
    const int th[] = {1, 2, 3}, ch[] = {1, 3, NT};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            if (th[i] == 1 && ch[j] == NT) continue;
            CHECK(run_seq(m, FP4_MODE_EXACT, th[i], ch[j], toks, NT, alt) == 0);
            d = bits_differ(got, alt, NT * V);
            CHECK_MSG(d == 0, "%s: threads %d chunk %d: %lld logits differ", what, th[i], ch[j], (long long)d);
        }
    /* tolerance against the double reference (exact: Q8_K activations or f32 pinned sums) */
    double *ref = malloc(sizeof(double) * NT * V);
    CHECK(rtfx_reference_f64(m, &a, toks, NT, ref) == 0);
    double maxd = 0, maxref = 0;
    for (int64_t i = 0; i < NT * V; i++) {
        maxd = fmax(maxd, fabs(got[i] - ref[i]));
        maxref = fmax(maxref, fabs(ref[i]));
    }
    printf("%s exact: max |logit - f64 ref| = %.3g (max |logit| %.3g)\n", what, maxd, maxref);
    free(ref), free(got), free(want), free(alt);
    fp4_model_close(m);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-rtstep-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bf[600], nv[600];
    snprintf(bf, sizeof bf, "%s/llama-bf16", tmp);
    snprintf(nv, sizeof nv, "%s/llama-nvfp4", tmp);
    rtfx_spec s = rtfx_default("llama");
    CHECK(rtfx_write_hf(bf, &s, 11) == 0);
    fp4_quantize_opts qo = {.layout = FP4_LAYOUT_MODELOPT};
    fp4_error e;
    CHECK_OK(fp4_quantize_checkpoint(bf, nv, &qo, &e));
    test_exact_oracle(bf, "llama bf16");
    test_exact_oracle(nv, "llama nvfp4");
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
