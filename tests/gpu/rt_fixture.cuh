/* rt_fixture.cuh — what the CUDA family tests (test_gpu_gemma, test_gpu_deepseek) share: an engine on
 * either device, one sequence's teacher-forced logits in steps of `chunk` columns, the same sequence
 * inside a batch that others join and leave, and the two comparisons (bits; a tolerance of the largest
 * |logit|). The including test defines NPOS (positions per sequence) first and fills cuda_lib before
 * its first engine. */
#ifndef FP4_RT_FIXTURE_CUH
#define FP4_RT_FIXTURE_CUH

static char cuda_lib[600];

static fp4_rt *engine(const fp4_model *m, fp4_device dev, fp4_mode mode, int32_t max_seqs, int64_t n_ctx,
                      fp4_status *st_out) {
    fp4_rt_opts o;
    memset(&o, 0, sizeof o);
    o.mode = mode, o.device = dev, o.n_threads = 2, o.n_ctx = n_ctx, o.max_seqs = max_seqs,
    o.cuda_lib = cuda_lib;
    fp4_rt *rt = NULL;
    fp4_error e;
    const fp4_status st = fp4_rt_create(m, &o, &rt, &e);
    if (st_out)
        *st_out = st;
    else
        CHECK_MSG(st == FP4_OK, "rt_create %s: %s: %s (%s)", dev == FP4_DEVICE_CUDA ? "cuda" : "cpu",
                  fp4_status_str(st), e.msg, e.rule);
    return rt;
}

/* one sequence in steps of chunk columns, every position's logits; 0 on success */
static int run_seq(const fp4_model *m, fp4_device dev, fp4_mode mode, int chunk, int64_t n_ctx,
                   const int32_t *ids, float *out) {
    fp4_rt *rt = engine(m, dev, mode, 1, n_ctx, NULL);
    if (!rt) return -1;
    int32_t s;
    CHECK_OK(fp4_rt_seq_open(rt, &s));
    const int64_t V = fp4_rt_vocab(rt);
    fp4_rt_tok c[NPOS];
    fp4_error e;
    int rc = 0;
    for (int i = 0; i < NPOS && !rc; i += chunk) {
        const int k = NPOS - i < chunk ? NPOS - i : chunk;
        for (int j = 0; j < k; j++)
            c[j].seq = s, c[j].token = ids[i + j], c[j].want_logits = 1;
        const fp4_status st = fp4_rt_step(rt, c, k, out + (int64_t)i * V, &e);
        CHECK_MSG(st == FP4_OK, "step: %s: %s", fp4_status_str(st), e.msg);
        rc = st ? -1 : 0;
    }
    fp4_rt_free(rt);
    return rc;
}

/* the sequence (ids) inside a batch: B (no logits) leaves after 4 steps, C (logits) joins at step 2;
 * A's chunks 3, 1, 5, 1, 1, 2, ...; A's columns between B's and C's */
static int run_batch(const fp4_model *m, fp4_device dev, const int32_t *ids, float *out) {
    fp4_rt *rt = engine(m, dev, FP4_MODE_EXACT, 3, 256, NULL);
    if (!rt) return -1;
    const int64_t V = fp4_rt_vocab(rt);
    int32_t a, b, cq = -1;
    CHECK_OK(fp4_rt_seq_open(rt, &b));
    CHECK_OK(fp4_rt_seq_open(rt, &a));
    static const int pattern[] = {3, 1, 5, 1, 1, 2};
    float *lg = (float *)malloc(sizeof(float) * (size_t)(16 * V));
    fp4_rt_tok c[16];
    fp4_error e;
    int done = 0, rc = 0;
    for (int step = 0; done < NPOS && !rc; step++) {
        int k = 0, na = pattern[step % 6];
        if (na > NPOS - done) na = NPOS - done;
        if (step < 4)
            for (int j = 0; j < 2; j++)
                c[k].seq = b, c[k].token = (ids[(step * 2 + j) % NPOS] * 7 + 3) % (int32_t)V,
                c[k++].want_logits = 0;
        if (step == 4) fp4_rt_seq_close(rt, b);
        for (int j = 0; j < na; j++)
            c[k].seq = a, c[k].token = ids[done + j], c[k++].want_logits = 1;
        if (step == 2) CHECK_OK(fp4_rt_seq_open(rt, &cq));
        if (step >= 2)
            for (int j = 0; j < (step % 2) + 1; j++)
                c[k].seq = cq, c[k].token = (ids[(step + j) % NPOS] + 11) % (int32_t)V,
                c[k++].want_logits = 1;
        const fp4_status st = fp4_rt_step(rt, c, k, lg, &e);
        CHECK_MSG(st == FP4_OK, "batch step %d: %s: %s", step, fp4_status_str(st), e.msg);
        if (st) rc = -1;
        memcpy(out + (int64_t)done * V, lg, sizeof(float) * (size_t)(na * V));
        done += na;
    }
    free(lg);
    fp4_rt_free(rt);
    return rc;
}

