/* test_gguf_arch_agree.c — a GGUF written by fp4lane carries its config.json (fp4lane.hf.config),
 * which the runtime runs, and llama.cpp's <arch>.* keys, which llama.cpp runs: a key that is not
 * valid (a count 0, an epsilon -1, a NaN rope base) or that disagrees with the config (head count
 * 8 for 4) is refused naming the key, by the library and by `fp4lane run` (issue 27, finding 9).
 * The untouched conversion runs. */
#include "check.h"
#include "cli_util.h"
#include "rt_fixture.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp[512];

/* a copy of the file with key's scalar value (u32 or f32, 4 bytes) replaced by val */
static int patch_key(const char *in, const char *out, const char *key, const void *val) {
    long len;
    char *b = cu_slurp(in, &len);
    unsigned char needle[160];
    const size_t kl = strlen(key);
    for (int i = 0; i < 8; i++)
        needle[i] = (unsigned char)((uint64_t)kl >> (8 * i));
    memcpy(needle + 8, key, kl);
    unsigned char *at = memmem(b, (size_t)len, needle, 8 + kl);
    int ok = at != NULL;
    if (ok) memcpy(at + 8 + kl + 4, val, 4); /* past the key: u32 type, then the value */
    FILE *f = fopen(out, "wb");
    ok = ok && f && fwrite(b, 1, (size_t)len, f) == (size_t)len;
    if (f) fclose(f);
    free(b);
    return ok ? 0 : -1;
}

/* the rule and message of fp4_rt_create on path, or "" when it loads */
static fp4_status try_engine(const char *path, fp4_error *e) {
    fp4_model *m = NULL;
    fp4_rt *rt = NULL;
    memset(e, 0, sizeof *e);
    fp4_status st = fp4_model_open(path, NULL, &m, e);
    fp4_rt_opts o = {0};
    if (!st) st = fp4_rt_create(m, &o, &rt, e);
    fp4_rt_free(rt);
    fp4_model_close(m);
    return st;
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-archkeys-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char bin[512], bf[600], nv[600], gg[700], bad[700], args[2000];
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    rtfx_spec s = rtfx_default("llama");
    rtfx_write_pair(tmp, &s, 3, bf, nv, sizeof bf);
    snprintf(gg, sizeof gg, "%s/model.gguf", tmp);
    snprintf(bad, sizeof bad, "%s/bad.gguf", tmp);
    fp4_model *m = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(nv, NULL, &m, &e));
    fp4_write_opts wo = {.layout = FP4_LAYOUT_GGUF_GGML};
    CHECK_OK(fp4_model_write(m, gg, &wo, &e));
    fp4_model_close(m);
    CHECK_OK(try_engine(gg, &e)); /* the keys as written agree */

    const uint32_t u8 = 8, u0 = 0, u5000 = 5000;
    const float neg = -1.0f, nan = NAN, inf = INFINITY, eps2 = 2e-5f, base = 500000.0f;
    static const char *const rule_value = "arch.gguf_value", *const rule_agree = "arch.gguf_agree";
    const struct {
        const char *key;
        const void *val;
        const char *rule;
    } cases[] = {
        {"llama.attention.head_count", &u8, rule_agree},
        {"llama.attention.head_count_kv", &u8, rule_agree},
        {"llama.attention.layer_norm_rms_epsilon", &neg, rule_value},
        {"llama.attention.layer_norm_rms_epsilon", &eps2, rule_agree},
        {"llama.rope.freq_base", &nan, rule_value},
        {"llama.rope.freq_base", &inf, rule_value},
        {"llama.rope.freq_base", &base, rule_agree},
        {"llama.context_length", &u0, rule_value},
        {"llama.context_length", &u5000, rule_agree},
        {"llama.block_count", &u8, rule_agree},
        {"llama.embedding_length", &u0, rule_value},
        {"llama.feed_forward_length", &u8, rule_agree},
        {"llama.vocab_size", &u5000, rule_agree},
        {"llama.rope.dimension_count", &u8, rule_agree},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_MSG(patch_key(gg, bad, cases[i].key, cases[i].val) == 0, "%s not found", cases[i].key);
        fp4_status st = try_engine(bad, &e);
        CHECK_MSG(st != FP4_OK && !strcmp(e.rule, cases[i].rule) && cu_has(e.msg, cases[i].key),
                  "%s: status %d rule '%s' msg '%s'", cases[i].key, (int)st, e.rule, e.msg);
    }
    /* the CLI: exit 1, the rule and the key (head count 8, as the audit found it) */
    patch_key(gg, bad, "llama.attention.head_count", &u8);
    char *o = NULL, *er = NULL;
    snprintf(args, sizeof args, "run %s --prompt-ids 1,2 -n 1", bad);
    CHECK_MSG(cu_run(bin, tmp, NULL, args, &o, &er) == 1 && cu_has(er, "arch.gguf_agree") &&
                  cu_has(er, "llama.attention.head_count") && cu_has(er, "num_attention_heads"),
              "%s", er);
    snprintf(args, sizeof args, "run %s --prompt-ids 1,2 -n 1", gg);
    CHECK_MSG(cu_run(bin, tmp, NULL, args, &o, &er) == 0, "%s", er);
    free(o), free(er);
    if (!check_failed) rtfx_rmtree(tmp);
    return check_report();
}
