/* test_llama_moe.c — mixture-of-experts GGUFs that llama.cpp runs (issue 28): Qwen3-MoE and Mixtral
 * checkpoints (`fp4lane synth --shape tiny-moe16`: hidden 256, 2 layers, 16 experts, 4 per token,
 * expert ffn 256, vocab 512; random router; not 8 experts, for which llama.cpp's quantizer picks
 * Q5_K / Q8_0 attention that fp4lane has no route for) written by `fp4lane convert --layout
 * gguf-ggml` in llama.cpp's form (qwen3moe / llama: ffn_gate_inp, 3-D ffn_{gate,up,down}_exps,
 * expert_count, expert_used_count, expert_feed_forward_length), and llama.cpp's own Q4_K_M file made
 * from one by libllama's quantizer (llama_model_quantize; tests/llama_oracle.c, npm
 * @node-llama-cpp/linux-x64 3.22.1), as test_llama_quant makes its dense files.
 *
 * Checked: (1) each file holds llama.cpp's keys and 3-D tensors, and fp4lane's exact logits from it
 * equal, bit for bit, those from the HF directory it was written from (names, stacking order, keys);
 * (2) libllama loads it and its logits of fixed ids at every position agree with fp4lane's (exact
 * and native mode); (3) llama.cpp's Q4_K_M file has llama.cpp's MoE type mix (Q4_K experts, layer 1's
 * ffn_down_exps Q6_K, the router left BF16) and agrees the same way; exact mode is invariant over
 * threads and prefill chunking on it; (4) the control: the top-4 BF16 file with experts 0 and 1 of
 * layer 0's ffn_down_exps swapped (a valid file, wrong stacking) must not agree; (5) a MoE llama.cpp
 * could not run as the checkpoint says keeps fp4lane's HF names and no llama.cpp architecture key
 * (a missing expert, one past the count, dense layers, norm_topk_prob false), while NVFP4 experts
 * from `quantize` are written in llama.cpp's form.
 *
 * "Agree", every difference relative to llama.cpp's largest |logit| over all positions. With every
 * expert used per token (num_experts_per_tok set to 16: no routing decision, the router still
 * weighting every expert) every position is within TOL_ALL, as dense files are in test_llama_quant:
 * what separates the engines is llama.cpp's BF16 rounding of each matrix's input (ggml's vec_dot_type),
 * the F16 accumulators of its flash attention and, for K-quants, the same Q8_K arithmetic on both
 * sides. Measured (3.22.1, this project's CPU): BF16 0.017 (Qwen3-MoE) and 0.018 (Mixtral), Q4_K_M
 * 0.057 (16 expert outputs summed per token where a dense model has one: test_llama_quant measures
 * 0.025-0.034 dense); TOL_ALL 0.08. With the top 4 of 16 a random router's k-th and (k+1)-th logits
 * are often close (in a double reference of this model, at about a third of the positions a layer's
 * gap is under 5 % of its router logits' RMS), and such a position may pick another expert in one
 * engine, a correct outcome either way, which through layer 1's attention also moves later
 * positions: then position 0 (where attention returns V) within TOL0, the median position within
 * TOL_MEDIAN and MIN_WITHIN of NPOS positions within TOL. Measured: BF16 0.0047 / 0.0047 / 23 of 24;
 * the control 0.26 / 0.056 / 14 of 24. (6) NVFP4 experts (ModelOpt, every expert per token)
 * written as llama.cpp's type-40 3-D tensors with a per-expert .scale vector: bit-identical to the
 * directory in fp4lane, byte-identical back to ModelOpt, and libllama within the NVFP4 summary:
 * median position under TOL_NV_MEDIAN, MIN_WITHIN of NPOS within TOL, every position under
 * TOL_NV_WORST. Wider than TOL_ALL because llama.cpp rounds every NVFP4 matmul's input to Q8_0
 * (32 values per scale; test_llama_interop measures 1.4-4.2 % on dense NVFP4 files) and here 16
 * experts' outputs are summed per token, on logits whose largest is ~1.4. Measured (3.22.1):
 * median 0.027 / 0.021 (Qwen3-MoE exact / native), 0.022 / 0.013 (Mixtral), worst 0.064-0.154,
 * 23 of 24 within TOL; the control (every .scale vector reversed, each expert scaled by another's
 * scale2) median 0.68 (Qwen3-MoE) and 0.33 (Mixtral), 0 of 24 within TOL. Without the npm package
 * (`make oracle`; `make test` runs it) the test checks the refusals and prints SKIP. */
