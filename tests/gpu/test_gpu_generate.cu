/* test_gpu_generate.cu — generation on the GPU (libfp4lane_cuda.so, loaded by the engine as
 * `fp4lane run --device cuda` loads it), on transformers' reference checkpoints (tests/data/hf):
 *   (a) speculative decoding (fp4_spec) on CUDA equals plain decoding on CUDA bit for bit — the
 *       same tokens and every logit of every position processed — on every CUDA route the table
 *       qualifies for drafting: NVFP4 A16 and W4A4 exact, dense exact, kquant native; greedy and
 *       seeded sampling; the target as its own draft (every proposal accepted) and a foreign
 *       draft (qwen2 for llama: proposals rejected, the caches rolled back); and the speculative
 *       CUDA exact run equals the plain CPU exact run;
 *   (b) --seed reproducibility on the GPU: a seeded sampled generation (temperature 0.8, top-k 40,
 *       top-p 0.9, seed 7) gives the same tokens (and logits bits) on CUDA exact as on CPU exact,
 *       and the same tokens twice in a row on CUDA native;
 *   (c) prompt caches compose on the GPU (`fp4lane run --device cuda --kv-save / --kv-load`, issue
 *       27): a run of 12 saved after 6 and continued for 6 gives the one run's tokens and logits
 *       bits, on the logits path and on the device-argmax greedy path; the CUDA snapshot continues
 *       on the CPU to the same bits, and the CUDA runs equal the CPU's (exact);
 *   (d) a cache of f16 infinities (a crafted snapshot): the CUDA step gives the CPU's answer on
 *       the logits path, on the device argmax's flag (fp4_rt_step_greedy) and on its host
 *       fallback (FP4LANE_CUDA_NO_ARGMAX=1): on the bf16 checkpoint NaN logits, refused (rule
 *       rt.nonfinite, the position named); on the NVFP4 one finite logits (SPEC §4 step 1 turns
 *       the attention's all-NaN output into a zero super-block), the CPU's bits.
 * FP4_GPU_QUICK=1 (compute-sanitizer): greedy only, one seeded model. No GPU: skipped. */
extern "C" {
#include "check.h"
}
#include "fp4lane.h"
#include "fp4lane_runtime.h"
#include "rt_data.h"
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HF_DIR "tests/data/hf"
enum { NP = 8, NGEN = 24, NCTX = 64, MAXROWS = NP + NGEN };

static char cuda_lib[600];
static int32_t prompt[NP];

static fp4_rt *engine(const char *path, fp4_model **m, fp4_device dev, fp4_mode mode, int drafting,
                      fp4_status *st_out) {
    fp4_error e;
    fp4_rt *rt = NULL;
    *m = NULL;
    CHECK_OK(fp4_model_open(path, NULL, m, &e));
    if (!*m) return NULL;
    fp4_rt_opts o;
    memset(&o, 0, sizeof o);
    o.mode = mode, o.device = dev, o.n_threads = 2, o.n_ctx = NCTX, o.max_seqs = 1, o.drafting = drafting,
    o.cuda_lib = cuda_lib;
    const fp4_status st = fp4_rt_create(*m, &o, &rt, &e);
    if (st_out)
        *st_out = st;
    else
        CHECK_MSG(st == FP4_OK, "%s on %s: %s: %s", path, dev == FP4_DEVICE_CUDA ? "cuda" : "cpu",
                  fp4_status_str(st), e.msg);
    return rt;
}

static fp4_rt_tok tk(int32_t seq, int32_t token, int32_t want) {
    fp4_rt_tok t;
    t.seq = seq, t.token = token, t.want_logits = want;
    return t;
}

typedef struct gen {
    int32_t tok[NGEN];
    int n_tok;
    float *rows; /* MAXROWS * V */
    int64_t n_rows, V;
    int32_t hist[MAXROWS];
    int64_t n_hist;
    fp4_spec_stats st;
    int ok;
} gen;

static int on_emit(void *user, int32_t token, const float *row) {
    gen *g = (gen *)user;
    if (g->n_rows == MAXROWS || g->n_tok == NGEN) return -1;
    memcpy(g->rows + g->n_rows++ * g->V, row, sizeof(float) * (size_t)g->V);
    g->tok[g->n_tok++] = token, g->hist[g->n_hist++] = token;
    return g->n_tok == NGEN;
}

