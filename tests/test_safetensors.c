/* test_safetensors.c — safetensors reader/writer round trips (every dtype, 0-d..4-d, empty
 * tensors, metadata, chunked streaming), byte identity with ModelOpt's and the reference
 * writer's files, sharded HF directories, config JSON output in Python's json.dumps style. */
#include "check.h"
#include "fp4lane_io.h"
#include "tmpnames.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN(file) check_data("modelopt-golden/" file)

static char tmp_root[512];

static void tmp_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tmp_root, name); }

/* ---- dtypes ---- */

static void test_dtypes(void) {
    for (int d = 0; d < FP4_ST_DTYPE_COUNT_; d++) {
        const char *name = fp4_st_dtype_name((fp4_st_dtype)d);
        CHECK(name != NULL);
        fp4_st_dtype back;
        CHECK_OK(fp4_st_dtype_from_name(name, &back));
        CHECK_EQ_INT(back, d);
        CHECK(fp4_st_dtype_bits((fp4_st_dtype)d) > 0);
    }
    fp4_st_dtype x;
    CHECK(fp4_st_dtype_from_name("F8_E4M3FN", &x) == FP4_ERR_DTYPE);
    CHECK(fp4_st_dtype_from_name("f32", &x) == FP4_ERR_DTYPE);
    CHECK(fp4_st_dtype_name(FP4_ST_DTYPE_COUNT_) == NULL);
    CHECK_EQ_INT(fp4_st_dtype_bits(FP4_ST_F4), 4);
    CHECK_EQ_INT(fp4_st_dtype_bits(FP4_ST_BF16), 16);
    CHECK_EQ_INT(fp4_st_dtype_bits(FP4_ST_C64), 64);
    CHECK(strcmp(fp4_st_dtype_name(FP4_ST_F8_E4M3), "F8_E4M3") == 0);
}

/* ---- round trips ---- */

typedef struct spec {
    const char *name;
    fp4_st_dtype dt;
    int rank;
    int64_t shape[4];
} spec;

/* Writes specs with random bytes (chunked randomly), reads back, compares everything. */
static void roundtrip(const spec *sp, size_t n, const char *const *meta, size_t n_meta, uint64_t seed) {
    char path[600];
    tmp_path(path, sizeof path, "rt.safetensors");
    fp4_error err;
    fp4_st_writer *w = NULL;
    CHECK_OK(fp4_st_writer_create(&w, &err));
    for (size_t i = 0; i < n_meta; i++)
        CHECK_OK(fp4_st_writer_add_metadata(w, meta[2 * i], meta[2 * i + 1], &err));
    for (size_t i = 0; i < n; i++)
        CHECK_OK(fp4_st_writer_add_tensor(w, sp[i].name, sp[i].dt, sp[i].rank, sp[i].shape, &err));
    uint64_t total = fp4_st_writer_data_size(w);
    uint8_t *data = malloc(total + 1);
    test_rng r = {seed};
    for (uint64_t i = 0; i < total; i++) data[i] = (uint8_t)rng_u64(&r);
    CHECK_OK(fp4_st_writer_begin(w, path, &err));
    for (uint64_t off = 0; off < total;) {
        uint64_t k = 1 + rng_u64(&r) % 37;
        if (k > total - off) k = total - off;
        CHECK_OK(fp4_st_writer_write(w, data + off, (size_t)k, &err));
        off += k;
    }
    CHECK_OK(fp4_st_writer_finish(w, &err));
    fp4_st_writer_free(w);

    fp4_st *st = NULL;
    fp4_status s = fp4_st_open(path, &st, &err);
    CHECK_MSG(s == FP4_OK, "%s: %s", err.rule, err.msg);
    if (s) return;
    CHECK_EQ_INT(fp4_st_header_len(st) % 8, 0);
    CHECK_EQ_INT(fp4_st_n_tensors(st), n);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const fp4_st_tensor *t = fp4_st_tensor_at(st, i);
        CHECK(t && strcmp(t->name, sp[i].name) == 0);
        CHECK(fp4_st_find(st, sp[i].name) == t);
        CHECK_EQ_INT(t->dtype, sp[i].dt);
        CHECK_EQ_INT(t->rank, sp[i].rank);
        for (int d = 0; d < sp[i].rank; d++) CHECK_EQ_INT(t->shape[d], sp[i].shape[d]);
        CHECK_EQ_INT(t->offset, off);
        CHECK(t->nbytes == 0 || memcmp(t->data, data + off, t->nbytes) == 0);
        off += t->nbytes;
    }
    CHECK(fp4_st_tensor_at(st, n) == NULL);
    CHECK(fp4_st_find(st, "no.such.tensor") == NULL);
    CHECK_EQ_INT(fp4_st_n_metadata(st), n_meta);
    for (size_t i = 0; i < n_meta; i++) {
        const char *k, *v;
        CHECK_OK(fp4_st_metadata_at(st, i, &k, &v));
        CHECK(strcmp(k, meta[2 * i]) == 0 && strcmp(v, meta[2 * i + 1]) == 0);
        CHECK(fp4_st_metadata_get(st, meta[2 * i]) != NULL);
    }
    CHECK(fp4_st_metadata_at(st, n_meta, NULL, NULL) == FP4_ERR_NOT_FOUND);
    fp4_st_close(st);
    free(data);
    unlink(path);
}