#define FP4LANE_ORACLE_API
#include "check.h"
#include "cli_util.h"
#include "fp4lane_io.h"
#include "fp4lane_runtime.h"
#include "gguf_strip.h"
#include "llama_oracle.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPOS 24
#define VOCAB 512
#define TOL0 0.02
#define TOL_MEDIAN 0.03
#define TOL 0.06
#define MIN_WITHIN 20
#define TOL_ALL 0.08
#define TOL_NV_MEDIAN 0.04
#define TOL_NV_WORST 0.25

static char tmp[512];
static const char *fp4lane_bin;

static int run_cli(const char *args) {
    return cu_run_loud(fp4lane_bin, tmp, args);
}

static void fixed_ids(int32_t *ids) {
    uint64_t s = 0x6d6f65ull;
    for (int i = 0; i < NPOS; i++)
        ids[i] = (int32_t)(fp4_splitmix64(&s) % VOCAB);
}

/* fp4lane's logits of every position, fed in chunks of `chunk` columns */
static float *ours(const char *path, fp4_mode mode, int threads, int chunk, const int32_t *ids, char *routes,
                   size_t routes_len) {
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    fp4_error e;
    memset(&e, 0, sizeof e);
    float *out = NULL;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    fp4_rt_opts o = {.mode = mode, .device = FP4_DEVICE_CPU, .n_threads = threads, .n_ctx = 256};
    if (!st) st = fp4_rt_create(m, &o, &rt, &e);
    int32_t seq = -1;
    if (!st) st = fp4_rt_seq_open(rt, &seq);
    fp4_rt_tok cols[NPOS];
    if (!st && fp4_rt_vocab(rt) != VOCAB) st = FP4_ERR_SHAPE;
    if (!st) {
        if (routes) snprintf(routes, routes_len, "%s", fp4_rt_routes(rt));
        out = malloc(sizeof(float) * NPOS * VOCAB);
        for (int i = 0; i < NPOS; i++)
            cols[i] = (fp4_rt_tok){seq, ids[i], 1};
        for (int i = 0; out && !st && i < NPOS; i += chunk) {
            const int c = NPOS - i < chunk ? NPOS - i : chunk;
            st = fp4_rt_step(rt, cols + i, c, out + (size_t)i * VOCAB, &e);
        }
    }
    CHECK_MSG(st == FP4_OK, "fp4lane on %s: %s [%s] %s %s", path, fp4_status_str(st), e.rule, e.tensor,
              e.msg);
    if (st) free(out), out = NULL;
    fp4_rt_free(rt);
    fp4_model_close(m);
    return out;
}

/* Per position p: max |a - b| over its logits / max |a| over every logit; the summary the
 * tolerances speak of. */
typedef struct cmp {
    double rel0, median, worst;
    int within, same_top;
} cmp;

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static cmp compare(const float *a, const float *b) {
    double amax = 0, rel[NPOS];
    cmp c = {0};
    for (size_t k = 0; k < (size_t)NPOS * VOCAB; k++)
        amax = fmax(amax, fabs(a[k]));
    for (int p = 0; p < NPOS; p++) {
        const float *x = a + (size_t)p * VOCAB, *y = b + (size_t)p * VOCAB;
        int ta = 0, tb = 0;
        double d = 0;
        for (int k = 0; k < VOCAB; k++) {
            d = isfinite(x[k]) && isfinite(y[k]) ? fmax(d, fabs((double)x[k] - y[k])) : INFINITY;
            ta = x[k] > x[ta] ? k : ta;
            tb = y[k] > y[tb] ? k : tb;
        }
        rel[p] = amax > 0 ? d / amax : INFINITY;
        c.same_top += ta == tb;
        c.within += rel[p] < TOL;
    }
    c.rel0 = rel[0];
    qsort(rel, NPOS, sizeof *rel, cmp_double);
    c.median = (rel[NPOS / 2 - 1] + rel[NPOS / 2]) / 2, c.worst = rel[NPOS - 1];
    return c;
}