/* plain decoding (draft NULL) or speculative decoding, as `fp4lane run` does them */
static void generate(const char *target, const char *draft, fp4_device dev, fp4_mode mode, int k, int sampled,
                     gen *g) {
    memset(g, 0, sizeof *g);
    fp4_model *m = NULL, *dm = NULL;
    fp4_rt *rt = engine(target, &m, dev, mode, draft != NULL, NULL);
    fp4_rt *dr = draft ? engine(draft, &dm, dev, mode, 0, NULL) : NULL;
    fp4_sampler *smp = NULL;
    fp4_spec *sp = NULL;
    fp4_error e;
    if (!rt || (draft && !dr)) goto out;
    {
        g->V = fp4_rt_vocab(rt);
        g->rows = (float *)malloc(sizeof(float) * (size_t)(MAXROWS * g->V));
        fp4_sampler_params p = fp4_sampler_defaults();
        if (sampled) p.temperature = 0.8f, p.top_k = 40, p.top_p = 0.9f, p.seed = 7;
        CHECK_OK(fp4_sampler_create(&p, g->V, &smp));
        int32_t seq = 0, dseq = 0;
        CHECK_OK(fp4_rt_seq_open(rt, &seq));
        fp4_rt_tok cols[NP];
        for (int i = 0; i < NP; i++)
            cols[i] = tk(seq, prompt[i], 1), fp4_sampler_accept(smp, prompt[i]),
            g->hist[g->n_hist++] = prompt[i];
        CHECK_OK(fp4_rt_step(rt, cols, NP, g->rows, &e));
        g->n_rows = NP;
        int32_t next = fp4_sampler_sample(smp, g->rows + (NP - 1) * g->V);
        g->tok[g->n_tok++] = next, g->hist[g->n_hist++] = next;
        fp4_sampler_accept(smp, next);
        if (!dr) {
            while (g->n_tok < NGEN) {
                fp4_rt_tok t = tk(seq, next, 1);
                float *row = g->rows + g->n_rows * g->V;
                if (fp4_rt_step(rt, &t, 1, row, &e)) goto out;
                g->n_rows++;
                next = fp4_sampler_sample(smp, row);
                fp4_sampler_accept(smp, next);
                g->tok[g->n_tok++] = next;
            }
        } else {
            CHECK_OK(fp4_rt_seq_open(dr, &dseq));
            for (int i = 0; i < NP; i++)
                cols[i] = tk(dseq, prompt[i], 0);
            CHECK_OK(fp4_rt_step(dr, cols, NP, NULL, &e));
            CHECK_OK(fp4_spec_create(rt, seq, dr, dseq, k, &sp, &e));
            int stop = 0;
            while (sp && !stop) {
                const fp4_status st =
                    fp4_spec_round(sp, g->hist, g->n_hist, NGEN - g->n_tok, smp, on_emit, g, &stop, &e);
                CHECK_MSG(st == FP4_OK, "round: %s: %s", fp4_status_str(st), e.msg);
                if (st) goto out;
            }
            g->st = fp4_spec_get_stats(sp);
        }
        g->ok = g->n_tok == NGEN;
    }
out:
    fp4_spec_free(sp);
    fp4_sampler_free(smp);
    fp4_rt_free(dr), fp4_rt_free(rt);
    fp4_model_close(dm), fp4_model_close(m);
}

static void same(const gen *a, const gen *b, int logits, const char *what) {
    CHECK_MSG(a->ok && b->ok, "%s: a generation failed", what);
    if (!a->ok || !b->ok) return;
    CHECK_MSG(!memcmp(a->tok, b->tok, sizeof a->tok), "%s: tokens differ", what);
    if (logits)
        CHECK_MSG(a->n_rows == b->n_rows && a->V == b->V &&
                      !memcmp(a->rows, b->rows, sizeof(float) * (size_t)(a->n_rows * a->V)),
                  "%s: logits differ", what);
}

