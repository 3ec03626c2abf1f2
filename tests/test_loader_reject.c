/* test_loader_reject.c — the fail-closed loader (SPEC §8): each malformed checkpoint is refused
 * with the right rule, naming the tensor; each valid twin loads (a check that only refuses proves
 * nothing). Files are tiny and generated here: GGUF (fp4lane and llama.cpp layouts) and
 * safetensors (ModelOpt and compressed-tensors). Every case is opened a second time with
 * FP4_LOAD_DEFER_REPACK, which must give the same verdict and the same error. */
#include "check.h"
#include "fp4lane_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static fp4_error gerr; /* filled by the GGUF writer calls (their fp4_error *err) */

static char tmp[512];
static int n_cases;

enum { NO = 4, NI = 64 };
static uint8_t payload[NO * NI / 2], scales[NO * NI / 16], blocks[NO * NI / 64 * 36];

typedef struct tspec {
    const char *name;
    int type;                 /* fp4_type for GGUF, fp4_st_dtype for safetensors */
    int n_dims;
    int64_t ne[4];            /* GGUF order for GGUF; safetensors shape order for safetensors */
    const void *data;
    size_t size;
} tspec;

typedef struct kvspec { const char *key, *s; int kind; float f; } kvspec; /* kind: 0 str, 1 u32, 2 f32 */

static void fill_base(void) {
    test_rng r = {3};
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)rng_u64(&r);
    for (size_t i = 0; i < sizeof scales; i++) scales[i] = (uint8_t)(0x30 + rng_u64(&r) % 16);
    /* the same weights in ggml's 64-value blocks */
    for (int r0 = 0; r0 < NO; r0++)
        for (int g = 0; g < NI / 16; g++) {
            uint8_t *blk = blocks + r0 * (NI / 64) * 36 + (g / 4) * 36;
            blk[g % 4] = scales[r0 * (NI / 16) + g];
            for (int j = 0; j < 8; j++) {
                const uint8_t *p = payload + r0 * NI / 2 + g * 8;
                uint8_t lo = (uint8_t)((p[j / 2] >> (4 * (j & 1))) & 15),
                        hi = (uint8_t)((p[(j + 8) / 2] >> (4 * (j & 1))) & 15);
                blk[4 + (g % 4) * 8 + j] = (uint8_t)(lo | (hi << 4));
            }
        }
}

static void write_gguf(const char *path, const kvspec *kv, int nkv, const tspec *t, int nt) {
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    for (int i = 0; i < nkv; i++) {
        if (kv[i].kind == 0) CHECK_OK(fp4_gguf_writer_add_str(w, kv[i].key, kv[i].s, strlen(kv[i].s), &gerr));
        else if (kv[i].kind == 1) CHECK_OK(fp4_gguf_writer_add_u32(w, kv[i].key, 7, &gerr));
        else CHECK_OK(fp4_gguf_writer_add_f32(w, kv[i].key, kv[i].f, &gerr));
    }
    for (int i = 0; i < nt; i++)
        CHECK_OK(fp4_gguf_writer_add_tensor(w, t[i].name, (fp4_type)t[i].type, t[i].n_dims, t[i].ne, &gerr));
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    for (int i = 0; i < nt; i++)
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, t[i].data, t[i].size, &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
}

static void write_st(const char *dir, const tspec *t, int nt, const char *quant_config) {
    mkdir(dir, 0777);
    fp4_hfdir_writer *w = NULL;
    fp4_error e;
    CHECK_OK(fp4_hfdir_writer_create(dir, 0, &w, &e));
    for (int i = 0; i < nt; i++)
        CHECK_OK(
            fp4_hfdir_writer_add_tensor(w, t[i].name, (fp4_st_dtype)t[i].type, t[i].n_dims, t[i].ne, &e));
    for (int i = 0; i < nt; i++)
        CHECK_OK(fp4_hfdir_writer_write(w, t[i].data, t[i].size, &e));
    size_t ns;
    CHECK_OK(fp4_hfdir_writer_finish(w, &ns, &e));
    fp4_hfdir_writer_free(w);
    if (quant_config) {
        char f[700];
        snprintf(f, sizeof f, "%s/hf_quant_config.json", dir);
        CHECK_OK(fp4_hfdir_write_json(f, quant_config, 4, 0, &e));
    }
}

/* The same file opened with FP4_LOAD_DEFER_REPACK (llama.cpp type-40 tensors left as the file's
 * blocks, scale bytes checked in place): the same verdict, and on a refusal the same file, tensor,
 * rule and message. */
static void expect_deferred_same(const char *what, const char *path, fp4_status st, const fp4_error *e) {
    fp4_model *m = NULL;
    fp4_error ed;
    const fp4_load_opts lo = {.flags = FP4_LOAD_DEFER_REPACK};
    const fp4_status sd = fp4_model_open(path, &lo, &m, &ed);
    CHECK_MSG(sd == st && (st == FP4_OK) == (m != NULL), "%s: deferred open gives %s, the default %s", what,
              fp4_status_str(sd), fp4_status_str(st));
    if (st != FP4_OK && sd == st)
        CHECK_MSG(!strcmp(ed.rule, e->rule) && !strcmp(ed.tensor, e->tensor) && !strcmp(ed.file, e->file) &&
                      !strcmp(ed.msg, e->msg),
                  "%s: deferred open refuses with [%s] %s: %s, the default with [%s] %s: %s", what, ed.rule,
                  ed.tensor, ed.msg, e->rule, e->tensor, e->msg);
    fp4_model_close(m);
}