/* every_expert: a model whose tokens use all experts (no routing decision to swap): every position
 * within TOL_ALL (EVERY_NVFP4: the NVFP4 summary, see nvfp4_model); else the routing-tolerant
 * summary */
enum { EVERY_NVFP4 = 2 };
static int agrees(const cmp *c, int every_expert) {
    if (every_expert == EVERY_NVFP4)
        return c->median < TOL_NV_MEDIAN && c->within >= MIN_WITHIN && c->worst < TOL_NV_WORST;
    if (every_expert) return c->worst < TOL_ALL;
    return c->rel0 < TOL0 && c->median < TOL_MEDIAN && c->within >= MIN_WITHIN;
}

/* libllama on theirs, fp4lane on mine (exact and native); a control must not agree */
static void against_llama(llama_oracle *lo, const char *what, const char *theirs, const char *mine,
                          const char *want_routes, int control, int every_expert) {
    int32_t ids[NPOS];
    fixed_ids(ids);
    char err[2600], routes[512] = "";
    float *ref = NULL;
    int nv = 0;
    int rc = llama_oracle_logits(lo, theirs, ids, NPOS, 2, &ref, &nv, err, sizeof err);
    CHECK_MSG(rc == 0 && nv == VOCAB, "%s: libllama: %s (vocab %d)", what, err, nv);
    if (rc || nv != VOCAB) return free(ref);
    static const fp4_mode modes[] = {FP4_MODE_EXACT, FP4_MODE_NATIVE};
    for (int m = 0; m < (control ? 1 : 2); m++) {
        float *got = ours(mine, modes[m], 2, NPOS, ids, routes, sizeof routes);
        if (!got) continue;
        const cmp c = compare(ref, got);
        printf("%-30s %-6s vs libllama: position 0 %.4f (< %.2f), median %.4f (< %.2f), %d/%d within %.2f "
               "(>= %d), worst %.3f, same argmax %d/%d%s\n",
               what, m ? "native" : "exact", c.rel0, TOL0, c.median, TOL_MEDIAN, c.within, NPOS, TOL,
               MIN_WITHIN, c.worst, c.same_top, NPOS, control ? " (a control: must not agree)" : "");
        if (control)
            CHECK_MSG(!agrees(&c, every_expert) && c.median > 1.5 * TOL_MEDIAN,
                      "%s: llama.cpp still agrees: the test cannot see it", what);
        else {
            CHECK_MSG(agrees(&c, every_expert), "%s %s: does not agree with libllama", what,
                      m ? "native" : "exact");
            CHECK_MSG(strstr(routes, want_routes) != NULL, "%s: routes '%s', want '%s'", what, routes,
                      want_routes);
        }
        if (every_expert == 1 && modes[m] == FP4_MODE_EXACT) { /* threads 1/2, chunks 1/5/all: same bits */
            static const int tc[][2] = {{1, NPOS}, {1, 1}, {2, 5}};
            for (size_t v = 0; v < sizeof tc / sizeof tc[0]; v++) {
                float *b = ours(mine, FP4_MODE_EXACT, tc[v][0], tc[v][1], ids, NULL, 0);
                CHECK_MSG(b && !memcmp(b, got, sizeof(float) * NPOS * VOCAB),
                          "%s exact: threads %d chunk %d differs in bits", what, tc[v][0], tc[v][1]);
                free(b);
            }
        }
        free(got);
    }
    free(ref);
}

