/* test_ggml_defer.c — FP4_LOAD_DEFER_REPACK: llama.cpp type-40 tensors left as the file's blocks
 * (an FP4_PACK_GGML64 view) for the CUDA upload, which repacks them on the device.
 *   - the deferred open gives the default open's verdict, rule, tensor and message on random
 *     type-40 files (shapes, sidecars, NaN / negative / sign-bit scale bytes anywhere, bad scalars),
 *     and on a valid file the same tensors: the tag set, the view pointing at the file's blocks,
 *     each row's canonical bytes (fp4_nvfp4_view_row) and its dequantization (the same bits);
 *   - fp4_nvfp4_view_check reads a GGML64 view's scale bytes in place, locating a bad one where
 *     the canonical view does;
 *   - every CPU consumer refuses a deferred tensor (FP4_ERR_UNSUPPORTED): the projections and
 *     their route name, the matvec entry points, the CPU engine (rule rt.deferred, naming the
 *     tensor), the layout writers (write.deferred, nothing written); other layouts are unaffected;
 *   - a whole model (the llama NVFP4 reference checkpoint written as a llama.cpp GGUF): every
 *     tensor the same either way, the eager one still runs on the CPU.
 * The device side (upload bytes, logits) is tests/gpu/test_gpu_ggml_repack.cu and test_gpu_runtime. */
#include "check.h"
#include "fp4_impl.h"
#include "fp4lane_runtime.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[512];
static int n_cases;
static const fp4_load_opts deferred = {.flags = FP4_LOAD_DEFER_REPACK};

typedef struct tdesc {
    const char *name;
    int type, n_dims;
    int64_t ne[4];
    const void *data;
    size_t size;
} tdesc;

static int write_gguf(const char *path, const tdesc *t, int nt) {
    fp4_gguf_writer *w = NULL;
    fp4_error e;
    int ok = !fp4_gguf_writer_create(&w, &e) && !fp4_gguf_writer_add_str(w, "general.name", "defer", 5, &e);
    for (int i = 0; ok && i < nt; i++)
        ok = !fp4_gguf_writer_add_tensor(w, t[i].name, (fp4_type)t[i].type, t[i].n_dims, t[i].ne, &e);
    ok = ok && !fp4_gguf_writer_write_header(w, path, &e);
    for (int i = 0; ok && i < nt; i++)
        ok = !fp4_gguf_writer_write_tensor_data(w, i, t[i].data, t[i].size, &e);
    ok = ok && !fp4_gguf_writer_finish(w, &e);
    fp4_gguf_writer_free(w);
    CHECK_MSG(ok, "writing %s: %s", path, e.msg);
    return ok ? 0 : -1;
}