/* Open; expect the rule ("" = must load); the deferred open must agree. */
static void expect(const char *what, const char *path, const char *rule, const char *tensor) {
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    expect_deferred_same(what, path, st, &e);
    n_cases++;
    if (!rule[0]) {
        CHECK_MSG(st == FP4_OK, "%s: valid twin refused: %s [%s] %s", what, fp4_status_str(st), e.rule,
                  e.msg);
    } else {
        CHECK_MSG(st != FP4_OK && m == NULL, "%s: loaded, expected %s", what, rule);
        CHECK_MSG(!strcmp(e.rule, rule), "%s: rule '%s' (%s), expected '%s'", what, e.rule, e.msg, rule);
        CHECK_MSG(!tensor || !strcmp(e.tensor, tensor), "%s: tensor '%s', expected '%s'", what, e.tensor,
                  tensor);
        CHECK_MSG(e.file[0] != 0, "%s: the error names no file", what);
    }
    fp4_model_close(m);
}

static uint8_t bad_scales[sizeof scales];

#define W "blk.0.ffn_down.weight"
#define WS W ".nvfp4_scale"
#define WS2 W ".nvfp4_scale2"
#define WIN W ".nvfp4_input_scale_inv"

/* One fp4lane-layout GGUF case: start from the valid A16 file and change one thing. */
typedef struct gcase {
    const char *what, *rule, *tensor;
    int drop;                  /* index of the tensor to leave out, -1 none */
    int kv_variant;            /* 0 nvfp4/a16, 1 no keys, 2 f16, 3 "fp5", 4 u32, 5 a16->nvfp4, 6 q4_k */
    int s_type, s_dims, s_ne0, s_ne1;
    int s2_type, s2_ne0;
    float s2;
    int input;                 /* 1: add input scale (value in_v) */
    float in_v;
    int scale_byte;            /* -1 none; else the last scale byte */
    int64_t n_in;
} gcase;

static void run_gcase(const gcase *c) {
    char path[700];
    snprintf(path, sizeof path, "%s/g%03d.gguf", tmp, n_cases);
    memcpy(bad_scales, scales, sizeof scales);
    if (c->scale_byte >= 0) bad_scales[sizeof scales - 1] = (uint8_t)c->scale_byte;
    const int64_t n_in = c->n_in ? c->n_in : NI;
    float s2 = c->s2, inv = c->in_v;
    static float s2buf[2];
    s2buf[0] = s2buf[1] = s2;
    tspec t[4] = {
        {W, FP4_TYPE_NVFP4_E2M1, 2, {n_in, NO * NI / n_in}, payload, sizeof payload},
        {WS, c->s_type ? c->s_type : FP4_TYPE_F8_E4M3FN, c->s_dims ? c->s_dims : 2,
         {c->s_ne0 ? c->s_ne0 : n_in / 16, c->s_ne1 ? c->s_ne1 : NO * NI / n_in}, bad_scales, 0},
        {WS2, c->s2_type ? c->s2_type : FP4_TYPE_F32, 1, {c->s2_ne0 ? c->s2_ne0 : 1}, s2buf, 0},
        {WIN, FP4_TYPE_F32, 1, {1}, &inv, 4},
    };
    size_t sb = 1;
    for (int i = 0; i < t[1].n_dims; i++) sb *= (size_t)t[1].ne[i];
    t[1].size = sb * (size_t)fp4_type_get(t[1].type)->type_size;
    t[2].size = (size_t)t[2].ne[0] * (size_t)fp4_type_get(t[2].type)->type_size;
    static uint8_t big[4096];
    if (t[1].size > sizeof scales) { /* a wider dtype: same bytes, zero-extended */
        memset(big, 0, sizeof big);
        memcpy(big, bad_scales, sizeof scales);
        t[1].data = big;
    }
    tspec use[4];
    int nt = 0;
    for (int i = 0; i < 4; i++) {
        if (i == c->drop || (i == 3 && !c->input)) continue;
        use[nt++] = t[i];
    }
    static const kvspec kvs[][2] = {
        {{"fp4lane.weight_precision", "nvfp4", 0, 0}, {"fp4lane.activation_precision", "a16", 0, 0}},
        {{"general.name", "x", 0, 0}, {"general.type", "model", 0, 0}},
        {{"fp4lane.weight_precision", "f16", 0, 0}, {"fp4lane.activation_precision", "a16", 0, 0}},
        {{"fp4lane.weight_precision", "fp5", 0, 0}, {"fp4lane.activation_precision", "a16", 0, 0}},
        {{"fp4lane.weight_precision", NULL, 1, 0}, {"fp4lane.activation_precision", "a16", 0, 0}},
        {{"fp4lane.weight_precision", "nvfp4", 0, 0}, {"fp4lane.activation_precision", "nvfp4", 0, 0}},
        {{"fp4lane.weight_precision", "q4_k", 0, 0}, {"fp4lane.activation_precision", "a16", 0, 0}},
    };
    kvspec kv[2] = {kvs[c->kv_variant][0], kvs[c->kv_variant][1]};
    if (c->input && c->kv_variant == 0) kv[1].s = "nvfp4";
    write_gguf(path, kv, 2, use, nt);
    expect(c->what, path, c->rule, c->tensor);
}