/* (1) the gguf-ggml file against the directory it came from: every exact logit bit */
static void same_as_hf(const char *dir, const char *gguf) {
    int32_t ids[NPOS];
    fixed_ids(ids);
    float *a = ours(dir, FP4_MODE_EXACT, 2, NPOS, ids, NULL, 0),
          *b = ours(gguf, FP4_MODE_EXACT, 2, NPOS, ids, NULL, 0);
    CHECK_MSG(a && b && !memcmp(a, b, sizeof(float) * NPOS * VOCAB),
              "the gguf-ggml file's exact logits differ from the HF directory's");
    free(a);
    free(b);
}

/* llama.cpp's form: the keys and the 3-D experts, checked in the file itself */
static void check_file(const char *gguf, const char *ga, uint32_t used) {
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(gguf, &g, &e));
    uint32_t v = 0;
    char key[96];
    snprintf(key, sizeof key, "%s.expert_count", ga);
    CHECK_MSG(g && !fp4_gguf_get_u32(g, fp4_gguf_key_index(g, key), &v) && v == 16, "%s: %s", gguf, key);
    snprintf(key, sizeof key, "%s.expert_used_count", ga);
    CHECK_MSG(g && !fp4_gguf_get_u32(g, fp4_gguf_key_index(g, key), &v) && v == used, "%s: %s", gguf, key);
    snprintf(key, sizeof key, "%s.%s", ga,
             strcmp(ga, "llama") ? "expert_feed_forward_length" : "feed_forward_length");
    CHECK_MSG(g && !fp4_gguf_get_u32(g, fp4_gguf_key_index(g, key), &v) && v == 256, "%s: %s", gguf, key);
    static const char *const names[] = {"blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
                                        "blk.1.ffn_down_exps.weight", "blk.1.ffn_gate_inp.weight"};
    static const int64_t ne[][3] = {{256, 256, 16}, {256, 256, 16}, {256, 256, 16}, {256, 16, 1}};
    for (int k = 0; g && k < 4; k++) {
        const int64_t i = fp4_gguf_tensor_index(g, names[k]);
        const fp4_gguf_tensor *t = i >= 0 ? fp4_gguf_tensor_at(g, i) : NULL;
        CHECK_MSG(t && t->n_dims == (k < 3 ? 3 : 2) && t->ne[0] == ne[k][0] && t->ne[1] == ne[k][1] &&
                      (k == 3 || t->ne[2] == ne[k][2]),
                  "%s: missing or of the wrong shape", names[k]);
    }
    CHECK(g && fp4_gguf_tensor_index(g, "blk.0.ffn_gate.0.weight") < 0);
    fp4_gguf_close(g);
}

/* (3) llama.cpp's own type choice for this MoE file (llama_tensor_get_type of 3.22.1) */
static void q4km_types(const char *gguf) {
    static const struct {
        const char *name;
        fp4_type type;
    } want[] = {{"blk.0.ffn_gate_exps.weight", FP4_TYPE_Q4_K}, {"blk.0.ffn_up_exps.weight", FP4_TYPE_Q4_K},
                {"blk.0.ffn_down_exps.weight", FP4_TYPE_Q4_K}, {"blk.1.ffn_down_exps.weight", FP4_TYPE_Q6_K},
                {"blk.1.ffn_gate_inp.weight", FP4_TYPE_BF16},  {"output.weight", FP4_TYPE_Q6_K}};
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(gguf, &g, &e));
    for (size_t k = 0; g && k < sizeof want / sizeof want[0]; k++) {
        const int64_t i = fp4_gguf_tensor_index(g, want[k].name);
        const fp4_gguf_tensor *t = i >= 0 ? fp4_gguf_tensor_at(g, i) : NULL;
        CHECK_MSG(t && t->type == want[k].type, "%s: type %d, llama.cpp's choice should be %d", want[k].name,
                  t ? (int)t->type : -1, (int)want[k].type);
    }
    fp4_gguf_close(g);
}