static int64_t bits_differ(const char *what, const float *want, const float *got, int64_t n) {
    int64_t d = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, want + i, 4), memcpy(&b, got + i, 4);
        if (a != b) d++, first = first < 0 ? i : first;
    }
    CHECK_MSG(d == 0, "%s: %lld of %lld logits differ in bits (first at %lld: %.9g vs %.9g)", what,
              (long long)d, (long long)n, (long long)first, first >= 0 ? want[first] : 0.0,
              first >= 0 ? got[first] : 0.0);
    printf("%-52s %lld logits, %lld differ in bits\n", what, (long long)n, (long long)d);
    return d;
}

/* within tol of the largest |logit| of ref; tol < 0: printed only (a diagnostic) */
static void within(const char *what, const float *got, const float *ref, int64_t n, double tol) {
    double maxd = 0, maxref = 0;
    for (int64_t i = 0; i < n; i++)
        maxd = fmax(maxd, fabs((double)got[i] - ref[i])), maxref = fmax(maxref, fabs((double)ref[i]));
    char t[32] = "none: printed only";
    if (tol >= 0) snprintf(t, sizeof t, "%.0e", tol);
    printf("%-52s max |dlogit| %.3g = %.2e of max |logit| %.3g (tolerance %s)\n", what, maxd, maxd / maxref,
           maxref, t);
    if (tol >= 0) CHECK_MSG(maxd <= tol * maxref, "%s: %.3g > %.3g x %.3g", what, maxd, tol, maxref);
}
/* `steps` greedy steps of two sequences on the GPU pick the argmax of the CPU's logits for the same
 * steps */
static void greedy(const fp4_model *m, const char *what, const int32_t *ids, int steps) {
    fp4_rt *cpu = engine(m, FP4_DEVICE_CPU, FP4_MODE_EXACT, 2, 256, NULL);
    fp4_rt *gpu = engine(m, FP4_DEVICE_CUDA, FP4_MODE_EXACT, 2, 256, NULL);
    if (!cpu || !gpu) return fp4_rt_free(cpu), fp4_rt_free(gpu);
    const int64_t V = fp4_rt_vocab(cpu);
    float *lg = (float *)malloc(sizeof(float) * (size_t)(2 * V));
    int32_t sc[2], sg[2];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(fp4_rt_seq_open(cpu, &sc[k]));
        CHECK_OK(fp4_rt_seq_open(gpu, &sg[k]));
    }
    int32_t next[2] = {ids[0], ids[5]};
    int bad = 0;
    fp4_error e;
    for (int step = 0; step < steps; step++) {
        fp4_rt_tok c[2] = {{sc[0], next[0], 1}, {sc[1], next[1], 1}};
        fp4_rt_tok g[2] = {{sg[0], next[0], 1}, {sg[1], next[1], 1}};
        CHECK_OK(fp4_rt_step(cpu, c, 2, lg, &e));
        int32_t got[2] = {-1, -1}, want[2] = {0, 0};
        CHECK_OK(fp4_rt_step_greedy(gpu, g, 2, got, &e));
        for (int k = 0; k < 2; k++) {
            for (int64_t i = 1; i < V; i++)
                if (lg[k * V + i] > lg[k * V + want[k]]) want[k] = (int32_t)i;
            bad += got[k] != want[k];
            next[k] = want[k];
        }
    }
    CHECK_MSG(bad == 0, "%s: greedy on cuda differs from the cpu's argmax in %d of %d tokens", what, bad,
              2 * steps);
    printf("%-52s %d greedy tokens, %d differ\n", what, 2 * steps, bad);
    free(lg);
    fp4_rt_free(cpu), fp4_rt_free(gpu);
}
#endif