/* (a) speculative == plain on CUDA (and, in exact mode, == plain on the CPU) */
static void spec_case(const char *target, const char *draft, fp4_mode mode, int k, int sampled,
                      const char *what) {
    gen plain, spec;
    generate(target, NULL, FP4_DEVICE_CUDA, mode, 0, sampled, &plain);
    generate(target, draft, FP4_DEVICE_CUDA, mode, k, sampled, &spec);
    char w[256];
    snprintf(w, sizeof w, "%s k %d %s: speculative vs plain on cuda", what, k,
             sampled ? "sampled" : "greedy");
    same(&plain, &spec, 1, w);
    CHECK_MSG(spec.st.drafted > 0 && spec.st.accepted <= spec.st.drafted, "%s: drafted %lld", w,
              (long long)spec.st.drafted);
    if (!strcmp(target, draft) && !sampled)
        CHECK_MSG(spec.st.accepted == spec.st.drafted, "%s: self-draft accepted %lld of %lld", w,
                  (long long)spec.st.accepted, (long long)spec.st.drafted);
    if (strstr(draft, "qwen2"))
        CHECK_MSG(spec.st.accepted < spec.st.drafted, "%s: foreign draft accepted %lld of %lld", w,
                  (long long)spec.st.accepted, (long long)spec.st.drafted);
    printf("%s: drafted %lld, accepted %lld\n", w, (long long)spec.st.drafted, (long long)spec.st.accepted);
    if (mode == FP4_MODE_EXACT) {
        gen cpu;
        generate(target, NULL, FP4_DEVICE_CPU, mode, 0, sampled, &cpu);
        snprintf(w, sizeof w, "%s k %d %s: speculative cuda vs plain cpu", what, k,
                 sampled ? "sampled" : "greedy");
        same(&cpu, &spec, 1, w);
        free(cpu.rows);
    }
    free(plain.rows), free(spec.rows);
}

/* (c) */
static char bin[600];
static char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    char *b = (char *)calloc(1, 1 << 22);
    *n = f ? (long)fread(b, 1, (1 << 22) - 1, f) : -1;
    if (f) fclose(f);
    return b;
}
/* `fp4lane run MODEL ARGS` on DEVICE: 0 with stdout's first line (the ids) in ids */
static int run_cli(const char *tmp, const char *model, const char *dev, const char *args, char *ids,
                   size_t cap) {
    char cmd[3000], out[700];
    snprintf(out, sizeof out, "%s/cli.out", tmp);
    snprintf(cmd, sizeof cmd, "%s run %s --device %s --cuda-lib %s --ignore-eos %s >%s 2>%s/cli.err", bin,
             model, dev, cuda_lib, args, out, tmp);
    const int rc = system(cmd);
    long n;
    char *o = slurp(out, &n);
    snprintf(ids, cap, "%.*s", (int)strcspn(o, "\n"), o);
    free(o);
    return rc;
}
/* a's rows then b's rows == c's rows, bit for bit (the .npy headers are 128 bytes) */
static int npy_concat(const char *a, const char *b, const char *c) {
    long na, nb, nc;
    char *A = a ? slurp(a, &na) : NULL, *B = slurp(b, &nb), *C = slurp(c, &nc);
    if (!a) na = 128;
    const int ok = na >= 128 && nb > 128 && nc > 128 && na + nb - 256 == nc - 128 &&
                   (!a || !memcmp(A + 128, C + 128, (size_t)(na - 128))) &&
                   !memcmp(B + 128, C + na, (size_t)(nb - 128));
    free(A), free(B), free(C);
    return ok;
}