/* (4) experts 0 and 1 of blk.0.ffn_down_exps swapped in a copy */
static void swap_control(llama_oracle *lo, const char *gguf) {
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(gguf, &g, &e));
    const int64_t i = g ? fp4_gguf_tensor_index(g, "blk.0.ffn_down_exps.weight") : -1;
    const fp4_gguf_tensor *t = i >= 0 ? fp4_gguf_tensor_at(g, i) : NULL;
    size_t n = 0;
    uint8_t *img = check_slurp(gguf, &n);
    CHECK(t && img);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/swapped.gguf", tmp);
    if (t && img) {
        const size_t slab = (size_t)(t->size / (uint64_t)t->ne[2]);
        uint8_t *x = img + t->offset, *s = malloc(slab);
        memcpy(s, x, slab), memcpy(x, x + slab, slab), memcpy(x + slab, s, slab);
        free(s);
        FILE *o = fopen(bad, "wb");
        CHECK(o && fwrite(img, 1, n, o) == n);
        if (o) fclose(o);
        against_llama(lo, "control: experts 0/1 swapped", bad, gguf, "", 1, 0);
    }
    free(img);
    fp4_gguf_close(g);
}

/* convert DIR --layout gguf-ggml (or quantize with q) is refused with rule and the message holding
 * what; nothing is written */
/* convert DIR --layout gguf-ggml (quantize with q) writes llama.cpp's MoE form (llamacpp 1: the
 * architecture key and the 3-D experts) or, where llama.cpp could not run the checkpoint as it says,
 * keeps every HF name and writes no llama.cpp architecture key (llamacpp 0), as for a family that
 * form does not cover: fp4lane still reads the file, llama.cpp does not mistake it for its own */
static void ggml_form(const char *dir, int q, int llamacpp) {
    char args[1600], out[700];
    snprintf(out, sizeof out, "%s/form-%d.gguf", tmp, llamacpp);
    snprintf(args, sizeof args, "%s %s %s --layout gguf-ggml --force", q ? "quantize" : "convert", dir, out);
    CHECK_MSG(run_cli(args) == 0, "fp4lane %s", args);
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(out, &g, &e));
    const int arch = g && fp4_gguf_key_index(g, "general.architecture") >= 0;
    const int hf = g && fp4_gguf_tensor_index(g, "model.layers.0.mlp.experts.0.gate_proj.weight") >= 0;
    const int exps = g && fp4_gguf_tensor_index(g, "blk.0.ffn_gate_exps.weight") >= 0;
    CHECK_MSG(llamacpp ? arch && exps && !hf : !arch && !exps && hf, "%s: %s llama.cpp's MoE form", dir,
              llamacpp ? "not in" : "in");
    fp4_gguf_close(g);
}

/* ggml_moe.c: each condition under which a MoE is not written in llama.cpp's form, and the valid
 * twin that is */
static void not_llamacpp(void) {
    char d[600], cmd[1400];
    static const struct {
        const char *name;
        int dense, drop, extra;
    } f[] = {{"dense-layer", 1, 0, 0}, {"missing-expert", -1, 1, 0}, {"extra-expert", -1, 0, 1}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        rtfx_spec sp = rtfx_moe("qwen3_moe");
        sp.dense_layer = f[k].dense, sp.drop_expert = f[k].drop, sp.extra_expert = f[k].extra;
        snprintf(d, sizeof d, "%s/%s", tmp, f[k].name);
        CHECK(rtfx_write_hf(d, &sp, 3) == 0);
        ggml_form(d, 0, 0);
    }
    rtfx_spec sp = rtfx_moe("qwen3_moe");
    sp.dense_layer = -1;
    snprintf(d, sizeof d, "%s/valid", tmp);
    CHECK(rtfx_write_hf(d, &sp, 3) == 0);
    ggml_form(d, 0, 1); /* the valid twin */
    ggml_form(d, 1, 1); /* NVFP4 experts: type 40, each expert's scale2 in the .scale vector */
    snprintf(d, sizeof d, "%s/no-norm-topk", tmp);
    CHECK(rtfx_write_hf(d, &sp, 3) == 0);
    snprintf(cmd, sizeof cmd, "sed -i 's/\"norm_topk_prob\": *true/\"norm_topk_prob\":false/' %s/config.json",
             d);
    CHECK(system(cmd) == 0);
    ggml_form(d, 0, 0);
}