static void test_roundtrips(void) {
    spec all[FP4_ST_DTYPE_COUNT_];
    char names[FP4_ST_DTYPE_COUNT_][32];
    for (int d = 0; d < FP4_ST_DTYPE_COUNT_; d++) {
        snprintf(names[d], sizeof names[d], "t.%s", fp4_st_dtype_name((fp4_st_dtype)d));
        all[d] = (spec){names[d], (fp4_st_dtype)d, 2, {3, 8, 0, 0}}; /* 24 elements: whole bytes for F4/F6 */
    }
    const char *meta[] = {"format", "pt", "note", "caf\xc3\xa9 \"quoted\" \\ tab\t"};
    roundtrip(all, FP4_ST_DTYPE_COUNT_, meta, 2, 1);
    roundtrip(all, FP4_ST_DTYPE_COUNT_, NULL, 0, 2);
    spec shapes[] = {
        {"scalar", FP4_ST_F32, 0, {0}},
        {"vec", FP4_ST_BF16, 1, {7}},
        {"conv", FP4_ST_F16, 4, {2, 3, 2, 5}},
        {"empty", FP4_ST_F32, 2, {0, 5}},
        {"empty1d", FP4_ST_U8, 1, {0}},
        {"huge_but_empty", FP4_ST_F64, 2, {FP4_ST_MAX_DIM, 0}},
        {"unicode.\xe2\x88\x91.w", FP4_ST_I8, 1, {3}},
        {"last", FP4_ST_U64, 3, {1, 1, 1}},
    };
    roundtrip(shapes, sizeof shapes / sizeof *shapes, meta, 1, 3);
    roundtrip(NULL, 0, NULL, 0, 4);  /* zero tensors */
    roundtrip(NULL, 0, meta, 2, 5);  /* metadata only */
    roundtrip(shapes + 3, 2, NULL, 0, 6); /* only empty tensors */
}

/* ---- byte identity ---- */

