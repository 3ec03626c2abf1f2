/* test_runtime_hf_families.c — Gemma 3 and DeepSeek-V3 on the CPU runtime against Hugging Face
 * transformers' own logits (issue 31; tests/data/hf/{gemma3,deepseek_v3,deepseek_v3_nolora}, made by
 * transformers 5.17 in float64 on the GPU machine, dev/ref/hf_reference.py + hf_families.py; see
 * tests/data/hf/README.md), teacher-forced over 64 ids, so that the sliding window (16) is crossed
 * and the routing sees many tokens.
 *
 * Tolerances (relative to the largest |logit| of the reference), the dense models' of
 * test_runtime_hf.c and for the same reasons:
 *   bf16 weights, native and exact, and NVFP4 native against the dequantized reference — 3e-3: the
 *     weights are the reference's exact inputs, what separates the two is float rounding (our f32
 *     activations and the F16 KV cache / latent cache, 2^-11 relative on every stored value; the
 *     reference's own f32 islands: transformers computes RMSNorm, the rope tables, the softmax and,
 *     for DeepSeek, the router's logits and sigmoid in f32 inside its float64 model).
 *   NVFP4 exact against the dequantized reference — 0.08: exact mode quantizes an NVFP4 projection's
 *     input to Q8_K and rounds its output to F16 (SPEC §4).
 * Exact mode is checked bit for bit against itself across threads and chunking (the same logits bits
 * from 1 thread in one step and 3 threads in steps of 4).
 * Routing (deepseek_v3): a selection at a near tie may go either way between two correct
 * implementations (transformers computes the router in f32), and one flipped expert moves the logits
 * far more than any tolerance. routing_<kind>.json gives per position the smaller of the group margin
 * and the expert margin in the selection's own units (sigmoid score + bias, about a quarter of the
 * router logit's): positions below 1e-3 (bf16 runs, NVFP4 native) or 0.05 (NVFP4 exact, whose Q8_K
 * expert inputs move the residual stream by ~1 %) in a sparse layer are left out and counted.
 * The NVFP4 twin is <dir>/nvfp4 when committed, else `quantize --layout modelopt` of the bf16
 * checkpoint made here into $TMPDIR (the quantizer is deterministic: the twin the device
 * dequantized for logits_nvfp4.npy; a changed quantizer fails the NVFP4 comparisons by far).
 * Absent data: SKIP, neither a pass nor a failure. */
#include "check.h"
#include "hf_compare.h"
#include "rt_data.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_DIR "tests/data/hf"
#define NPOS 64

typedef struct fam_case {
    const char *name;
    void (*check_arch)(const fp4_arch *a);
    int nvfp4; /* the generator made an NVFP4 twin (routed experts or every projection) */
} fam_case;

static void arch_gemma3(const fp4_arch *a) {
    CHECK(a->family == FP4_ARCH_GEMMA3 && a->sliding_window == 16 && a->final_softcap == 15.0 &&
          a->query_pre_attn_scalar == 96.0 && a->rope_local_theta == 10000.0 && a->n_layers == 3);
    CHECK(fp4_arch_layer_local(a, 0) && !fp4_arch_layer_local(a, 1) && fp4_arch_layer_local(a, 2));
    CHECK(a->rope_scaling == FP4_ROPE_LINEAR && a->rope_factor == 8.0 && a->rope_theta == 1e6);
}

static void arch_deepseek(const fp4_arch *a) {
    CHECK(a->family == FP4_ARCH_DEEPSEEK_V3 && a->q_lora_rank == 64 && a->kv_lora_rank == 64 &&
          a->qk_nope_dim == 32 && a->qk_rope_dim == 32 && a->v_head_dim == 32 && a->rope_interleave);
    CHECK(a->n_experts == 8 && a->n_experts_used == 2 && a->moe_n_group == 4 && a->moe_topk_group == 2 &&
          a->n_shared_experts == 1 && a->routed_scaling == 1.5 && a->moe_norm_topk);
    CHECK(!fp4_arch_layer_moe(a, 0) && fp4_arch_layer_moe(a, 1));
    CHECK(a->rope_scaling == FP4_ROPE_YARN && a->rope_factor == 8.0 && a->rope_orig_ctx == 256 &&
          a->rope_mscale == 1.0 && a->rope_mscale_all_dim == 0.8);
}

static void arch_deepseek_nolora(const fp4_arch *a) {
    CHECK(a->family == FP4_ARCH_DEEPSEEK_V3 && a->q_lora_rank == 0 && !a->rope_interleave &&
          a->rope_mscale == 1.0 && a->rope_mscale_all_dim == 1.0);
    CHECK(!fp4_arch_layer_moe(a, 0) && !fp4_arch_layer_moe(a, 1));
}

/* exact mode: the same bits from one thread in one step and three threads in steps of 4 */
static void exact_invariant(const char *what, const fp4_model *m, const int32_t *ids, int n, int64_t V,
                            const float *one) {
    float *alt = malloc(sizeof(float) * (size_t)(n * V));
    hfc_run(m, FP4_MODE_EXACT, 3, 4, ids, n, alt);
    int64_t d = 0;
    for (int64_t i = 0; i < n * V; i++)
        d += f32_bits(one[i]) != f32_bits(alt[i]);
    CHECK_MSG(d == 0, "%s exact: %lld logits differ between 1 thread x %d and 3 threads x 4", what,
              (long long)d, n);
    free(alt);
}

