/* fuzz_kvload.c — libFuzzer target for the KV snapshot loader (`run --kv-load`, fp4_rt_kv_load):
 * the input, minus its first byte, is written to a file and loaded into an empty sequence of one
 * CPU engine over models/tiny (exact, n_ctx 16; FP4_FUZZ_MODEL names another model). The first
 * byte's low bit chooses the form: 0, the bytes as they are; 1, the bytes with this engine's
 * identity stamped at [8, 72) and a correct SHA-256 trailer, so that mutations reach the checks
 * behind the checksum and the identity (sizes, shape, context, the cache write). A load that
 * succeeds must set the sequence's position to the header's count, and the engine must then take
 * one more token (or refuse NaN logits: rt.nonfinite); a refusal must leave the sequence empty.
 * Build: make fuzz-build. */
#include "fp4lane.h"
#include "fp4lane_runtime.h"
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fp4_model *g_model;
static fp4_rt *g_rt;
static char g_path[512];
static int g_broken;

static int setup(void) {
    if (g_rt || g_broken) return g_rt ? 0 : -1;
    g_broken = 1;
    const char *mp = getenv("FP4_FUZZ_MODEL") ? getenv("FP4_FUZZ_MODEL") : "models/tiny";
    fp4_error e;
    if (fp4_model_open(mp, NULL, &g_model, &e))
        return fprintf(stderr, "fuzz_kvload: %s: %s\n", mp, e.msg), -1;
    fp4_rt_opts o = {0};
    o.mode = FP4_MODE_EXACT;
    o.n_ctx = 16;
    o.n_threads = 1;
    if (fp4_rt_create(g_model, &o, &g_rt, &e)) return fprintf(stderr, "fuzz_kvload: engine: %s\n", e.msg), -1;
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_path, sizeof g_path, "%s/fuzz-kvload-%ld.kv", t, (long)getpid());
    g_broken = 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (setup()) abort(); /* no model: nothing would be tested (make test runs from the root) */
    if (size < 1) return 0;
    const int fix = data[0] & 1;
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return 0;
    memcpy(b, data + 1, n);
    if (fix && n >= 96 + 32) {
        memcpy(b + 8, fp4_rt_identity(g_rt), 64);
        unsigned int len = 0;
        EVP_Digest(b, n - 32, b + n - 32, &len, EVP_sha256(), NULL);
    }
    FILE *f = fopen(g_path, "wb");
    if (!f) abort();
    if (n && fwrite(b, 1, n, f) != n) abort();
    if (fclose(f)) abort();
    int32_t seq;
    if (fp4_rt_seq_open(g_rt, &seq)) abort();
    fp4_error e;
    const fp4_status st = fp4_rt_kv_load(g_rt, seq, g_path, &e);
    if (st != FP4_OK) {
        if (fp4_rt_seq_pos(g_rt, seq) != 0 || !e.rule[0]) abort(); /* refused: nothing loaded, a rule */
    } else {
        uint64_t np = 0;
        for (int k = 0; k < 8; k++) np |= (uint64_t)b[80 + k] << (8 * k);
        if ((uint64_t)fp4_rt_seq_pos(g_rt, seq) != np) abort();
        if (np < (uint64_t)fp4_rt_n_ctx(g_rt)) { /* the loaded cache is used: one more position */
            fp4_rt_tok c = {seq, 1, 1};
            float *lg = malloc(sizeof(float) * (size_t)fp4_rt_vocab(g_rt));
            /* a cache of hostile halves may make NaN logits: refused (rt.nonfinite), the sequence
             * closed; any other failure is a finding */
            const fp4_status ss = lg ? fp4_rt_step(g_rt, &c, 1, lg, &e) : FP4_OK;
            if (ss != FP4_OK && !(ss == FP4_ERR_NONFINITE && !strcmp(e.rule, "rt.nonfinite"))) abort();
            if (lg && !ss && fp4_rt_seq_pos(g_rt, seq) != (int64_t)np + 1) abort();
            free(lg);
        }
    }
    fp4_rt_seq_close(g_rt, seq);
    unlink(g_path);
    free(b);
    return 0;
}