/* every tensor of a and b (the same file, opened eagerly and deferred) holds the same weights */
static void same_tensors(const fp4_model *a, const fp4_model *b, const char *what) {
    CHECK_EQ_INT(fp4_model_n_tensors(a), fp4_model_n_tensors(b));
    CHECK(fp4_model_layout(a) == fp4_model_layout(b) &&
          fp4_model_weight_precision(a) == fp4_model_weight_precision(b) &&
          fp4_model_act_precision(a) == fp4_model_act_precision(b));
    for (int64_t i = 0; i < fp4_model_n_tensors(a) && i < fp4_model_n_tensors(b); i++) {
        const fp4_tensor *x = fp4_model_tensor(a, i), *y = fp4_model_tensor(b, i);
        CHECK(!strcmp(x->name, y->name) && x->type == y->type && x->n_dims == y->n_dims &&
              !memcmp(x->ne, y->ne, sizeof x->ne));
        if (x->type != FP4_TYPE_NVFP4_E2M1) {
            CHECK_MSG(
                x->nbytes == y->nbytes &&
                    (x->data == y->data || (x->data && y->data && !memcmp(x->data, y->data, x->nbytes))),
                "%s: plain tensor %s differs", what, x->name);
            continue;
        }
        const fp4_nvfp4_view *u = &x->nvfp4, *v = &y->nvfp4;
        const int ggml = fp4_model_layout(a) == FP4_LAYOUT_GGUF_GGML;
        CHECK_MSG(u->packing == FP4_PACK_CANONICAL &&
                      v->packing == (ggml ? FP4_PACK_GGML64 : FP4_PACK_CANONICAL),
                  "%s: %s tagged %d / %d", what, x->name, (int)u->packing, (int)v->packing);
        CHECK(!ggml || v->scales == NULL);
        CHECK(f32_bits(u->scale2) == f32_bits(v->scale2) &&
              f32_bits(u->input_scale_inv) == f32_bits(v->input_scale_inv) && u->n_out == v->n_out &&
              u->n_in == v->n_in);
        CHECK_OK(fp4_nvfp4_view_check(v, NULL, NULL));
        const size_t pb = (size_t)(u->n_in / 2), sb = (size_t)(u->n_in / 16);
        uint8_t *row = malloc(2 * (pb + sb));
        float *fa = malloc(sizeof(float) * (size_t)u->n_in), *fb = malloc(sizeof(float) * (size_t)u->n_in);
        int64_t bad_rows = 0, bad_deq = 0;
        for (int64_t r = 0; r < u->n_out; r++) {
            fp4_nvfp4_view_row(u, r, row, row + pb);
            fp4_nvfp4_view_row(v, r, row + pb + sb, row + 2 * pb + sb);
            bad_rows += !!memcmp(row, row + pb + sb, pb + sb);
            CHECK_OK(fp4_tensor_dequant_rows(x, r, r + 1, fa));
            CHECK_OK(fp4_tensor_dequant_rows(y, r, r + 1, fb));
            bad_deq += !!memcmp(fa, fb, sizeof(float) * (size_t)u->n_in);
        }
        CHECK_MSG(bad_rows == 0 && bad_deq == 0, "%s: %s: %lld rows' bytes, %lld rows' values differ", what,
                  x->name, (long long)bad_rows, (long long)bad_deq);
        free(row), free(fa), free(fb);
    }
}

/* one file, both opens: the same verdict and error; on success the same tensors */
static fp4_status both_ways(const char *path, const char *what) {
    fp4_model *a = NULL, *b = NULL;
    fp4_error ea, eb;
    const fp4_status sa = fp4_model_open(path, NULL, &a, &ea), sb = fp4_model_open(path, &deferred, &b, &eb);
    n_cases++;
    CHECK_MSG(sa == sb && !a == !b, "%s: default %s, deferred %s", what, fp4_status_str(sa),
              fp4_status_str(sb));
    if (sa && sa == sb)
        CHECK_MSG(!strcmp(ea.rule, eb.rule) && !strcmp(ea.tensor, eb.tensor) && !strcmp(ea.msg, eb.msg) &&
                      !strcmp(ea.file, eb.file),
                  "%s: default [%s] %s: %s; deferred [%s] %s: %s", what, ea.rule, ea.tensor, ea.msg, eb.rule,
                  eb.tensor, eb.msg);
    if (a && b) same_tensors(a, b, what);
    fp4_model_close(a);
    fp4_model_close(b);
    return sa;
}

/* random canonical rows of n_out x n_in packed into type-40 blocks; scale bytes 0x30..0x4F */
static void make_blocks(test_rng *r, int64_t n_out, int64_t n_in, uint8_t *blocks) {
    uint8_t *p = malloc((size_t)(n_in / 2)), *s = malloc((size_t)(n_in / 16));
    for (int64_t row = 0; row < n_out; row++) {
        for (int64_t i = 0; i < n_in / 2; i++)
            p[i] = (uint8_t)rng_u64(r);
        for (int64_t i = 0; i < n_in / 16; i++)
            s[i] = (uint8_t)(0x30 + rng_u64(r) % 32);
        fp4_ggml_pack_row(p, s, n_in, blocks + row * (n_in / 64) * 36);
    }
    free(p), free(s);
}