/* synth tiny-moe16 (arch), every expert per token or the shape's 4, written as gguf-ggml: the file's
 * form, its logits against the HF directory's and against libllama's. 1 when the file was made. */
static int one_model(llama_oracle *lo, const char *arch, int every_expert) {
    char args[2000], dir[600], gg[600], what[96];
    const char *tag = every_expert ? "all" : "top";
    snprintf(dir, sizeof dir, "%s/%s-%s", tmp, arch, tag);
    snprintf(gg, sizeof gg, "%s/%s-%s.gguf", tmp, arch, tag);
    snprintf(args, sizeof args, "synth %s --shape tiny-moe16 --arch %s --seed 7", dir, arch);
    int ok = run_cli(args) == 0;
    if (ok && every_expert) {
        snprintf(args, sizeof args,
                 "sed -i 's/\"num_experts_per_tok\": *4/\"num_experts_per_tok\":16/' %s/config.json", dir);
        ok = system(args) == 0;
    }
    snprintf(args, sizeof args, "convert %s %s --layout gguf-ggml", dir, gg);
    ok = ok && run_cli(args) == 0;
    CHECK_MSG(ok, "%s: fp4lane synth / convert failed", arch);
    if (!ok) return 0;
    check_file(gg, strcmp(arch, "mixtral") ? "qwen3moe" : "llama", every_expert ? 16 : 4);
    same_as_hf(dir, gg);
    snprintf(what, sizeof what, "%s %s bf16", arch, every_expert ? "every expert" : "top 4");
    against_llama(lo, what, gg, gg, "experts: cpu.bf16.dense", 0, every_expert);
    return 1;
}

/* (6) NVFP4 experts: the ModelOpt checkpoint (synth --to nvfp4, every expert per token) written
 * as gguf-ggml holds llama.cpp's type-40 experts and each expert's scale2 in the F32 [16]
 * blk.L.ffn_X_exps.scale; fp4lane's exact logits from it equal the directory's bit for bit, the
 * way back to ModelOpt gives the directory's safetensors byte for byte, and libllama agrees
 * (EVERY_NVFP4). The control: the same file with every .scale vector in reverse expert order
 * (each expert given another's scale2: llama.cpp must pair scale e with expert e) must not. */
static void nvfp4_model(llama_oracle *lo, const char *arch) {
    char args[2000], dir[600], gg[600], back[600], what[96];
    snprintf(dir, sizeof dir, "%s/%s-nvfp4", tmp, arch);
    snprintf(gg, sizeof gg, "%s/%s-nvfp4.gguf", tmp, arch);
    snprintf(back, sizeof back, "%s/%s-nvfp4-back", tmp, arch);
    snprintf(args, sizeof args, "synth %s --shape tiny-moe16 --arch %s --seed 7 --to nvfp4", dir, arch);
    int ok = run_cli(args) == 0;
    snprintf(args, sizeof args,
             "sed -i 's/\"num_experts_per_tok\": *4/\"num_experts_per_tok\":16/' %s/config.json", dir);
    ok = ok && system(args) == 0;
    snprintf(args, sizeof args, "convert %s %s --layout gguf-ggml", dir, gg);
    ok = ok && run_cli(args) == 0;
    snprintf(args, sizeof args, "convert %s %s --layout modelopt", gg, back);
    ok = ok && run_cli(args) == 0;
    CHECK_MSG(ok, "%s nvfp4: fp4lane synth / convert failed", arch);
    if (!ok) return;
    check_file(gg, strcmp(arch, "mixtral") ? "qwen3moe" : "llama", 16);
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(gg, &g, &e));
    size_t n = 0;
    uint8_t *img = check_slurp(gg, &n);
    for (int64_t i = 0; g && i < fp4_gguf_n_tensors(g); i++) { /* the type-40 experts and their scales */
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        if (strstr(t->name, "_exps.weight"))
            CHECK_MSG(t->type == FP4_TYPE_GGML_NVFP4 && t->n_dims == 3, "%s: not type 40, 3-D", t->name);
        if (!strstr(t->name, "_exps.scale")) continue;
        CHECK_MSG(t->type == FP4_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 16, "%s: not F32 [16]", t->name);
        float *v = img && t->ne[0] == 16 ? (float *)(img + t->offset) : NULL; /* reversed for the control */
        for (int k = 0; v && k < 8; k++) {
            const float x = v[k];
            v[k] = v[15 - k], v[15 - k] = x;
        }
    }
    CHECK(g && fp4_gguf_tensor_index(g, "blk.1.ffn_down_exps.scale") >= 0);
    fp4_gguf_close(g);
    same_as_hf(dir, gg);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/model.safetensors", back);
    size_t na = 0, nb = 0;
    uint8_t *x = check_slurp(a, &na), *y = check_slurp(b, &nb);
    CHECK_MSG(x && y && na == nb && !memcmp(x, y, na),
              "%s: ModelOpt -> gguf-ggml -> ModelOpt is not byte-identical", arch);
    free(x), free(y);
    snprintf(what, sizeof what, "%s every expert nvfp4", arch);
    against_llama(lo, what, gg, gg, "experts: cpu.nvfp4", 0, EVERY_NVFP4);
    snprintf(b, sizeof b, "%s/%s-nvfp4-reversed.gguf", tmp, arch);
    FILE *o = img ? fopen(b, "wb") : NULL;
    CHECK(o && fwrite(img, 1, n, o) == n);
    if (o) fclose(o);
    snprintf(what, sizeof what, "control: %s scales reversed", arch);
    if (o) against_llama(lo, what, b, gg, "", 1, EVERY_NVFP4);
    free(img);
}