static void compose_case(const char *tmp, const char *model, const char *what) {
    char a[2000], s[700], l1[700], l2[700], l[700], lc[700], x[6][400];
    snprintf(s, sizeof s, "%s/c.kv", tmp);
    snprintf(l1, sizeof l1, "%s/c1.npy", tmp), snprintf(l2, sizeof l2, "%s/c2.npy", tmp);
    snprintf(l, sizeof l, "%s/c.npy", tmp), snprintf(lc, sizeof lc, "%s/cpu.npy", tmp);
    const char *P = "--prompt-ids 1,5,9,13,17,21";
    remove(s), remove(l1), remove(l2), remove(l), remove(lc);
    snprintf(a, sizeof a, "%s -n 12 --logits-out %s", P, l);
    CHECK(run_cli(tmp, model, "cuda", a, x[0], sizeof x[0]) == 0);
    snprintf(a, sizeof a, "%s -n 6 --kv-save %s --logits-out %s", P, s, l1);
    CHECK(run_cli(tmp, model, "cuda", a, x[1], sizeof x[1]) == 0);
    snprintf(a, sizeof a, "--kv-load %s --prompt-ids '' -n 6 --logits-out %s", s, l2);
    CHECK(run_cli(tmp, model, "cuda", a, x[2], sizeof x[2]) == 0);
    char both[900];
    snprintf(both, sizeof both, "%s %s", x[1], x[2]);
    CHECK_MSG(!strcmp(both, x[0]), "%s: cuda save + continue '%s', one run '%s'", what, both, x[0]);
    CHECK_MSG(npy_concat(l1, l2, l), "%s: cuda save + continue: the logits differ from one run", what);
    /* greedy on the device (no --logits-out: fp4_rt_step_greedy) */
    CHECK(run_cli(tmp, model, "cuda", "--prompt-ids 1,5,9,13,17,21 -n 12", x[3], sizeof x[3]) == 0);
    remove(s);
    snprintf(a, sizeof a, "%s -n 6 --kv-save %s", P, s);
    CHECK(run_cli(tmp, model, "cuda", a, x[4], sizeof x[4]) == 0);
    snprintf(a, sizeof a, "--kv-load %s --prompt-ids '' -n 6", s);
    CHECK(run_cli(tmp, model, "cuda", a, x[5], sizeof x[5]) == 0);
    snprintf(both, sizeof both, "%s %s", x[4], x[5]);
    CHECK_MSG(!strcmp(both, x[3]) && !strcmp(x[3], x[0]),
              "%s: device greedy: '%s', one run '%s' (logits path '%s')", what, both, x[3], x[0]);
    /* the CUDA snapshot on the CPU, and the CPU's one run: the same bits (exact) */
    remove(l2);
    snprintf(a, sizeof a, "--kv-load %s --prompt-ids '' -n 6 --logits-out %s", s, l2);
    CHECK(run_cli(tmp, model, "cpu", a, x[2], sizeof x[2]) == 0);
    CHECK_MSG(!strcmp(x[2], x[5]) && npy_concat(l1, l2, l), "%s: the cuda snapshot continued on the cpu",
              what);
    snprintf(a, sizeof a, "%s -n 12 --logits-out %s", P, lc);
    CHECK(run_cli(tmp, model, "cpu", a, x[1], sizeof x[1]) == 0);
    CHECK_MSG(!strcmp(x[1], x[0]) && npy_concat(NULL, lc, l), "%s: cpu one run vs cuda", what);
}

/* one step of prompt[0] at position NP on a fresh engine of dev that loaded snap: k = 0 the logits
 * path (row filled), 1 the greedy path (the device argmax on CUDA), 2 greedy with the host fallback */
static fp4_status snap_step(const char *model, fp4_device dev, const char *snap, int k, float *row,
                            int32_t *tok, fp4_error *e) {
    fp4_model *m = NULL;
    if (k == 2) setenv("FP4LANE_CUDA_NO_ARGMAX", "1", 1);
    fp4_rt *rt = engine(model, &m, dev, FP4_MODE_EXACT, 0, NULL);
    fp4_status st = FP4_ERR_NO_DEVICE;
    int32_t seq = 0;
    *tok = -1;
    memset(e, 0, sizeof *e);
    if (rt) {
        CHECK_OK(fp4_rt_seq_open(rt, &seq));
        CHECK_OK(fp4_rt_kv_load(rt, seq, snap, e));
        fp4_rt_tok t = tk(seq, prompt[0], 1);
        st = k ? fp4_rt_step_greedy(rt, &t, 1, tok, e) : fp4_rt_step(rt, &t, 1, row, e);
    }
    fp4_rt_free(rt), fp4_model_close(m);
    unsetenv("FP4LANE_CUDA_NO_ARGMAX");
    return st;
}

/* (d) a snapshot (saved on the CPU: exact identities do not name the device) whose K/V halves are
 * all +inf, sealed again; the CUDA step gives the CPU step's answer on every path. Where the
 * projections are dense (the bf16 checkpoint) the attention's NaN reaches the logits: rt.nonfinite,
 * the position named. Through the NVFP4 A16 contraction it does not: SPEC §4 step 1 finds no |x|
 * above 0 in a super-block of NaN (the attention output of every head), which then contributes
 * nothing, so the logits are finite and equal the CPU's bit for bit. */