/* random type-40 files: shapes, sidecars, bad bytes and scalars; every verdict the same both ways */
static void random_files(void) {
    test_rng r = {20270110};
    static const uint8_t bad_bytes[] = {0x7F, 0xFF, 0x80, 0xB8, 0xFE};
    static const float scalars[] = {0.5f, 1.0f, 3.0e-3f, NAN, 0.0f, -1.0f, INFINITY, 1e-40f};
    int refused = 0, loaded = 0;
    for (int it = 0; it < 160; it++) {
        const int64_t n_in = 64 * (int64_t)(1 + rng_u64(&r) % 5), n_out = (int64_t)(1 + rng_u64(&r) % 7);
        const size_t nb = (size_t)(n_out * (n_in / 64) * 36);
        uint8_t *blk = malloc(nb);
        make_blocks(&r, n_out, n_in, blk);
        const int pick = (int)(rng_u64(&r) % 4), n_bad = pick < 2 ? 0 : pick - 1; /* 0 (half), 1 or 2 */
        for (int k = 0; k < n_bad; k++) {
            const int64_t row = (int64_t)(rng_u64(&r) % (uint64_t)n_out),
                          g = (int64_t)(rng_u64(&r) % (uint64_t)(n_in / 16));
            blk[(row * (n_in / 64) + g / 4) * 36 + g % 4] = bad_bytes[rng_u64(&r) % sizeof bad_bytes];
        }
        float s2 = scalars[rng_u64(&r) % 8], in = scalars[rng_u64(&r) % 3];
        tdesc t[3] = {{"blk.0.ffn_down.weight", FP4_TYPE_GGML_NVFP4, 2, {n_in, n_out, 1, 1}, blk, nb}};
        int nt = 1;
        if (rng_u64(&r) % 4) t[nt++] = (tdesc){"blk.0.ffn_down.scale", FP4_TYPE_F32, 1, {1, 1, 1, 1}, &s2, 4};
        if (rng_u64(&r) % 3 == 0)
            t[nt++] = (tdesc){"blk.0.ffn_down.input_scale", FP4_TYPE_F32, 1, {1, 1, 1, 1}, &in, 4};
        char path[700], what[96];
        snprintf(path, sizeof path, "%s/r%03d.gguf", tmp, it);
        snprintf(what, sizeof what, "random type-40 file %d (%lldx%lld, %d bad)", it, (long long)n_out,
                 (long long)n_in, n_bad);
        if (write_gguf(path, t, nt) == 0) {
            if (both_ways(path, what))
                refused++;
            else
                loaded++;
            unlink(path);
        }
        free(blk);
    }
    printf("random type-40 files: %d loaded, %d refused, the same both ways\n", loaded, refused);
    CHECK(loaded > 20 && refused > 20); /* both verdicts exercised */
}

/* the deferred open's word test (validate.c) against the eager open's byte test: every byte value at
 * each of a block's 4 scale positions (0x7F and up refused), then a tensor of 40 MB of blocks (the
 * check on several threads) with refused bytes planted in a late row and in an earlier one: the
 * message names the earliest, as the serial walk does */
static void scale_word_test(void) {
    test_rng r = {91};
    const int64_t n_in = 256, n_out = 3, nbk = n_in / 64;
    const size_t nb = (size_t)(n_out * nbk * 36);
    uint8_t *blk = malloc(nb);
    int refused = 0;
    for (int pos = 0; pos < 4; pos++)
        for (int v = 0; v < 256; v++) {
            make_blocks(&r, n_out, n_in, blk);
            blk[(1 * nbk + 2) * 36 + pos] = (uint8_t)v; /* row 1, block 2: group 8 + pos */
            tdesc t[1] = {{"blk.0.ffn_down.weight", FP4_TYPE_GGML_NVFP4, 2, {n_in, n_out, 1, 1}, blk, nb}};
            char path[700], what[96];
            snprintf(path, sizeof path, "%s/w%d_%d.gguf", tmp, pos, v);
            snprintf(what, sizeof what, "scale byte 0x%02X at position %d", v, pos);
            if (write_gguf(path, t, 1) != 0) continue;
            const fp4_status st = both_ways(path, what);
            CHECK_MSG((st != FP4_OK) == (v >= 0x7F), "%s: %s", what, fp4_status_str(st));
            refused += st != FP4_OK;
            unlink(path);
        }
    CHECK_EQ_INT(refused, 4 * (256 - 0x7F));
    free(blk);
    /* 40 MB: 7 000 rows of 10 240 values (160 blocks, 5 760 bytes a row) */
    const int64_t big_in = 10240, big_out = 7000, bnk = big_in / 64;
    const size_t bb = (size_t)(big_out * bnk * 36);
    uint8_t *big = malloc(bb);
    make_blocks(&r, big_out, big_in, big);
    big[(6900 * bnk + 3) * 36 + 1] = 0xFF; /* late row (the last thread's share) */
    big[(2500 * bnk + 150) * 36 + 2] = 0x7F; /* earlier, in another share: this one is named */
    tdesc t[1] = {{"blk.0.ffn_down.weight", FP4_TYPE_GGML_NVFP4, 2, {big_in, big_out, 1, 1}, big, bb}};
    char path[700];
    snprintf(path, sizeof path, "%s/big.gguf", tmp);
    if (write_gguf(path, t, 1) == 0) {
        fp4_model *m = NULL;
        fp4_error e;
        const fp4_status st = fp4_model_open(path, &deferred, &m, &e);
        CHECK_MSG(st == FP4_ERR_NAN_SCALE && strstr(e.msg, "row 2500, group 602"), "big tensor: %s [%s] %s",
                  fp4_status_str(st), e.rule, e.msg);
        fp4_model_close(m);
        CHECK(both_ways(path, "40 MB of blocks, two refused bytes") == FP4_ERR_NAN_SCALE);
        unlink(path);
    }
    free(big);
}