/* the committed twin, else one quantized here into tmp (removed by the caller) */
static const char *nvfp4_twin(const char *dir, char *tmp, size_t cap) {
    static char nv[400];
    snprintf(nv, sizeof nv, "%s/nvfp4/config.json", dir);
    if (hfc_exists(nv)) {
        snprintf(nv, sizeof nv, "%s/nvfp4", dir);
        return nv;
    }
    const char *t = getenv("TMPDIR");
    snprintf(tmp, cap, "%s/fp4lane-hfq-%ld-%d", t && *t ? t : "/tmp", (long)getpid(), rand());
    fp4_quantize_opts q = {.layout = FP4_LAYOUT_MODELOPT};
    fp4_error e;
    fp4_status st = fp4_quantize_checkpoint(dir, tmp, &q, &e);
    CHECK_MSG(st == FP4_OK, "quantize %s: %s (%s)", dir, e.msg, e.rule);
    return st == FP4_OK ? tmp : NULL;
}

static void rm_tree(const char *d) {
    char cmd[600];
    if (!*d || !strstr(d, "fp4lane-hfq-")) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    CHECK(system(cmd) == 0);
}

static void family_case(const fam_case *c) {
    char dir[256], path[400], what[96], tmp[400] = "";
    snprintf(dir, sizeof dir, HF_DIR "/%s", c->name);
    snprintf(path, sizeof path, "%s/logits_bf16.npy", dir);
    if (!hfc_exists(path)) {
        printf("SKIP %s: %s is absent (dev/ref/hf_reference.py make OUT %s; see tests/data/hf/README.md)\n",
               c->name, path, c->name);
        return;
    }
    int32_t ids[NPOS];
    snprintf(path, sizeof path, "%s/ids.txt", dir);
    const int n = rtd_read_ids(path, ids, NPOS);
    CHECK_MSG(n == NPOS, "%s: %d ids", path, n);
    if (n != NPOS) return;
    fp4_model *mb = NULL, *mn = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &mb, &e));
    if (!mb) return;
    fp4_arch a;
    CHECK_OK(fp4_arch_from_hf_config(fp4_model_config_json(mb), &a, &e));
    c->check_arch(&a);
    const int64_t V = a.vocab;
    snprintf(path, sizeof path, "%s/logits_bf16.npy", dir);
    double *rb = rtd_read_npy_f64(path, n, V);
    CHECK(rb != NULL);
    float *got = malloc(sizeof(float) * (size_t)(n * V));
    int skip[NPOS] = {0}, skipx[NPOS] = {0};
    snprintf(path, sizeof path, "%s/routing_bf16.json", dir);
    if (hfc_exists(path))
        printf("%s: %d of %d positions at a near routing tie (bf16 reference)\n", c->name,
               hfc_near_ties(path, n, 1e-3, skip), n);
    if (rb) {
        hfc_run(mb, FP4_MODE_NATIVE, 2, 5, ids, n, got);
        snprintf(what, sizeof what, "%s bf16 native", c->name);
        hfc_compare(what, got, rb, n, V, 3e-3, skip);
        hfc_run(mb, FP4_MODE_EXACT, 1, n, ids, n, got);
        snprintf(what, sizeof what, "%s bf16 exact", c->name);
        hfc_compare(what, got, rb, n, V, 3e-3, skip);
        exact_invariant(what, mb, ids, n, V, got);
    }
    snprintf(path, sizeof path, "%s/logits_nvfp4.npy", dir);
    double *rn = c->nvfp4 ? rtd_read_npy_f64(path, n, V) : NULL;
    if (c->nvfp4 && !rn)
        printf("SKIP %s nvfp4: %s is absent (dev/ref/hf_reference.py dequant)\n", c->name, path);
    const char *nv = rn ? nvfp4_twin(dir, tmp, sizeof tmp) : NULL;
    if (nv) CHECK_OK(fp4_model_open(nv, NULL, &mn, &e));
    if (mn) {
        memset(skip, 0, sizeof skip);
        snprintf(path, sizeof path, "%s/routing_nvfp4.json", dir);
        if (hfc_exists(path)) {
            int t = hfc_near_ties(path, n, 1e-3, skip);
            memcpy(skipx, skip, sizeof skip);
            printf("%s: %d positions at a near routing tie (nvfp4 reference), %d more within 0.05 (exact)\n",
                   c->name, t, hfc_near_ties(path, n, 0.05, skipx));
        }
        hfc_run(mn, FP4_MODE_NATIVE, 2, 7, ids, n, got);
        snprintf(what, sizeof what, "%s nvfp4 native", c->name);
        hfc_compare(what, got, rn, n, V, 3e-3, skip);
        hfc_run(mn, FP4_MODE_EXACT, 1, n, ids, n, got);
        snprintf(what, sizeof what, "%s nvfp4 exact", c->name);
        hfc_compare(what, got, rn, n, V, 0.08, skipx);
        exact_invariant(what, mn, ids, n, V, got);
    }
    free(got), free(rb), free(rn);
    fp4_model_close(mb), fp4_model_close(mn);
    rm_tree(tmp);
}

int main(void) {
    static const fam_case cases[] = {
        {"gemma3", arch_gemma3, 1},
        {"deepseek_v3", arch_deepseek, 1},
        {"deepseek_v3_nolora", arch_deepseek_nolora, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        family_case(&cases[k]);
    return check_report();
}