static void nonfinite_case(const char *tmp, const char *model, int want_nonfinite) {
    char snap[700];
    snprintf(snap, sizeof snap, "%s/inf.kv", tmp);
    fp4_model *m = NULL;
    fp4_rt *rt = engine(model, &m, FP4_DEVICE_CPU, FP4_MODE_EXACT, 0, NULL);
    fp4_error e;
    if (!rt) return;
    int32_t seq = 0;
    CHECK_OK(fp4_rt_seq_open(rt, &seq));
    fp4_rt_tok cols[NP];
    for (int i = 0; i < NP; i++)
        cols[i] = tk(seq, prompt[i], 0);
    CHECK_OK(fp4_rt_step(rt, cols, NP, NULL, &e));
    remove(snap);
    CHECK_OK(fp4_rt_kv_save(rt, seq, snap, &e));
    const size_t V = (size_t)fp4_rt_vocab(rt);
    fp4_rt_free(rt), fp4_model_close(m);
    long n;
    uint8_t *b = (uint8_t *)slurp(snap, &n);
    CHECK(b && n > 128 && b[88] == 0);
    for (long i = 96; b && i + 1 < n - 32; i += 2) /* no token history: the halves start at 96 */
        b[i] = 0x00, b[i + 1] = 0x7C;
    unsigned int dl = 32;
    if (b) EVP_Digest(b, (size_t)(n - 32), b + n - 32, &dl, EVP_sha256(), NULL);
    FILE *f = fopen(snap, "wb");
    CHECK(b && f && fwrite(b, 1, (size_t)n, f) == (size_t)n);
    if (f) fclose(f);
    free(b);
    float *want = (float *)malloc(sizeof(float) * V), *row = (float *)malloc(sizeof(float) * V);
    char pos[40];
    snprintf(pos, sizeof pos, "position %d", NP);
    for (int k = 0; k < 3; k++) { /* logits; device argmax; host argmax */
        fp4_error ec;
        int32_t ctok, tok;
        const fp4_status cst = snap_step(model, FP4_DEVICE_CPU, snap, k, want, &ctok, &ec);
        const int cbad = cst == FP4_ERR_NONFINITE && !strcmp(ec.rule, "rt.nonfinite") && strstr(ec.msg, pos);
        CHECK_MSG(want_nonfinite ? cbad : cst == FP4_OK, "%s cpu path %d: %s %s %s", model, k,
                  fp4_status_str(cst), ec.rule, ec.msg);
        const fp4_status st = snap_step(model, FP4_DEVICE_CUDA, snap, k, row, &tok, &e);
        const char *what = k == 0 ? "logits" : k == 1 ? "device argmax" : "host argmax";
        const int bad = st == FP4_ERR_NONFINITE && !strcmp(e.rule, "rt.nonfinite") && strstr(e.msg, pos);
        CHECK_MSG(st == cst && bad == cbad, "%s cuda %s: %s %s %s (token %d; cpu: %s)", model, what,
                  fp4_status_str(st), e.rule, e.msg, tok, fp4_status_str(cst));
        if (cst == FP4_OK && st == FP4_OK)
            CHECK_MSG(k ? tok == ctok : !memcmp(row, want, sizeof(float) * V), "%s cuda %s: token %d, cpu %d",
                      model, what, tok, ctok);
    }
    free(want), free(row);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

int main(void) {
    snprintf(cuda_lib, sizeof cuda_lib, "%s/libfp4lane_cuda.so",
             getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    {
        fp4_model *m = NULL;
        fp4_status st = FP4_ERR_NO_DEVICE;
        fp4_rt *rt = engine(HF_DIR "/llama", &m, FP4_DEVICE_CUDA, FP4_MODE_EXACT, 0, &st);
        fp4_rt_free(rt);
        fp4_model_close(m);
        if (st == FP4_ERR_NO_DEVICE) {
            check_gpu_skip();
            return check_report();
        }
        CHECK_OK(st);
    }
    int32_t ids[40];
    CHECK(rtd_read_ids(HF_DIR "/llama/ids.txt", ids, 40) >= NP);
    memcpy(prompt, ids, sizeof prompt);
    char tmp[512], w4[600], kq[600];
    snprintf(tmp, sizeof tmp, "%s/fp4lane-gpugen-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    snprintf(w4, sizeof w4, "%s/llama-w4a4", tmp);
    snprintf(kq, sizeof kq, "%s/llama-q4k.gguf", tmp);
    CHECK(rtd_add_input_scales(HF_DIR "/llama/nvfp4", w4) == 0);
    fp4_quantize_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.layout = FP4_LAYOUT_GGUF, ko.to_q4_k = 1;
    fp4_error e;
    CHECK_OK(fp4_quantize_checkpoint(HF_DIR "/llama", kq, &ko, &e));
    const char *nv = HF_DIR "/llama/nvfp4", *bf = HF_DIR "/llama", *foreign = HF_DIR "/qwen2/nvfp4";

    /* (a) */
    const int quick = getenv("FP4_GPU_QUICK") && getenv("FP4_GPU_QUICK")[0] == '1';
    for (int sampled = 0; sampled < (quick ? 1 : 2); sampled++) {
        spec_case(nv, nv, FP4_MODE_EXACT, 3, sampled, "llama nvfp4 a16 exact, self-draft");
        spec_case(nv, foreign, FP4_MODE_EXACT, 8, sampled, "llama nvfp4 a16 exact, qwen2 draft");
        spec_case(bf, nv, FP4_MODE_EXACT, 4, sampled, "llama bf16 exact, nvfp4 draft");
        spec_case(w4, nv, FP4_MODE_EXACT, 4, sampled, "llama w4a4 exact, a16 draft");
        spec_case(kq, kq, FP4_MODE_NATIVE, 4, sampled, "llama q4_k native, self-draft");
        spec_case(kq, HF_DIR "/qwen2", FP4_MODE_NATIVE, 4, sampled, "llama q4_k native, qwen2 draft");
    }
    /* refused on cuda: native NVFP4 and kquant exact with drafting */
    {
        fp4_model *m = NULL;
        fp4_status st;
        fp4_rt *rt = engine(nv, &m, FP4_DEVICE_CUDA, FP4_MODE_NATIVE, 1, &st);
        CHECK(st == FP4_ERR_REFUSED_ROUTE && rt == NULL);
        fp4_model_close(m);
        rt = engine(kq, &m, FP4_DEVICE_CUDA, FP4_MODE_EXACT, 1, &st);
        CHECK(st == FP4_ERR_REFUSED_ROUTE && rt == NULL);
        fp4_model_close(m);
    }
    /* (b) --seed reproducibility: temperature 0.8, top-k 40, top-p 0.9, seed 7 */
    const char *const seeded[] = {nv, bf, w4};
    for (int i = 0; i < (quick ? 1 : 3); i++) {
        gen cpu, gpu, n1, n2;
        generate(seeded[i], NULL, FP4_DEVICE_CPU, FP4_MODE_EXACT, 0, 1, &cpu);
        generate(seeded[i], NULL, FP4_DEVICE_CUDA, FP4_MODE_EXACT, 0, 1, &gpu);
        char w[200];
        snprintf(w, sizeof w, "%s seeded: cuda exact vs cpu exact", seeded[i]);
        same(&cpu, &gpu, 1, w);
        generate(seeded[i], NULL, FP4_DEVICE_CUDA, FP4_MODE_NATIVE, 0, 1, &n1);
        generate(seeded[i], NULL, FP4_DEVICE_CUDA, FP4_MODE_NATIVE, 0, 1, &n2);
        snprintf(w, sizeof w, "%s seeded: cuda native twice", seeded[i]);
        same(&n1, &n2, 0, w);
        printf("%s seeded tokens (cuda exact):", seeded[i]);
        for (int j = 0; j < gpu.n_tok; j++)
            printf(" %d", gpu.tok[j]);
        printf("\n");
        free(cpu.rows), free(gpu.rows), free(n1.rows), free(n2.rows);
    }
    /* (c), (d) */
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    compose_case(tmp, nv, "llama nvfp4 a16 exact");
    if (!quick) compose_case(tmp, bf, "llama bf16 exact");
    nonfinite_case(tmp, bf, 1);
    nonfinite_case(tmp, nv, 0);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_report();
}