/* The reference writer's own test vectors (empty file; metadata only; one F32 tensor). */
static void test_reference_bytes(void) {
    char path[600];
    tmp_path(path, sizeof path, "ref.safetensors");
    fp4_error err;
    static const uint8_t empty[] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    static const char meta_hdr[] = "{\"__metadata__\":{\"framework\":\"pt\"}}     ";
    static const char attn_hdr[] =
        "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    for (int c = 0; c < 3; c++) {
        fp4_st_writer *w = NULL;
        CHECK_OK(fp4_st_writer_create(&w, &err));
        float vals[6] = {0, 1, 2, 3, 4, 5};
        int64_t shape[3] = {1, 2, 3};
        if (c == 1) CHECK_OK(fp4_st_writer_add_metadata(w, "framework", "pt", &err));
        if (c == 2) CHECK_OK(fp4_st_writer_add_tensor(w, "attn.0", FP4_ST_F32, 3, shape, &err));
        CHECK_OK(fp4_st_writer_begin(w, path, &err));
        if (c == 2) CHECK_OK(fp4_st_writer_write(w, vals, sizeof vals, &err));
        CHECK_OK(fp4_st_writer_finish(w, &err));
        fp4_st_writer_free(w);
        size_t len;
        uint8_t *got = check_slurp(path, &len);
        CHECK(got != NULL);
        if (!got) continue;
        if (c == 0) CHECK(len == sizeof empty && memcmp(got, empty, len) == 0);
        if (c == 1) CHECK(len == 8 + 40 && got[0] == 40 && memcmp(got + 8, meta_hdr, 40) == 0);
        if (c == 2) CHECK(len == 8 + 64 + 24 && got[0] == 64 && memcmp(got + 8, attn_hdr, 64) == 0 &&
                          memcmp(got + 72, vals, 24) == 0);
        free(got);
    }
    unlink(path);
}

/* Read a golden file, write all its tensors back (file order, or canonical sort of a shuffled
 * declaration), compare the whole file byte for byte. */
static void identity(const char *golden, int canonical) {
    char path[600];
    tmp_path(path, sizeof path, "identity.safetensors");
    fp4_error err;
    fp4_st *st = NULL;
    fp4_status s = fp4_st_open(golden, &st, &err);
    CHECK_MSG(s == FP4_OK, "%s: %s %s", golden, err.rule, err.msg);
    if (s) return;
    int64_t n = fp4_st_n_tensors(st);
    CHECK(n > 10);
    fp4_st_writer *w = NULL;
    CHECK_OK(fp4_st_writer_create(&w, &err));
    for (int64_t i = 0; i < fp4_st_n_metadata(st); i++) {
        const char *k, *v;
        fp4_st_metadata_at(st, i, &k, &v);
        CHECK_OK(fp4_st_writer_add_metadata(w, k, v, &err));
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t i = canonical ? (j * 7 + 3) % n : j; /* a permutation when gcd(7, n) == 1 */
        if (canonical && n % 7 == 0) i = n - 1 - j;
        const fp4_st_tensor *t = fp4_st_tensor_at(st, i);
        CHECK_OK(fp4_st_writer_add_tensor(w, t->name, t->dtype, t->rank, t->shape, &err));
    }
    if (canonical) CHECK_OK(fp4_st_writer_sort_canonical(w));
    CHECK_OK(fp4_st_writer_begin(w, path, &err));
    for (size_t i = 0; i < (size_t)n; i++) {
        const fp4_st_tensor *t = fp4_st_find(st, fp4_st_writer_tensor_name(w, i));
        CHECK_OK(fp4_st_writer_write(w, t->data, t->nbytes, &err));
    }
    CHECK_OK(fp4_st_writer_finish(w, &err));
    fp4_st_writer_free(w);
    fp4_st_close(st);
    size_t la, lb;
    uint8_t *a = check_slurp(golden, &la), *b = check_slurp(path, &lb);
    CHECK_MSG(a && b && la == lb && memcmp(a, b, la) == 0, "%s rewritten (canonical=%d) differs", golden,
              canonical);
    free(a);
    free(b);
    unlink(path);
}