/* fp4_nvfp4_view_check on a GGML64 view: in place, the canonical view's verdict and location */
static void view_check_in_place(void) {
    test_rng r = {7};
    enum { NO = 5, NI = 192 };
    uint8_t blk[NO * NI / 64 * 36], pay[NO * NI / 2], sc[NO * NI / 16];
    make_blocks(&r, NO, NI, blk);
    fp4_nvfp4_view g = {.payload = blk, .scale2 = 1.0f, .n_out = NO, .n_in = NI, .packing = FP4_PACK_GGML64};
    fp4_nvfp4_view c = {pay, sc, 1.0f, 0.0f, NO, NI, FP4_PACK_CANONICAL};
    for (int64_t row = 0; row < NO; row++)
        fp4_ggml_unpack_row(blk + row * (NI / 64) * 36, NI, pay + row * (NI / 2), sc + row * (NI / 16));
    CHECK_OK(fp4_nvfp4_view_check(&g, NULL, NULL));
    CHECK_OK(fp4_nvfp4_view_check(&c, NULL, NULL));
    for (int64_t row = 0; row < NO; row++)
        for (int64_t grp = 0; grp < NI / 16; grp += 5) {
            uint8_t *at = &blk[(row * (NI / 64) + grp / 4) * 36 + grp % 4], keep = *at;
            *at = 0xFF;
            sc[row * (NI / 16) + grp] = 0xFF;
            int64_t gr = -1, gc = -1, cr = -2, cc = -2;
            CHECK(fp4_nvfp4_view_check(&g, &gr, &gc) == FP4_ERR_NAN_SCALE);
            CHECK(fp4_nvfp4_view_check(&c, &cr, &cc) == FP4_ERR_NAN_SCALE);
            CHECK_MSG(gr == row && gc == grp && cr == row && cc == grp,
                      "bad byte at (%lld, %lld) found at (%lld, %lld) / (%lld, %lld)", (long long)row,
                      (long long)grp, (long long)gr, (long long)gc, (long long)cr, (long long)cc);
            *at = keep;
            sc[row * (NI / 16) + grp] = keep;
        }
    /* shape and argument refusals */
    fp4_nvfp4_view bad = g;
    bad.n_in = 48;
    CHECK(fp4_nvfp4_view_check(&bad, NULL, NULL) == FP4_ERR_SHAPE); /* a block is 64 values */
    bad = g;
    bad.payload = NULL;
    CHECK(fp4_nvfp4_view_check(&bad, NULL, NULL) == FP4_ERR_INVALID_ARG);
    bad = g;
    bad.packing = (fp4_nvfp4_packing)7;
    CHECK(fp4_nvfp4_view_check(&bad, NULL, NULL) == FP4_ERR_INVALID_ARG);
    bad = c;
    bad.scales = NULL;
    CHECK(fp4_nvfp4_view_check(&bad, NULL, NULL) == FP4_ERR_INVALID_ARG);
    /* the matvec entry points read canonical rows only */
    float x[NI * 2] = {0}, y[NO * 2];
    g.n_in = c.n_in = 256; /* a shape exact A16 takes: the packing alone refuses */
    CHECK(fp4_nvfp4_matvec_a16_exact(&g, x, 1, y, 1) == FP4_ERR_UNSUPPORTED);
    CHECK(fp4_nvfp4_matvec_a16_float(&g, x, 1, y, 1) == FP4_ERR_UNSUPPORTED);
    g.input_scale_inv = 1.0f;
    CHECK(fp4_nvfp4_matvec_w4a4(&g, x, 1, y, 1) == FP4_ERR_UNSUPPORTED);
}

