/* test_gpu_deepseek.cu — DeepSeek-V3 on the CUDA step (issue 31: latent attention, mla.cuh; the
 * sigmoid group-limited routing with shared experts, moe.cuh) against the CPU engine in the same
 * process, on the synth checkpoints tiny-deepseek (q_lora on, yarn with both mscales, interleaved
 * rope, one dense layer, 8 experts in 4 groups, 3 a token, one shared expert) and
 * tiny-deepseek-nolora (a plain q projection; rope_interleave set false here), each in bf16 and
 * its NVFP4 twin:
 *   - exact: teacher-forced logits of NPOS positions on the GPU equal the CPU's bit for bit, with
 *     prefill chunks of 1 (eager, captured, replayed graphs; with and without the fused activation
 *     pass), 5 and NPOS, and inside a batch of 3 sequences that join and leave;
 *   - greedy steps (the device's argmax) pick the CPU logits' argmax (32 tokens);
 *   - a KV snapshot (the latent rows) continues on the other device to the same bits, both ways;
 *   - native: bf16 within 6e-3 of the largest |logit| of the CPU's native logits; NVFP4's figure is
 *     printed only, as test_gpu_moe's, until native MoE routing near ties is settled (issue 28).
 * The route is refused until a device run has proven it: this test sets FP4LANE_CUDA_UNPROVEN=1.
 * FP4_GPU_QUICK=1 (compute-sanitizer): tiny-deepseek NVFP4's chunks 1 and 5, greedy and native only.
 * No GPU: skipped. */
extern "C" {
#include "check.h"
}
#include "fp4lane.h"
#include "fp4lane_runtime.h"
#include "fp4lane_synth.h"
#include <jansson.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NPOS = 64, SNAP = 40 };

#include "rt_fixture.cuh"

/* SNAP positions on device `from`, saved; loaded on device `to`, continued to NPOS: the full run's
 * bits (want: NPOS rows) */
static void snapshot(const fp4_model *m, const char *tmp, fp4_device from, fp4_device to, const int32_t *ids,
                     const float *want) {
    const char *fn = from == FP4_DEVICE_CUDA ? "cuda" : "cpu", *tn = to == FP4_DEVICE_CUDA ? "cuda" : "cpu";
    char path[700], what[96];
    snprintf(path, sizeof path, "%s/snap-%s.kv", tmp, fn);
    snprintf(what, sizeof what, "snapshot %s -> %s, continued", fn, tn);
    fp4_rt *rt = engine(m, from, FP4_MODE_EXACT, 1, 256, NULL);
    if (!rt) return;
    const int64_t V = fp4_rt_vocab(rt);
    int32_t s;
    fp4_rt_tok c[NPOS];
    fp4_error e;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    for (int i = 0; i < SNAP; i++)
        c[i] = (fp4_rt_tok){s, ids[i], 0};
    CHECK_OK(fp4_rt_step(rt, c, SNAP, NULL, &e));
    CHECK_OK(fp4_rt_kv_save(rt, s, path, &e));
    fp4_rt_free(rt);
    rt = engine(m, to, FP4_MODE_EXACT, 1, 256, NULL);
    if (!rt) return;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    CHECK_MSG(fp4_rt_kv_load(rt, s, path, &e) == FP4_OK, "%s: %s %s", what, e.rule, e.msg);
    CHECK_OK(fp4_rt_seq_truncate(rt, s, SNAP - 1)); /* the last position again, from the loaded rows */
    float *part = (float *)malloc(sizeof(float) * (size_t)((NPOS - SNAP + 1) * V));
    for (int i = SNAP - 1; i < NPOS; i++)
        c[i - SNAP + 1] = (fp4_rt_tok){s, ids[i], 1};
    CHECK_OK(fp4_rt_step(rt, c, NPOS - SNAP + 1, part, &e));
    bits_differ(what, want + (int64_t)(SNAP - 1) * V, part, (int64_t)(NPOS - SNAP + 1) * V);
    free(part);
    fp4_rt_free(rt);
}

/* a diagnostic, not a check: the two snapshots' bytes (the same SNAP positions saved by each device:
 * the latent rows, layer by layer); the first difference locates a wrong row */
static void snapshot_bytes(const char *tmp) {
    char pc[700], pg[700];
    snprintf(pc, sizeof pc, "%s/snap-cpu.kv", tmp);
    snprintf(pg, sizeof pg, "%s/snap-cuda.kv", tmp);
    FILE *a = fopen(pc, "rb"), *b = fopen(pg, "rb");
    long n = 0, first = -1;
    for (int x, y; a && b && (x = fgetc(a)) != EOF && (y = fgetc(b)) != EOF; n++)
        if (x != y && first < 0) first = n;
    printf("%-52s %ld bytes compared, first difference at %ld\n", "kv snapshot files cpu vs cuda", n, first);
    if (a) fclose(a);
    if (b) fclose(b);
    unlink(pc), unlink(pg);
}

