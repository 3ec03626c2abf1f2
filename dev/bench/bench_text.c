/* bench_text.c — tokenizer speed on one core: load time (tokenizer.json, and the same tokenizer
 * written to and read from a GGUF), encode and decode throughput on a corpus cut into the
 * oracle's chunks (after the first '\n' at or past 2048 bytes). Best of REPS, in thread CPU time.
 *   build/dev/bench/bench_text MODEL_DIR CORPUS REPS   (bench/text.sh runs it beside the JS reference) */
#include "fp4lane_text.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static fp4_error gerr; /* the GGUF writer's error (these callers check the status only) */

/* CPU time of this (single) thread: the machine the figures come from is shared, and wall time
 * there counts other people's work */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_text MODEL_DIR CORPUS REPS\n");
        return 2;
    }
    int reps = atoi(argv[3]);
    FILE *f = fopen(argv[2], "rb");
    if (!f) return perror(argv[2]), 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *c = malloc((size_t)n);
    if (fread(c, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    fp4_tokenizer *t = NULL, *tg = NULL;
    fp4_error e;
    double best_load = 1e9, best_gguf = 1e9, best_enc = 1e9, best_dec = 1e9, best_wall = 1e9;
    int reps_gguf = reps;
    for (int r = 0; r < reps; r++) {
        fp4_tokenizer_free(t);
        double t0 = now();
        if (fp4_tokenizer_load(argv[1], &t, &e)) return fprintf(stderr, "%s: %s\n", e.rule, e.msg), 1;
        double t1 = now();
        if (t1 - t0 < best_load) best_load = t1 - t0;
    }
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/bench_text_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    fp4_gguf_writer *w = NULL;
    fp4_gguf_writer_create(&w, &gerr);
    /* a tokenizer without a GGUF form (a Unigram model; a pipeline GGUF has no key for, such as
     * DeepSeek-V3's several Splits) has no GGUF load time: -1; any other failure is one */
    int no_gguf = fp4_tokenizer_kind(t) == FP4_TOK_UNIGRAM;
    if (!no_gguf) {
        fp4_status st = fp4_tokenizer_write_gguf(t, w, &e);
        if (st == FP4_ERR_UNSUPPORTED) no_gguf = 1;
        else if (st || fp4_gguf_writer_write_header(w, gpath, &gerr) || fp4_gguf_writer_finish(w, &gerr))
            return fprintf(stderr, "gguf write: %s\n", st ? e.msg : gerr.msg), 1;
    }
    fp4_gguf_writer_free(w);
    if (no_gguf) best_gguf = -1e-3, reps_gguf = 0;
    for (int r = 0; r < reps_gguf; r++) {
        fp4_tokenizer_free(tg);
        double t0 = now();
        if (fp4_tokenizer_load(gpath, &tg, &e)) return fprintf(stderr, "%s: %s\n", e.rule, e.msg), 1;
        double t1 = now();
        if (t1 - t0 < best_gguf) best_gguf = t1 - t0;
    }
    unlink(gpath);
    size_t total_ids = 0;
    for (int r = 0; r < reps; r++) {
        /* a fresh tokenizer per repetition (as the JS side does), so its word cache starts empty */
        fp4_tokenizer_free(t);
        if (fp4_tokenizer_load(argv[1], &t, &e)) return fprintf(stderr, "%s: %s\n", e.rule, e.msg), 1;
        double enc = 0, dec = 0, w0 = wall(), wenc = 0;
        total_ids = 0;
        (void)w0;
        for (long pos = 0; pos < n;) {
            long end = pos + 2048 < n ? pos + 2048 : n;
            while (end < n && c[end - 1] != '\n') end++;
            int32_t *ids;
            size_t ni;
            char *txt;
            size_t tl;
            double t0 = now(), u0 = wall();
            fp4_tokenizer_encode(t, c + pos, (size_t)(end - pos), FP4_TOK_PARSE_SPECIAL, &ids, &ni);
            double t1 = now();
            wenc += wall() - u0;
            fp4_tokenizer_decode(t, ids, ni, 0, &txt, &tl, &e);
            double t2 = now();
            enc += t1 - t0;
            dec += t2 - t1;
            total_ids += ni;
            free(ids);
            free(txt);
            pos = end;
        }
        if (enc < best_enc) best_enc = enc;
        if (wenc < best_wall) best_wall = wenc;
        if (dec < best_dec) best_dec = dec;
    }
    printf("{\"vocab\": %d, \"load_json_ms\": %.1f, \"load_gguf_ms\": %.1f, \"bytes\": %ld, \"ids\": %zu, "
           "\"encode_mb_s\": %.2f, \"encode_mb_s_wall\": %.2f, \"decode_mb_s\": %.2f}\n",
           fp4_tokenizer_n_vocab(t), best_load * 1e3, best_gguf * 1e3, n, total_ids, n / best_enc / 1e6,
           n / best_wall / 1e6, n / best_dec / 1e6);
    fp4_tokenizer_free(t);
    fp4_tokenizer_free(tg);
    free(c);
    return 0;
}