/* a small NVFP4 model as a llama.cpp GGUF: both opens agree; deferred tensors are refused by the
 * CPU consumers; other layouts ignore the flag */
static void model_cases(void) {
    const char *src = "tests/data/hf/llama/nvfp4";
    char gg[700], out[700];
    snprintf(gg, sizeof gg, "%s/llama-ggml.gguf", tmp);
    fp4_model *m = NULL, *d = NULL;
    fp4_error e;
    CHECK_OK(fp4_model_open(src, NULL, &m, &e));
    if (!m) return;
    fp4_write_opts wo = {.layout = FP4_LAYOUT_GGUF_GGML};
    CHECK_OK(fp4_model_write(m, gg, &wo, &e));
    CHECK(both_ways(gg, "llama nvfp4 as gguf-ggml") == FP4_OK);
    CHECK(both_ways(src, "llama nvfp4 (ModelOpt: the flag changes nothing)") == FP4_OK);
    fp4_model_close(m);
    CHECK_OK(fp4_model_open(gg, &deferred, &d, &e));
    if (!d) return;
    const fp4_tensor *w = fp4_model_find(d, "blk.0.ffn_down.weight");
    CHECK(w && w->type == FP4_TYPE_NVFP4_E2M1 && w->nvfp4.packing == FP4_PACK_GGML64);
    if (w) {
        float *x = calloc((size_t)w->ne[0] * 2, sizeof(float)),
              *y = calloc((size_t)w->nvfp4.n_out * 2, sizeof(float));
        CHECK(fp4_cpu_project(w, FP4_MODE_EXACT, x, 1, y, 1) == FP4_ERR_UNSUPPORTED);
        CHECK(fp4_cpu_project(w, FP4_MODE_NATIVE, x, 1, y, 1) == FP4_ERR_UNSUPPORTED);
        CHECK(!strcmp(fp4_cpu_route_name(w, FP4_MODE_EXACT), "none"));
        CHECK(!strcmp(fp4_cpu_route_name(w, FP4_MODE_NATIVE), "none"));
        free(x), free(y);
    }
    /* the CPU engine: refused by name, before anything is allocated */
    fp4_rt_opts o = {.mode = FP4_MODE_EXACT, .device = FP4_DEVICE_CPU};
    fp4_rt *rt = (fp4_rt *)&n_cases;
    fp4_status st = fp4_rt_create(d, &o, &rt, &e);
    CHECK_MSG(st == FP4_ERR_UNSUPPORTED && rt == NULL && !strcmp(e.rule, "rt.deferred") && e.tensor[0] &&
                  strstr(e.msg, "FP4_LOAD_DEFER_REPACK"),
              "CPU engine on a deferred model: %s [%s] %s", fp4_status_str(st), e.rule, e.msg);
    o.mode = FP4_MODE_NATIVE;
    CHECK(fp4_rt_create(d, &o, &rt, &e) == FP4_ERR_UNSUPPORTED && rt == NULL);
    /* the writers: refused, nothing written */
    snprintf(out, sizeof out, "%s/rewritten.gguf", tmp);
    st = fp4_model_write(d, out, &wo, &e);
    struct stat sbuf;
    CHECK_MSG(st == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, "write.deferred") && stat(out, &sbuf) != 0,
              "write of a deferred model: %s [%s] %s", fp4_status_str(st), e.rule, e.msg);
    fp4_model_close(d);
    /* the eager open of the same file still runs on the CPU */
    CHECK_OK(fp4_model_open(gg, NULL, &m, &e));
    if (m) {
        o.mode = FP4_MODE_EXACT;
        rt = NULL;
        CHECK_OK(fp4_rt_create(m, &o, &rt, &e));
        fp4_rt_free(rt);
        fp4_model_close(m);
    }
    unlink(gg);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-defer-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    random_files();
    scale_word_test();
    view_check_in_place();
    model_cases();
    printf("%d files opened both ways\n", n_cases);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!check_failed && !getenv("FP4_KEEP_TMP") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