static void model_case(const char *dir, const char *tmp, const char *what, int full, int native_tol) {
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    if (!m) return;
    fp4_arch a;
    CHECK_OK(fp4_model_arch(m, &a, &e));
    const int64_t V = a.vocab, n = (int64_t)NPOS * V;
    int32_t ids[NPOS];
    for (int i = 0; i < NPOS; i++)
        ids[i] = (int32_t)((i * 131 + 17) % V);
    float *cpu = (float *)malloc(sizeof(float) * (size_t)n);
    float *gpu = (float *)malloc(sizeof(float) * (size_t)n);
    char w[160];
    if (run_seq(m, FP4_DEVICE_CPU, FP4_MODE_EXACT, NPOS, 256, ids, cpu)) goto out;
    static const struct { int chunk, no_actfuse; } v[] = {{1, 0}, {5, 0}, {NPOS, 0}, {1, 1}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (!full && i > 1) break;
        if (v[i].no_actfuse) setenv("FP4LANE_CUDA_NO_ACTFUSE", "1", 1);
        snprintf(w, sizeof w, "%s exact chunk %d%s", what, v[i].chunk, v[i].no_actfuse ? " no-actfuse" : "");
        if (run_seq(m, FP4_DEVICE_CUDA, FP4_MODE_EXACT, v[i].chunk, 256, ids, gpu) == 0)
            bits_differ(w, cpu, gpu, n);
        unsetenv("FP4LANE_CUDA_NO_ACTFUSE");
    }
    if (full && run_batch(m, FP4_DEVICE_CUDA, ids, gpu) == 0) {
        snprintf(w, sizeof w, "%s exact in a batch of 3", what);
        bits_differ(w, cpu, gpu, n);
    }
    snprintf(w, sizeof w, "%s greedy", what);
    greedy(m, w, ids, 16);
    if (full) {
        snapshot(m, tmp, FP4_DEVICE_CUDA, FP4_DEVICE_CPU, ids, cpu);
        snapshot(m, tmp, FP4_DEVICE_CPU, FP4_DEVICE_CUDA, ids, cpu);
        snapshot_bytes(tmp);
    }
    snprintf(w, sizeof w, "%s native cuda vs native cpu", what);
    if (run_seq(m, FP4_DEVICE_CPU, FP4_MODE_NATIVE, NPOS, 512, ids, cpu) == 0 &&
        run_seq(m, FP4_DEVICE_CUDA, FP4_MODE_NATIVE, NPOS, 512, ids, gpu) == 0)
        within(w, gpu, cpu, n, native_tol ? 6e-3 : -1.0);
out:
    free(cpu), free(gpu);
    fp4_model_close(m);
}

/* the config.json of dir with key set to the JSON value val */
static void edit_config(const char *dir, const char *key, const char *val) {
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *c = json_load_file(path, 0, NULL);
    CHECK(c != NULL);
    if (!c) return;
    json_object_set_new(c, key, json_loads(val, JSON_DECODE_ANY, NULL));
    CHECK(json_dump_file(c, path, JSON_COMPACT) == 0);
    json_decref(c);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void synth(const char *out, const char *shape, int nvfp4) {
    fp4_synth_opts so;
    memset(&so, 0, sizeof so);
    so.shape = shape, so.seed = 3, so.n_threads = 2, so.to_nvfp4 = nvfp4;
    fp4_error e;
    CHECK_MSG(fp4_synth_checkpoint(out, &so, &e) == FP4_OK, "synth %s: %s", shape, e.msg);
}

int main(void) {
    snprintf(cuda_lib, sizeof cuda_lib, "%s/libfp4lane_cuda.so",
             getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    setenv("FP4LANE_CUDA_UNPROVEN", "1", 1);
    char tmp[512], bf[600], nv[600], bn[600], nn[600];
    snprintf(tmp, sizeof tmp, "%s/fp4lane-gpuds-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    snprintf(bf, sizeof bf, "%s/bf16", tmp);
    snprintf(nv, sizeof nv, "%s/nvfp4", tmp);
    snprintf(bn, sizeof bn, "%s/bf16-nolora", tmp);
    snprintf(nn, sizeof nn, "%s/nvfp4-nolora", tmp);
    synth(bf, "tiny-deepseek", 0);
    synth(nv, "tiny-deepseek", 1);
    { /* skip without a GPU: the engine itself says so */
        fp4_model *m = NULL;
        fp4_error e;
        CHECK_OK(fp4_model_open(bf, NULL, &m, &e));
        fp4_status st = FP4_ERR_NO_DEVICE;
        fp4_rt *rt = m ? engine(m, FP4_DEVICE_CUDA, FP4_MODE_EXACT, 1, 256, &st) : NULL;
        fp4_rt_free(rt);
        fp4_model_close(m);
        if (st == FP4_ERR_NO_DEVICE) {
            check_gpu_skip(); /* FP4_GPU_REQUIRE=1: a failure */
            nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
            return check_report();
        }
        CHECK_OK(st);
    }
    const int quick = getenv("FP4_GPU_QUICK") && getenv("FP4_GPU_QUICK")[0] == '1';
    if (quick) {
        model_case(nv, tmp, "tiny-deepseek nvfp4 (quick)", 0, 0);
        nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return check_report();
    }
    synth(bn, "tiny-deepseek-nolora", 0);
    synth(nn, "tiny-deepseek-nolora", 1);
    edit_config(bn, "rope_interleave", "false");
    edit_config(nn, "rope_interleave", "false");
    model_case(bf, tmp, "tiny-deepseek bf16", 1, 1);
    model_case(nv, tmp, "tiny-deepseek nvfp4", 1, 0);
    model_case(bn, tmp, "tiny-deepseek-nolora bf16", 1, 1);
    model_case(nn, tmp, "tiny-deepseek-nolora nvfp4", 1, 0);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_report();
}