static void test_modelopt_identity(void) {
    identity(GOLDEN("modelopt_cuda.safetensors"), 0);
    identity(GOLDEN("modelopt_cuda.safetensors"), 1);
    identity(GOLDEN("modelopt_cpu.safetensors"), 0);
    identity(GOLDEN("input.safetensors"), 0);
    /* a few facts of the golden file */
    fp4_st *st = NULL;
    fp4_error err;
    CHECK_OK(fp4_st_open(GOLDEN("modelopt_cuda.safetensors"), &st, &err));
    if (!st) return;
    CHECK(strcmp(fp4_st_metadata_get(st, "device"), "cuda") == 0);
    const fp4_st_tensor *s2 = fp4_st_find(st, "model.layers.0.mlp.down_proj.weight_scale_2");
    CHECK(s2 && s2->dtype == FP4_ST_F32 && s2->rank == 0 && s2->nbytes == 4);
    const fp4_st_tensor *ws = fp4_st_find(st, "model.layers.1.mlp.down_proj.weight_scale");
    CHECK(ws && ws->dtype == FP4_ST_F8_E4M3 && ws->rank == 2 && ws->shape[0] == 48 && ws->shape[1] == 64);
    fp4_st_close(st);
}

/* ---- unaligned buffers ---- */

static void test_unaligned(void) {
    static const char hdr[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t n = strlen(hdr);
    uint8_t *buf = malloc(1 + 8 + n + 8);
    uint8_t *p = buf + 1; /* odd address */
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(p + 8, hdr, n);
    float v[2] = {1.5f, -2.25f};
    memcpy(p + 8 + n, v, 8);
    fp4_st *st = NULL;
    fp4_error err;
    CHECK_OK(fp4_st_open_buffer(p, 8 + n + 8, &st, &err));
    const fp4_st_tensor *t = fp4_st_find(st, "x");
    CHECK(t != NULL);
    if (t) {
        float got[2];
        memcpy(got, t->data, sizeof got); /* the documented way: never cast t->data */
        CHECK(f32_bits(got[0]) == f32_bits(1.5f) && f32_bits(got[1]) == f32_bits(-2.25f));
    }
    fp4_st_close(st);
    fp4_st_close(NULL);
    free(buf);
}

/* ---- writer misuse ---- */

static void test_writer_errors(void) {
    char path[600];
    tmp_path(path, sizeof path, "bad.safetensors");
    fp4_error err;
    fp4_st_writer *w = NULL;
    int64_t sh[2] = {2, 2};
    CHECK_OK(fp4_st_writer_create(&w, &err));
    CHECK(fp4_st_writer_add_tensor(w, "", FP4_ST_F32, 1, sh, &err) == FP4_ERR_INVALID_ARG &&
          !strcmp(err.rule, "stw.name"));
    CHECK(fp4_st_writer_add_tensor(w, "__metadata__", FP4_ST_F32, 1, sh, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_st_writer_add_tensor(w, "bad\xff", FP4_ST_F32, 1, sh, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_st_writer_add_tensor(w, "r5", FP4_ST_F32, 5, sh, &err) == FP4_ERR_LIMIT &&
          !strcmp(err.rule, "st.rank"));
    int64_t neg[1] = {-1}, odd[1] = {3};
    CHECK(fp4_st_writer_add_tensor(w, "neg", FP4_ST_F32, 1, neg, &err) == FP4_ERR_SHAPE);
    CHECK(fp4_st_writer_add_tensor(w, "f4", FP4_ST_F4, 1, odd, &err) == FP4_ERR_SHAPE &&
          !strcmp(err.rule, "st.subbyte"));
    CHECK(fp4_st_writer_add_tensor(w, "dt", (fp4_st_dtype)99, 1, odd, &err) == FP4_ERR_DTYPE);
    CHECK(fp4_st_writer_add_metadata(w, "k", "\xc0\x80", &err) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_st_writer_add_tensor(w, "a", FP4_ST_F32, 2, sh, &err));
    CHECK_OK(fp4_st_writer_add_tensor(w, "a", FP4_ST_F32, 2, sh, &err));
    CHECK(fp4_st_writer_begin(w, path, &err) == FP4_ERR_DUPLICATE && !strcmp(err.rule, "stw.dup"));
    fp4_st_writer_free(w);

    CHECK_OK(fp4_st_writer_create(&w, &err));
    CHECK_OK(fp4_st_writer_add_metadata(w, "k", "1", &err));
    CHECK_OK(fp4_st_writer_add_metadata(w, "k", "2", &err));
    CHECK(fp4_st_writer_begin(w, path, &err) == FP4_ERR_DUPLICATE && !strcmp(err.rule, "stw.meta_dup"));
    fp4_st_writer_free(w);

    uint8_t bytes[32] = {0};
    CHECK_OK(fp4_st_writer_create(&w, &err));
    CHECK_OK(fp4_st_writer_add_tensor(w, "a", FP4_ST_F32, 2, sh, &err));
    CHECK(fp4_st_writer_write(w, bytes, 4, &err) == FP4_ERR_INVALID_ARG); /* before begin */
    CHECK_OK(fp4_st_writer_begin(w, path, &err));
    CHECK(tmp_names_beside(path) == 1 && access(path, F_OK) != 0); /* a temporary name only */
    CHECK(fp4_st_writer_add_tensor(w, "b", FP4_ST_F32, 2, sh, &err) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_st_writer_write(w, bytes, 8, &err));
    CHECK(fp4_st_writer_finish(w, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "stw.data_size"));
    fp4_st_writer_free(w);
    CHECK(tmp_names_beside(path) == 0 && access(path, F_OK) != 0); /* nothing left behind */

    CHECK_OK(fp4_st_writer_create(&w, &err));
    CHECK_OK(fp4_st_writer_add_tensor(w, "a", FP4_ST_F32, 2, sh, &err));
    CHECK_OK(fp4_st_writer_begin(w, path, &err));
    CHECK(fp4_st_writer_write(w, bytes, 17, &err) == FP4_ERR_INVALID_ARG &&
          !strcmp(err.rule, "stw.data_size"));
    fp4_st_writer_free(w);
    CHECK(tmp_names_beside(path) == 0);
    fp4_st_writer_free(NULL);
}

/* ---- HF directories ---- */

static void rm_dir_files(const char *dir) {
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "config.json",
                                        "hf_quant_config.json"};
    char p[700];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    for (int i = 1; i <= 20; i++)
        for (int n = 1; n <= 20; n++) {
            snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", dir, i, n);
            unlink(p);
        }
    rmdir(dir);
}

static const char config_in[] =
    "{\"b\": 1e-06, \"a\": [1.0, 0.1, 100000.0, 1e16, 1e15, 1.5e-7, 1.2345678901234568e+17, -0.0, "
    "3.141592653589793, 0.0001, 5e-324, 1.7976931348623157e+308, 2.5, 123.456], "
    "\"s\": \"\\u00e9\\n\\u001f/\\u007f\\ud83d\\ude00\\\"\\\\\", \"e\": {}, \"l\": [], \"n\": null, \"t\": "
    "true, "
    "\"f\": false, \"i\": -12, \"Z\": {\"y\": 1, \"x\": [2]}, "
    "\"quantization_config\": {\"quant_algo\": \"NVFP4\", \"group_size\": 16}}";

/* json.dumps(obj, indent=2, sort_keys=True) from CPython 3, for the object above (less the
 * quantization_config key, checked separately). */
static const char config_py_sorted_head[] =
    "{\n  \"Z\": {\n    \"x\": [\n      2\n    ],\n    \"y\": 1\n  },\n  \"a\": [\n    1.0,\n    0.1,\n"
    "    100000.0,\n    1e+16,\n    1000000000000000.0,\n    1.5e-07,\n    1.2345678901234568e+17,\n    "
    "-0.0,\n"
    "    3.141592653589793,\n    0.0001,\n    5e-324,\n    1.7976931348623157e+308,\n    2.5,\n    123.456\n "
    " ],\n"
    "  \"b\": 1e-06,\n  \"e\": {},\n  \"f\": false,\n  \"i\": -12,\n  \"l\": [],\n  \"n\": null,\n";
static const char config_py_sorted_tail[] =
    "  \"s\": \"\\u00e9\\n\\u001f/\\u007f\\ud83d\\ude00\\\"\\\\\",\n  \"t\": true\n}\n";

static void test_write_json(const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    fp4_error err;
    CHECK_OK(fp4_hfdir_write_json(path, config_in, 2, 1, &err));
    size_t len;
    char *got = (char *)check_slurp(path, &len);
    CHECK(got != NULL);
    if (got) {
        got[len] = 0;
        size_t hl = strlen(config_py_sorted_head), tl = strlen(config_py_sorted_tail);
        CHECK(len > hl + tl && memcmp(got, config_py_sorted_head, hl) == 0);
        CHECK(len > tl && memcmp(got + len - tl, config_py_sorted_tail, tl) == 0);
        CHECK(strstr(
            got,
            "  \"quantization_config\": {\n    \"group_size\": 16,\n    \"quant_algo\": \"NVFP4\"\n  },\n"));
        free(got);
    }
    CHECK(fp4_hfdir_write_json(path, "{\"a\":1,\"a\":2}", 2, 0, &err) == FP4_ERR_DUPLICATE &&
          !strcmp(err.rule, "hfjson.dup"));
    CHECK(fp4_hfdir_write_json(path, "{\"a\":", 2, 0, &err) == FP4_ERR_FORMAT &&
          !strcmp(err.rule, "hfjson.parse"));
    CHECK(fp4_hfdir_write_json(path, "{}", 0, 0, &err) == FP4_ERR_INVALID_ARG);
    /* the file written first is still whole */
    got = (char *)check_slurp(path, &len);
    CHECK(got && len > 100);
    free(got);
    char qpath[700];
    snprintf(qpath, sizeof qpath, "%s/hf_quant_config.json", dir);
    CHECK_OK(fp4_hfdir_write_json(
        qpath,
        "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"NVFP4\", "
        "\"group_size\": 16, \"exclude_modules\": [\"lm_head\"]}}",
        2, 0, &err));
}

static void check_config_access(const fp4_hfdir *d) {
    char buf[64];
    size_t need = 0;
    int64_t v;
    CHECK(fp4_hfdir_has_json(d, FP4_HF_CONFIG) && fp4_hfdir_has_json(d, FP4_HF_QUANT_CONFIG));
    CHECK_OK(
        fp4_hfdir_json_string(d, FP4_HF_CONFIG, "quantization_config.quant_algo", buf, sizeof buf, &need));
    CHECK(strcmp(buf, "NVFP4") == 0 && need == 6);
    CHECK(fp4_hfdir_json_string(d, FP4_HF_CONFIG, "quantization_config.quant_algo", buf, 3, &need) ==
          FP4_ERR_LIMIT);
    CHECK_OK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, "quantization_config.group_size", &v));
    CHECK_EQ_INT(v, 16);
    CHECK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, "quantization_config.quant_algo", &v) == FP4_ERR_DTYPE);
    CHECK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, "quantization_config.nope", &v) == FP4_ERR_NOT_FOUND);
    CHECK_OK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, "Z.x.0", &v));
    CHECK_EQ_INT(v, 2);
    CHECK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, "Z.x.1", &v) == FP4_ERR_NOT_FOUND);
    CHECK_OK(fp4_hfdir_json_string(d, FP4_HF_QUANT_CONFIG, "quantization.exclude_modules.0", buf, sizeof buf,
                                   NULL));
    CHECK(strcmp(buf, "lm_head") == 0);
    CHECK_OK(
        fp4_hfdir_json_dump(d, FP4_HF_QUANT_CONFIG, "quantization.exclude_modules", buf, sizeof buf, &need));
    CHECK(strcmp(buf, "[\"lm_head\"]") == 0);
    CHECK_OK(fp4_hfdir_json_dump(d, FP4_HF_QUANT_CONFIG, "producer", buf, sizeof buf, NULL));
    CHECK(strcmp(buf, "{\"name\":\"modelopt\"}") == 0);
}