/* llama.cpp's own Q4_K_M of gg (its converter's form: fp4lane.* keys dropped), against libllama */
static void q4km(llama_oracle *lo, const char *gg, const char *name, int every_expert) {
    char err[2600], bare[700], q4[700], what[96];
    snprintf(bare, sizeof bare, "%s/%s-bare.gguf", tmp, name);
    snprintf(q4, sizeof q4, "%s/%s-q4_k_m.gguf", tmp, name);
    long dropped = 0;
    int ok = gguf_strip_fp4lane(gg, bare, &dropped, err, sizeof err) == 0;
    CHECK_MSG(ok, "%s", err);
    ok = ok && llama_oracle_quantize(lo, bare, q4, LLAMA_ORACLE_Q4_K_M, 2, err, sizeof err) == 0;
    CHECK_MSG(ok, "llama.cpp's quantizer: %s", err);
    if (!ok) return;
    q4km_types(q4);
    snprintf(what, sizeof what, "%s llama.cpp Q4_K_M", name);
    against_llama(lo, what, q4, q4, "experts: cpu.q4_k.q8_k", 0, every_expert);
}

int main(void) {
    check_test_name = "llama_moe";
    const char *b = getenv("FP4_BUILD");
    static char bin[600];
    snprintf(bin, sizeof bin, "%s/fp4lane", b && *b ? b : "build");
    fp4lane_bin = bin;
    snprintf(tmp, sizeof tmp, "/tmp/fp4lane-llama-moe-XXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    not_llamacpp();
    llama_oracle *lo = NULL;
    char err[2600], gg[600], cmd[700];
    if (llama_oracle_open(&lo, err, sizeof err)) {
        printf("SKIP: libllama not installed (%s)\n", err);
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd)) {
        }
        return check_report();
    }
    if (one_model(lo, "qwen3-moe", 0)) { /* top 4 of 16, and the control */
        snprintf(gg, sizeof gg, "%s/qwen3-moe-top.gguf", tmp);
        swap_control(lo, gg);
    }
    if (one_model(lo, "qwen3-moe", 1)) { /* every expert per token */
        snprintf(gg, sizeof gg, "%s/qwen3-moe-all.gguf", tmp);
        q4km(lo, gg, "qwen3-moe-all", 1);
    }
    one_model(lo, "mixtral", 1);
    nvfp4_model(lo, "qwen3-moe");
    nvfp4_model(lo, "mixtral");
    llama_oracle_close(lo);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {
    }
    return check_report();
}