static void gguf_cases(void) {
    const float nan_ = NAN, inf = INFINITY;
    const gcase cases[] = {
        {"valid a16", "", NULL, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"valid w4a4", "", NULL, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 1, 2.0f, -1, 0},
        {"valid n_in 16", "", NULL, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 16},
        {"missing scale", "nvfp4.companion-missing", W, 1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"missing scale2", "nvfp4.companion-missing", W, 2, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"scale dtype f16", "nvfp4.companion-dtype", WS, -1, 0, FP4_TYPE_F16, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1,
         0},
        {"scale dtype u8", "nvfp4.companion-dtype", WS, -1, 0, FP4_TYPE_U8, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"scale shape n_in/8", "nvfp4.companion-shape", WS, -1, 0, 0, 0, NI / 8, NO / 2, 0, 0, 0.5f, 0, 0, -1,
         0},
        {"scale shape transposed", "nvfp4.companion-shape", WS, -1, 0, 0, 0, 2, 8, 0, 0, 0.5f, 0, 0, -1, 128},
        {"scale rank 1", "nvfp4.companion-shape", WS, -1, 0, 0, 1, NO * NI / 16, 1, 0, 0, 0.5f, 0, 0, -1, 0},
        {"scale2 dtype f16", "nvfp4.companion-dtype", WS2, -1, 0, 0, 0, 0, 0, FP4_TYPE_F16, 0, 0.5f, 0, 0, -1,
         0},
        {"scale2 two values", "nvfp4.companion-shape", WS2, -1, 0, 0, 0, 0, 0, 0, 2, 0.5f, 0, 0, -1, 0},
        {"scale2 NaN", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, nan_, 0, 0, -1, 0},
        {"scale2 +Inf", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, inf, 0, 0, -1, 0},
        {"scale2 -Inf", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, -inf, 0, 0, -1, 0},
        {"scale2 zero", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, -1, 0},
        {"scale2 negative", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, -0.5f, 0, 0, -1, 0},
        {"scale2 subnormal", "nvfp4.scale2", WS2, -1, 0, 0, 0, 0, 0, 0, 0, 1e-40f, 0, 0, -1, 0},
        {"scale byte 0x7F", "nvfp4.scale-nan", W, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0x7F, 0},
        {"scale byte 0xFF", "nvfp4.scale-nan", W, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0xFF, 0},
        {"scale byte 0x80", "nvfp4.scale-negative", W, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0x80, 0},
        {"scale byte 0xB8", "nvfp4.scale-negative", W, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0xB8, 0},
        {"input scale NaN", "nvfp4.input-scale", WIN, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 1, nan_, -1, 0},
        {"input scale zero", "nvfp4.input-scale", WIN, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 1, 0.0f, -1, 0},
        {"input scale negative", "nvfp4.input-scale", WIN, -1, 0, 0, 0, 0, 0, 0, 0, 0.5f, 1, -2.0f, -1, 0},
        {"activation says nvfp4, no input scale", "lane.activation", NULL, -1, 5, 0, 0, 0, 0, 0, 0, 0.5f, 0,
         0, -1, 0},
        {"no lane keys", "lane.missing", W, -1, 1, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"lane says f16", "lane.pairing", NULL, -1, 2, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"lane says q4_k", "lane.pairing", NULL, -1, 6, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"lane value fp5", "lane.value", NULL, -1, 3, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"lane value u32", "lane.value", NULL, -1, 4, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, -1, 0},
        {"n_in 24", "nvfp4.n_in", W, -1, 0, 0, 0, 1, 0, 0, 0, 0.5f, 0, 0, -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gcase c = cases[i];
        if (!strcmp(c.what, "n_in 24")) { /* a payload of 24 values per row: 4 rows of 24 */
            char path[700];
            snprintf(path, sizeof path, "%s/g%03d.gguf", tmp, n_cases);
            float s2 = 0.5f;
            tspec t[3] = {{W, FP4_TYPE_NVFP4_E2M1, 2, {24, 4}, payload, 48},
                          {WS, FP4_TYPE_F8_E4M3FN, 2, {1, 4}, scales, 4},
                          {WS2, FP4_TYPE_F32, 1, {1}, &s2, 4}};
            kvspec kv[2] = {{"fp4lane.weight_precision", "nvfp4", 0, 0},
                            {"fp4lane.activation_precision", "a16", 0, 0}};
            write_gguf(path, kv, 2, t, 3);
            expect(c.what, path, c.rule, c.tensor);
            continue;
        }
        run_gcase(&c);
    }
}

/* GGUF cases that need more than one payload or foreign types */
static void gguf_cases2(void) {
    char path[700];
    float s2 = 0.5f, inv = 2.0f, bad = NAN, one = 1.0f;
    const kvspec lane[2] = {{"fp4lane.weight_precision", "nvfp4", 0, 0},
                            {"fp4lane.activation_precision", "a16", 0, 0}};
    const kvspec lane44[2] = {{"fp4lane.weight_precision", "nvfp4", 0, 0},
                              {"fp4lane.activation_precision", "nvfp4", 0, 0}};
    uint16_t f16[NO * NI] = {0};
#define T_PAY(n) {n, FP4_TYPE_NVFP4_E2M1, 2, {NI, NO}, payload, sizeof payload}
#define T_SC(n) {n ".nvfp4_scale", FP4_TYPE_F8_E4M3FN, 2, {NI / 16, NO}, scales, sizeof scales}
#define T_S2(n) {n ".nvfp4_scale2", FP4_TYPE_F32, 1, {1}, &s2, 4}
#define T_IN(n) {n ".nvfp4_input_scale_inv", FP4_TYPE_F32, 1, {1}, &inv, 4}
    { /* input scale on one of two tensors */
        tspec t[] = {T_PAY("a.weight"), T_SC("a.weight"), T_S2("a.weight"), T_IN("a.weight"),
                     T_PAY("b.weight"), T_SC("b.weight"), T_S2("b.weight")};
        snprintf(path, sizeof path, "%s/h1.gguf", tmp);
        write_gguf(path, lane44, 2, t, 7);
        expect("input scale on some tensors", path, "nvfp4.input-scale-partial", "b.weight");
        write_gguf(path, lane, 2, t, 7);
        expect("input scale on some tensors (a16 key)", path, "nvfp4.input-scale-partial", "b.weight");
    }
    { /* activation says a16 but input scales present */
        tspec t[] = {T_PAY("a.weight"), T_SC("a.weight"), T_S2("a.weight"), T_IN("a.weight")};
        snprintf(path, sizeof path, "%s/h2.gguf", tmp);
        write_gguf(path, lane, 2, t, 4);
        expect("activation says a16, input scale present", path, "lane.activation", "a.weight");
    }
    { /* orphan companion; companion of an F16 weight; standalone F8; lane nvfp4 without NVFP4 */
        tspec t1[] = {T_PAY("a.weight"), T_SC("a.weight"), T_S2("a.weight"), T_S2("b.weight")};
        snprintf(path, sizeof path, "%s/h3.gguf", tmp);
        write_gguf(path, lane, 2, t1, 4);
        expect("orphan scale2", path, "nvfp4.orphan-companion", "b.weight.nvfp4_scale2");
        tspec t2[] = {{"c.weight", FP4_TYPE_F16, 2, {NI, NO}, f16, sizeof f16}, T_SC("c.weight")};
        const kvspec lane16[2] = {{"fp4lane.weight_precision", "f16", 0, 0},
                                  {"fp4lane.activation_precision", "a16", 0, 0}};
        write_gguf(path, lane16, 2, t2, 2);
        expect("companion of an F16 weight", path, "nvfp4.orphan-companion", "c.weight.nvfp4_scale");
        tspec t3[] = {{"fp8.weight", FP4_TYPE_F8_E4M3FN, 2, {NI, NO}, f16, NI * NO}};
        write_gguf(path, lane16, 2, t3, 1);
        expect("standalone F8_E4M3FN", path, "lane.type", "fp8.weight");
        tspec t4[] = {{"c.weight", FP4_TYPE_F16, 2, {NI, NO}, f16, sizeof f16}};
        write_gguf(path, lane, 2, t4, 1);
        expect("lane nvfp4 without NVFP4 tensors", path, "lane.pairing", NULL);
        const kvspec lane16b[2] = {{"fp4lane.weight_precision", "f16", 0, 0},
                                   {"fp4lane.activation_precision", "a16", 0, 0}};
        write_gguf(path, lane16b, 2, t4, 1);
        expect("valid f16 file", path, "", NULL);
        /* a dense claim over a k-quant matrix (llama.cpp's quantizer copies its input's keys) */
        static uint8_t q4k[144];
        tspec t5[] = {{"q.weight", FP4_TYPE_Q4_K, 2, {256, 1}, q4k, sizeof q4k}};
        const kvspec lanebf[2] = {{"fp4lane.weight_precision", "bf16", 0, 0},
                                  {"fp4lane.activation_precision", "a16", 0, 0}};
        write_gguf(path, lanebf, 2, t5, 1);
        expect("lane bf16 over a Q4_K matrix", path, "lane.pairing", NULL);
        const kvspec laneq4[2] = {{"fp4lane.weight_precision", "q4_k", 0, 0},
                                  {"fp4lane.activation_precision", "a16", 0, 0}};
        write_gguf(path, laneq4, 2, t5, 1);
        expect("valid q4_k file", path, "", NULL);
    }
    { /* exact reciprocal metadata: wrong type, inconsistent */
        tspec t[] = {T_PAY("a.weight"), T_SC("a.weight"), T_S2("a.weight")};
        kvspec kv[3] = {lane[0], lane[1], {"fp4lane.exact.a.weight.scale2_div", "2", 0, 0}};
        snprintf(path, sizeof path, "%s/h4.gguf", tmp);
        write_gguf(path, kv, 3, t, 3);
        expect("exact reciprocal as a string", path, "nvfp4.exact", "a.weight");
        kv[2] = (kvspec){"fp4lane.exact.a.weight.scale2_div", NULL, 2, 3.0f};
        write_gguf(path, kv, 3, t, 3);
        expect("exact reciprocal inconsistent", path, "nvfp4.exact", "a.weight");
        kv[2] = (kvspec){"fp4lane.exact.a.weight.scale2_div", NULL, 2, 2.0f};
        write_gguf(path, kv, 3, t, 3);
        expect("exact reciprocal consistent", path, "", NULL);
    }
    /* llama.cpp's type 40 */
    const kvspec none[1] = {{"general.name", "ggml", 0, 0}};
    uint8_t badblk[sizeof blocks];
    { /* valid without .scale (1.0), valid with .scale */
        tspec t[] = {{"g.weight", FP4_TYPE_GGML_NVFP4, 2, {NI, NO}, blocks, sizeof blocks}};
        snprintf(path, sizeof path, "%s/k1.gguf", tmp);
        write_gguf(path, none, 1, t, 1);
        expect("ggml without .scale (means 1.0)", path, "", NULL);
        fp4_model *m = NULL;
        fp4_error e;
        if (fp4_model_open(path, NULL, &m, &e) == FP4_OK) {
            const fp4_tensor *x = fp4_model_find(m, "g.weight");
            CHECK(x && x->nvfp4.scale2 == 1.0f && !memcmp(x->nvfp4.payload, payload, sizeof payload) &&
                  !memcmp(x->nvfp4.scales, scales, sizeof scales));
            fp4_model_close(m);
        }
        tspec t2[] = {t[0], {"g.scale", FP4_TYPE_F32, 1, {1}, &bad, 4}};
        write_gguf(path, none, 1, t2, 2);
        expect("ggml .scale NaN", path, "nvfp4.scale2", "g.scale");
        tspec t3[] = {t[0], {"g.scale", FP4_TYPE_F16, 1, {1}, f16, 2}};
        write_gguf(path, none, 1, t3, 2);
        expect("ggml .scale F16", path, "nvfp4.companion-dtype", "g.scale");
        tspec t4[] = {t[0],
                      {"g.scale", FP4_TYPE_F32, 1, {1}, &one, 4},
                      {"g.weight.scale", FP4_TYPE_F32, 1, {1}, &one, 4}};
        write_gguf(path, none, 1, t4, 3);
        expect("ggml both scale namings", path, "ggml.scale-naming", "g.weight");
        tspec t5[] = {t[0], {"h.input_scale", FP4_TYPE_F32, 1, {1}, &one, 4}};
        write_gguf(path, none, 1, t5, 2);
        expect("ggml orphan .input_scale", path, "nvfp4.orphan-companion", "h.input_scale");
        memcpy(badblk, blocks, sizeof blocks);
        badblk[36 + 2] = 0x7F;
        tspec t6[] = {{"g.weight", FP4_TYPE_GGML_NVFP4, 2, {NI, NO}, badblk, sizeof blocks}};
        write_gguf(path, none, 1, t6, 1);
        expect("ggml block scale 0x7F", path, "nvfp4.scale-nan", "g.weight");
        badblk[36 + 2] = 0xC0;
        write_gguf(path, none, 1, t6, 1);
        expect("ggml block scale with sign bit", path, "nvfp4.scale-negative", "g.weight");
        tspec t7[] = {t[0], T_PAY("a.weight"), T_SC("a.weight"), T_S2("a.weight")};
        write_gguf(path, lane, 2, t7, 4);
        expect("ggml and fp4lane NVFP4 mixed", path, "lane.mixed-layouts", "g.weight");
        tspec t8[] = {t[0],
                      {"g.scale", FP4_TYPE_F32, 1, {1}, &s2, 4},
                      {"g.input_scale", FP4_TYPE_F32, 1, {1}, &inv, 4}};
        write_gguf(path, none, 1, t8, 3);
        expect("ggml valid w4a4", path, "", NULL);
    }
}

/* llama.cpp's 3-D type-40 experts [n_in, rows, E]: expert e is the logical "<stem>.e.weight" with the
 * e-th value of the F32 [E] .scale / .input_scale (ggml_moe.c's form) */
static void ggml_expert_cases(void) {
    char path[700];
    const kvspec none[1] = {{"general.name", "ggml", 0, 0}};
    float sv[2] = {0.5f, 0.25f}, bad[2] = {0.5f, -1.0f}, in3[3] = {1, 1, 1}, one = 1.0f;
    const tspec w = {"g.weight", FP4_TYPE_GGML_NVFP4, 3, {NI, NO / 2, 2}, blocks, sizeof blocks};
    snprintf(path, sizeof path, "%s/x1.gguf", tmp);
    tspec t[] = {w, {"g.scale", FP4_TYPE_F32, 1, {2}, sv, 8}};
    write_gguf(path, none, 1, t, 2);
    expect("ggml 3-D experts with .scale [E]", path, "", NULL);
    fp4_model *m = NULL;
    fp4_error e;
    if (fp4_model_open(path, NULL, &m, &e) == FP4_OK) { /* each expert its rows and its own scale2 */
        for (int x = 0; x < 2; x++) {
            char nm[32];
            snprintf(nm, sizeof nm, "g.%d.weight", x);
            const fp4_tensor *ex = fp4_model_find(m, nm);
            const size_t pb = sizeof payload / 2, sb = sizeof scales / 2;
            CHECK_MSG(ex && ex->n_dims == 2 && ex->ne[0] == NI && ex->ne[1] == NO / 2 &&
                          ex->nvfp4.n_out == NO / 2 && ex->nvfp4.scale2 == sv[x] &&
                          !memcmp(ex->nvfp4.payload, payload + x * pb, pb) &&
                          !memcmp(ex->nvfp4.scales, scales + x * sb, sb),
                      "%s: not expert %d's rows and scale2", nm, x);
        }
        CHECK(fp4_model_find(m, "g.weight") == NULL);
        fp4_model_close(m);
    }
    write_gguf(path, none, 1, t, 1);
    expect("ggml 3-D experts without .scale (1.0 each)", path, "", NULL);
    tspec t2[] = {w, {"g.scale", FP4_TYPE_F32, 1, {1}, &one, 4}};
    write_gguf(path, none, 1, t2, 2);
    expect("ggml 3-D experts with a single .scale", path, "nvfp4.companion-shape", "g.scale");
    tspec t3[] = {w, {"g.scale", FP4_TYPE_F32, 1, {2}, bad, 8}};
    write_gguf(path, none, 1, t3, 2);
    expect("ggml 3-D experts with a negative .scale", path, "nvfp4.scale2", "g.scale");
    tspec t4[] = {w, {"g.scale", FP4_TYPE_F32, 1, {2}, sv, 8},
                  {"g.input_scale", FP4_TYPE_F32, 1, {3}, in3, 12}};
    write_gguf(path, none, 1, t4, 3);
    expect("ggml 3-D experts with .input_scale [E + 1]", path, "nvfp4.companion-shape", "g.input_scale");
    tspec t5[] = {w, {"g.scale", FP4_TYPE_F32, 1, {2}, sv, 8},
                  {"g.input_scale", FP4_TYPE_F32, 1, {2}, sv, 8}};
    write_gguf(path, none, 1, t5, 3);
    expect("ggml 3-D experts, valid w4a4", path, "", NULL);
    enum { MANY = 4097 }; /* one past FP4_GGUF_MAX_EXPERTS: one 64-value row each */
    uint8_t *many = calloc(MANY, 36);
    tspec t6[] = {{"g.weight", FP4_TYPE_GGML_NVFP4, 3, {NI, 1, MANY}, many, (size_t)MANY * 36}};
    write_gguf(path, none, 1, t6, 1);
    expect("ggml 3-D tensor of 4097 experts", path, "ggml.experts", "g.weight");
    free(many);
}

/* safetensors: ModelOpt and compressed-tensors */
static void st_cases(void) {
    char dir[700];
    float s2 = 0.5f, in = 0.25f, nan_ = NAN, inf = INFINITY, zero = 0.0f, two[2] = {1, 1};
    int8_t i8[sizeof payload] = {0};
    int k = 0;
#define ST_DIR() (snprintf(dir, sizeof dir, "%s/st%02d", tmp, k++), dir)
    const char *w4a4 = "{\"quantization\":{\"quant_algo\":\"NVFP4\",\"group_size\":16}}";
    const char *w4a16 = "{\"quantization\":{\"quant_algo\":\"W4A16_NVFP4\",\"group_size\":16}}";
    const char *gs32 = "{\"quantization\":{\"quant_algo\":\"NVFP4\",\"group_size\":32}}";
    const char *fp8 = "{\"quantization\":{\"quant_algo\":\"FP8\"}}";
#define M_PAY {"m.weight", FP4_ST_U8, 2, {NO, NI / 2}, payload, sizeof payload}
#define M_SC {"m.weight_scale", FP4_ST_F8_E4M3, 2, {NO, NI / 16}, scales, sizeof scales}
#define M_S2 {"m.weight_scale_2", FP4_ST_F32, 0, {0}, &s2, 4}
#define M_IN {"m.input_scale", FP4_ST_F32, 0, {0}, &in, 4}
    {
        tspec t[] = {M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, w4a16);
        expect("modelopt valid a16", dir, "", NULL);
    }
    {
        tspec t[] = {M_IN, M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, w4a4);
        expect("modelopt valid w4a4", dir, "", NULL);
    }
    {
        tspec t[] = {M_IN, M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, NULL);
        expect("modelopt valid w4a4, no config", dir, "", NULL);
    }
    {
        tspec t[] = {M_S2, M_PAY};
        write_st(ST_DIR(), t, 2, NULL);
        expect("modelopt U8 weight without weight_scale", dir, "nvfp4.orphan-companion", "m.weight_scale_2");
    }
    {
        tspec t[] = {M_SC, M_PAY};
        write_st(ST_DIR(), t, 2, NULL);
        expect("modelopt missing weight_scale_2", dir, "nvfp4.companion-missing", "m.weight");
    }
    {
        tspec t[] = {M_S2, M_SC};
        write_st(ST_DIR(), t, 2, NULL);
        expect("modelopt missing payload", dir, "nvfp4.companion-missing", "m.weight_scale");
    }
    { tspec t[] = {M_S2, {"m.weight_scale", FP4_ST_F8_E5M2, 2, {NO, NI / 16}, scales, sizeof scales}, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale F8_E5M2", dir, "nvfp4.companion-dtype", "m.weight_scale");
    }
    { tspec t[] = {M_S2, {"m.weight_scale", FP4_ST_U8, 2, {NO, NI / 16}, scales, sizeof scales}, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale U8", dir, "nvfp4.companion-dtype", "m.weight_scale");
    }
    {
        tspec t[] = {
            M_S2, {"m.weight_scale", FP4_ST_F8_E4M3, 2, {NO / 2, NI / 8}, scales, sizeof scales}, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale shape", dir, "nvfp4.companion-shape", "m.weight_scale");
    }
    { tspec t[] = {M_S2, M_SC, {"m.weight", FP4_ST_I8, 2, {NO, NI / 2}, i8, sizeof i8}};
      write_st(ST_DIR(), t, 3, NULL); expect("modelopt payload I8", dir, "nvfp4.payload-dtype", "m.weight"); }
    { tspec t[] = {{"m.weight_scale_2", FP4_ST_F32, 1, {2}, two, 8}, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale2 shape [2]", dir, "nvfp4.companion-shape", "m.weight_scale_2");
    }
    { tspec t[] = {{"m.weight_scale_2", FP4_ST_F32, 0, {0}, &inf, 4}, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale2 Inf", dir, "nvfp4.scale2", "m.weight_scale_2");
    }
    { tspec t[] = {{"m.weight_scale_2", FP4_ST_F32, 0, {0}, &nan_, 4}, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale2 NaN", dir, "nvfp4.scale2", "m.weight_scale_2");
    }
    { tspec t[] = {{"m.input_scale", FP4_ST_F32, 0, {0}, &zero, 4}, M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, NULL);
        expect("modelopt input_scale 0", dir, "nvfp4.input-scale", "m.input_scale");
    }
    { tspec t[] = {M_S2, {"m.weight_global_scale", FP4_ST_F32, 1, {1}, &s2, 4}, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, NULL);
        expect("modelopt and CT names", dir, "hf.mixed-conventions", "m.weight_global_scale");
    }
    {
        tspec t[] = {M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, w4a4);
        expect("config W4A4, no input_scale", dir, "lane.activation", "m.weight");
    }
    {
        tspec t[] = {M_IN, M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, w4a16);
        expect("config W4A16, input_scale", dir, "lane.activation", "m.weight");
    }
    {
        tspec t[] = {M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, gs32);
        expect("config group_size 32", dir, "hf.group-size", NULL);
    }
    {
        tspec t[] = {M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 3, fp8);
        expect("config quant_algo FP8", dir, "hf.quant-algo", NULL);
    }
    float four[NO] = {1, 1, 1, 1};
    {
        /* per-tensor and per-channel FP8 load (tests/test_fp8.c); a 2-D grid of scales is
         * block-scaled FP8, which is refused by name */
        tspec t[] = {{"f.weight_scale", FP4_ST_F32, 2, {2, 2}, four, sizeof four},
                     {"f.weight", FP4_ST_F8_E4M3, 2, {NO, 2}, scales, 8}};
        write_st(ST_DIR(), t, 2, NULL);
        expect("FP8 block-scaled checkpoint", dir, "hf.fp8", "f.weight_scale");
    }
    memcpy(bad_scales, scales, sizeof scales);
    bad_scales[5] = 0xFF;
    {
        tspec t[] = {
            M_S2, {"m.weight_scale", FP4_ST_F8_E4M3, 2, {NO, NI / 16}, bad_scales, sizeof scales}, M_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("modelopt scale byte 0xFF", dir, "nvfp4.scale-nan", "m.weight");
    }
    { tspec t[] = {{"x.weight_scale_2", FP4_ST_F32, 0, {0}, &s2, 4}, M_S2, M_SC, M_PAY};
        write_st(ST_DIR(), t, 4, NULL);
        expect("orphan weight_scale_2", dir, "nvfp4.orphan-companion", "x.weight_scale_2");
    }
    { tspec t[] = {M_IN, M_S2, M_SC, M_PAY, {"n.weight_scale_2", FP4_ST_F32, 0, {0}, &s2, 4},
                   {"n.weight_scale", FP4_ST_F8_E4M3, 2, {NO, NI / 16}, scales, sizeof scales},
                   {"n.weight", FP4_ST_U8, 2, {NO, NI / 2}, payload, sizeof payload}};
        write_st(ST_DIR(), t, 7, NULL);
        expect("input scale on some HF tensors", dir, "nvfp4.input-scale-partial", "n.weight");
    }
#define C_PAY {"c.weight_packed", FP4_ST_U8, 2, {NO, NI / 2}, payload, sizeof payload}
#define C_SC {"c.weight_scale", FP4_ST_F8_E4M3, 2, {NO, NI / 16}, scales, sizeof scales}
    float g = 2.0f;
    { tspec t[] = {{"c.weight_global_scale", FP4_ST_F32, 1, {1}, &g, 4}, C_SC, C_PAY};
      write_st(ST_DIR(), t, 3, NULL); expect("compressed-tensors valid", dir, "", NULL);
      fp4_model *m = NULL; fp4_error e;
      if (fp4_model_open(dir, NULL, &m, &e) == FP4_OK) { /* scale2 = 1/global */
          const fp4_tensor *x = fp4_model_find(m, "c.weight");
          CHECK(x && x->nvfp4.scale2 == 0.5f && fp4_model_layout(m) == FP4_LAYOUT_CT);
          fp4_model_close(m);
      } }
    { tspec t[] = {{"c.weight_global_scale", FP4_ST_F32, 1, {1}, &nan_, 4}, C_SC, C_PAY};
        write_st(ST_DIR(), t, 3, NULL);
        expect("CT global scale NaN", dir, "nvfp4.scale2", "c.weight_global_scale");
    }
    {
        tspec t[] = {{"c.weight_global_scale", FP4_ST_F32, 1, {1}, &g, 4},
                     {"c.input_global_scale", FP4_ST_F32, 1, {1}, &inf, 4},
                     C_SC,
                     C_PAY};
        write_st(ST_DIR(), t, 4, NULL);
        expect("CT input global scale Inf", dir, "nvfp4.input-scale", "c.input_global_scale");
    }
    {
        tspec t[] = {C_SC, C_PAY};
        write_st(ST_DIR(), t, 2, NULL);
        expect("CT missing global scale", dir, "nvfp4.companion-missing", "c.weight_packed");
    }
    { /* CT format in config.json that is not NVFP4 */
      tspec t[] = {{"c.weight_global_scale", FP4_ST_F32, 1, {1}, &g, 4}, C_SC, C_PAY};
      write_st(ST_DIR(), t, 3, NULL);
      char f[800]; fp4_error e;
      snprintf(f, sizeof f, "%s/config.json", dir);
      CHECK_OK(fp4_hfdir_write_json(
          f,
          "{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"int-quantized\"}}",
          2, 1, &e));
      expect("CT format int-quantized", dir, "hf.quant-algo", NULL); }
}

/* Writing llama.cpp's layout refuses what llama.cpp itself cannot open (and says why). */
static void ggml_write_limits(void) {
    char path[700], out[700];
    float s2 = 0.5f;
    static uint8_t raw[64];
    const kvspec lane[2] = {{"fp4lane.weight_precision", "nvfp4", 0, 0},
                            {"fp4lane.activation_precision", "a16", 0, 0}};
    const char *longname = "model.layers.0.self_attn.a_very_long_projection_name_for_the_test.weight";
    struct { const char *what, *rule; tspec extra; const char *nv; } cases[] = {
        {"U8 tensor into gguf-ggml", "ggml.dtype", {"raw.bytes", FP4_TYPE_U8, 1, {64}, raw, 64}, "a.weight"},
        {"64-byte name into gguf-ggml", "ggml.name", {"n.bias", FP4_TYPE_F32, 1, {16}, raw, 64}, longname},
        {"valid twin into gguf-ggml", "", {"n.bias", FP4_TYPE_F32, 1, {16}, raw, 64}, "a.weight"},
    };
    for (int i = 0; i < 3; i++) {
        char sc[300], s2n[300];
        snprintf(sc, sizeof sc, "%s.nvfp4_scale", cases[i].nv);
        snprintf(s2n, sizeof s2n, "%s.nvfp4_scale2", cases[i].nv);
        tspec t[4] = {{cases[i].nv, FP4_TYPE_NVFP4_E2M1, 2, {NI, NO}, payload, sizeof payload},
                      {sc, FP4_TYPE_F8_E4M3FN, 2, {NI / 16, NO}, scales, sizeof scales},
                      {s2n, FP4_TYPE_F32, 1, {1}, &s2, 4}, cases[i].extra};
        snprintf(path, sizeof path, "%s/w%d.gguf", tmp, i);
        snprintf(out, sizeof out, "%s/w%d-ggml.gguf", tmp, i);
        write_gguf(path, lane, 2, t, 4);
        fp4_model *m = NULL;
        fp4_error e;
        CHECK_OK(fp4_model_open(path, NULL, &m, &e));
        fp4_write_opts o = {.layout = FP4_LAYOUT_GGUF_GGML};
        fp4_status st = m ? fp4_model_write(m, out, &o, &e) : FP4_ERR_INVALID_ARG;
        n_cases++;
        if (!cases[i].rule[0]) CHECK_MSG(st == FP4_OK, "%s: %s", cases[i].what, e.msg);
        else
            CHECK_MSG(st == FP4_ERR_UNSUPPORTED && !strcmp(e.rule, cases[i].rule), "%s: rule '%s'",
                      cases[i].what, e.rule);
        fp4_model_close(m);
    }
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/fp4lane-reject-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    fill_base();
    gguf_cases();
    gguf_cases2();
    st_cases();
    ggml_write_limits();
    ggml_expert_cases();
    printf("%d loader cases\n", n_cases);
    CHECK(n_cases >= 70);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!check_failed && !getenv("FP4_KEEP_TMP") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return check_report();
}