/* Writes n tensors of growing size through the sharded writer, reopens the directory. */
static void sharded(uint64_t max_shard, size_t expect_shards) {
    char dir[600];
    tmp_path(dir, sizeof dir, "hfdir");
    mkdir(dir, 0700);
    fp4_error err;
    fp4_hfdir_writer *w = NULL;
    CHECK_OK(fp4_hfdir_writer_create(dir, max_shard, &w, &err));
    CHECK_OK(fp4_hfdir_writer_add_metadata(w, "format", "pt", &err));
    enum { N = 9 };
    char names[N][32];
    uint64_t total = 0;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.w", N - i); /* not sorted */
        int64_t shape[2] = {i + 1, 10};
        CHECK_OK(fp4_hfdir_writer_add_tensor(w, names[i], FP4_ST_F32, i == 4 ? 0 : 2, shape, &err));
        total += i == 4 ? 4 : (uint64_t)(i + 1) * 40;
    }
    uint8_t *data = malloc(total);
    for (uint64_t i = 0; i < total; i++) data[i] = (uint8_t)(i * 131 + 7);
    for (uint64_t off = 0; off < total; off += 50) /* chunks that cross tensors and shards */
        CHECK_OK(fp4_hfdir_writer_write(w, data + off, (size_t)(total - off < 50 ? total - off : 50), &err));
    size_t n_shards = 0;
    fp4_status s = fp4_hfdir_writer_finish(w, &n_shards, &err);
    CHECK_MSG(s == FP4_OK, "%s %s", err.rule, err.msg);
    CHECK_EQ_INT(n_shards, expect_shards);
    fp4_hfdir_writer_free(w);
    test_write_json(dir);

    fp4_hfdir *d = NULL;
    s = fp4_hfdir_open(dir, &d, &err);
    CHECK_MSG(s == FP4_OK, "%s %s %s", err.rule, err.tensor, err.msg);
    if (!s) {
        CHECK_EQ_INT(fp4_hfdir_n_shards(d), expect_shards);
        CHECK_EQ_INT(fp4_hfdir_n_tensors(d), N);
        uint64_t off = 0;
        for (int i = 0; i < N; i++) {
            const fp4_st_tensor *t = fp4_hfdir_find(d, names[i]);
            CHECK(t && t == fp4_hfdir_tensor_at(d, i)); /* shards keep declaration order */
            if (t) CHECK(memcmp(t->data, data + off, t->nbytes) == 0);
            off += t ? t->nbytes : 0;
        }
        CHECK(fp4_hfdir_find(d, "nope") == NULL);
        CHECK(strcmp(fp4_st_metadata_get(fp4_hfdir_shard(d, 0), "format"), "pt") == 0);
        check_config_access(d);
        fp4_hfdir_close(d);
    }
    if (expect_shards > 1) { /* the index: sorted weight_map, total_size */
        char ip[700];
        snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
        json_error_t je;
        json_t *root = json_load_file(ip, 0, &je);
        CHECK(root != NULL);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(root, "metadata"), "total_size")),
                     total);
        const char *prev = "", *key;
        json_t *v;
        json_object_foreach(json_object_get(root, "weight_map"), key, v) {
            CHECK(strcmp(prev, key) < 0);
            prev = key;
        }
        json_decref(root);
    }
    free(data);
    rm_dir_files(dir);
}

static void test_sharded(void) {
    sharded(0, 1);     /* no limit: model.safetensors */
    sharded(100000, 1);
    sharded(200, 7);   /* 40 80 | 120 | 160 4 | 240 (oversized, alone) | 280 | 320 | 360 */
    sharded(1, 9);     /* every tensor alone */
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/fp4st_%d", t && *t ? t : "/tmp", (int)getpid());
    mkdir(tmp_root, 0700);
    test_dtypes();
    test_roundtrips();
    test_reference_bytes();
    test_modelopt_identity();
    test_unaligned();
    test_writer_errors();
    test_sharded();
    rmdir(tmp_root);
    return check_report();
}
