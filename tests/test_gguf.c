/* test_gguf.c — the type registry, the GGUF writer -> reader round trip (every KV type, arrays,
 * alignments 8/32/64, every tensor type incl. NVFP4_E2M1 1024 and GGML_NVFP4 40, chunked data),
 * accessors and wrong-type getters, writer misuse, and interop with ggml's own GGUF code
 * (libggml-base.so from $FP4_GGML_DIR, dlopen): ggml reads our files, we read ggml's. */
#include "check.h"
#include "fp4lane_io.h"
#include "tmpnames.h"
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static fp4_error gerr; /* filled by the GGUF writer calls (their fp4_error *err) */

static char tmp_path[512];
static const char *tmp(const char *tag) {
    const char *d = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/fp4_gguf_%s_%d.gguf", d && *d ? d : "/tmp", tag, (int)getpid());
    return tmp_path;
}

/* ------------------------------------------------------------------------------------------ */
static void test_types(void) {
    static const struct { int64_t id; const char *name; int64_t bs, ts; } want[] = {
        {0, "f32", 1, 4}, {1, "f16", 1, 2}, {30, "bf16", 1, 2}, {8, "q8_0", 32, 34}, {12, "q4_K", 256, 144},
        {14, "q6_K", 256, 210}, {15, "q8_K", 256, 292}, {24, "i8", 1, 1}, {25, "i16", 1, 2},
        {26, "i32", 1, 4}, {27, "i64", 1, 8}, {28, "f64", 1, 8}, {40, "nvfp4", 64, 36},
        {1024, "nvfp4_e2m1", 2, 1}, {1025, "f8_e4m3fn", 1, 1}, {1026, "u8", 1, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const fp4_type_info *t = fp4_type_get(want[i].id);
        CHECK_MSG(t && t->type == want[i].id && strcmp(t->name, want[i].name) == 0 &&
                      t->block_size == want[i].bs && t->type_size == want[i].ts,
                  "type %lld", (long long)want[i].id);
    }
    int64_t unknown[] = {-1, 2, 3, 4, 13, 39, 41, 1023, 1027, INT64_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) CHECK(fp4_type_get(unknown[i]) == NULL);
    size_t n = 0;
    CHECK(fp4_type_row_size(FP4_TYPE_F32, 5, &n) == FP4_OK && n == 20);
    CHECK(fp4_type_row_size(FP4_TYPE_GGML_NVFP4, 128, &n) == FP4_OK && n == 72);
    CHECK(fp4_type_row_size(FP4_TYPE_NVFP4_E2M1, 4096, &n) == FP4_OK && n == 2048);
    CHECK(fp4_type_row_size(FP4_TYPE_Q4_K, 512, &n) == FP4_OK && n == 288);
    CHECK(fp4_type_row_size(FP4_TYPE_F16, 0, &n) == FP4_OK && n == 0);
    CHECK(fp4_type_row_size(FP4_TYPE_GGML_NVFP4, 32, &n) == FP4_ERR_SHAPE);
    CHECK(fp4_type_row_size(FP4_TYPE_NVFP4_E2M1, 3, &n) == FP4_ERR_SHAPE);
    CHECK(fp4_type_row_size(FP4_TYPE_F32, -4, &n) == FP4_ERR_SHAPE);
    CHECK(fp4_type_row_size(FP4_TYPE_F32, INT64_MAX, &n) == FP4_ERR_OVERFLOW);
    CHECK(fp4_type_row_size(FP4_TYPE_Q6_K, INT64_MAX / 256 * 256, &n) == FP4_OK); /* 210/256 < 1 */
    CHECK(fp4_type_row_size(2, 32, &n) == FP4_ERR_UNSUPPORTED);
    CHECK(fp4_gguf_type_size(FP4_GGUF_UINT16) == 2 && fp4_gguf_type_size(FP4_GGUF_STRING) == 0 &&
          fp4_gguf_type_size(FP4_GGUF_FLOAT64) == 8 && fp4_gguf_type_size((fp4_gguf_type)13) == 0);
    CHECK(strcmp(fp4_gguf_type_name(FP4_GGUF_BOOL), "bool") == 0 &&
          strcmp(fp4_gguf_type_name(FP4_GGUF_TYPE_NONE), "?") == 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Round trip                                                                                 */

typedef struct rt_tensor {
    const char *name;
    fp4_type type;
    int32_t n_dims;
    int64_t ne[4];
} rt_tensor;

static const rt_tensor rt_tensors[] = {
    {"f32", FP4_TYPE_F32, 2, {3, 5, 1, 1}},          {"f16", FP4_TYPE_F16, 1, {7, 1, 1, 1}},
    {"bf16", FP4_TYPE_BF16, 3, {4, 2, 2, 1}},        {"q8_0", FP4_TYPE_Q8_0, 2, {64, 3, 1, 1}},
    {"q4_K", FP4_TYPE_Q4_K, 2, {256, 2, 1, 1}},      {"q6_K", FP4_TYPE_Q6_K, 1, {256, 1, 1, 1}},
    {"q8_K", FP4_TYPE_Q8_K, 1, {512, 1, 1, 1}},      {"blk.0.w", FP4_TYPE_GGML_NVFP4, 2, {128, 3, 1, 1}},
    {"blk.0.w.scale", FP4_TYPE_F32, 1, {1, 1, 1, 1}}, {"blk.1.w", FP4_TYPE_NVFP4_E2M1, 2, {32, 4, 1, 1}},
    {"blk.1.w.nvfp4_scale", FP4_TYPE_F8_E4M3FN, 2, {2, 4, 1, 1}}, {"u8", FP4_TYPE_U8, 4, {5, 1, 2, 3}},
    {"i8", FP4_TYPE_I8, 1, {9, 1, 1, 1}},            {"i16", FP4_TYPE_I16, 1, {3, 1, 1, 1}},
    {"i32", FP4_TYPE_I32, 1, {3, 1, 1, 1}},          {"i64", FP4_TYPE_I64, 1, {2, 1, 1, 1}},
    {"f64", FP4_TYPE_F64, 1, {2, 1, 1, 1}},
};
#define RT_NT ((int)(sizeof rt_tensors / sizeof rt_tensors[0]))

static uint64_t rt_size(const rt_tensor *t) {
    size_t row = 0;
    CHECK_OK(fp4_type_row_size(t->type, t->ne[0], &row));
    return row * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

typedef struct rt_arrays {
    uint8_t u8[5];
    int8_t i8[4];
    uint16_t u16[3];
    int16_t i16[3];
    uint32_t u32[6];
    int32_t i32[2];
    float f32[37];
    uint8_t b[4];
    uint64_t u64[2];
    int64_t i64[3];
    double f64[2];
} rt_arrays;

static const char *const rt_strs[] = {"", "tok", "a\0b", "\xe2\x96\x81the"};
static const uint64_t rt_lens[] = {0, 3, 3, 6};

static void rt_fill(rt_arrays *a, test_rng *r) {
    uint8_t *p = (uint8_t *)a;
    for (size_t i = 0; i < sizeof *a; i++) p[i] = (uint8_t)rng_u64(r);
    for (int i = 0; i < 4; i++) a->b[i] = (uint8_t)(rng_u64(r) & 1);
    for (int i = 0; i < 37; i++) a->f32[i] = rng_normal(r);
    a->f32[0] = -0.0f;
    a->f64[0] = NAN;
    a->f64[1] = 1e-310;
}

static void rt_write_kvs(fp4_gguf_writer *w, const rt_arrays *a) {
    CHECK_OK(fp4_gguf_writer_add_u8(w, "t.u8", 200, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i8(w, "t.i8", -7, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u16(w, "t.u16", 65000, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i16(w, "t.i16", -30000, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u32(w, "t.u32", 4000000000u, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i32(w, "t.i32", INT32_MIN, &gerr));
    CHECK_OK(fp4_gguf_writer_add_f32(w, "t.f32", -1.5e-3f, &gerr));
    CHECK_OK(fp4_gguf_writer_add_bool(w, "t.bool1", 1, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "general.architecture", "llama", 5, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u64(w, "t.u64", (1ull << 63) + 5, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i64(w, "t.i64", INT64_MIN, &gerr));
    CHECK_OK(fp4_gguf_writer_add_f64(w, "t.f64", 3.141592653589793, &gerr));
    CHECK_OK(fp4_gguf_writer_add_bool(w, "t.bool0", 0, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "t.str_nul", "a\0b", 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "t.str_empty", NULL, 0, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.u8", FP4_GGUF_UINT8, a->u8, 5, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.i8", FP4_GGUF_INT8, a->i8, 4, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.u16", FP4_GGUF_UINT16, a->u16, 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.i16", FP4_GGUF_INT16, a->i16, 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.u32", FP4_GGUF_UINT32, a->u32, 6, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.i32", FP4_GGUF_INT32, a->i32, 2, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.f32", FP4_GGUF_FLOAT32, a->f32, 37, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.bool", FP4_GGUF_BOOL, a->b, 4, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.u64", FP4_GGUF_UINT64, a->u64, 2, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.i64", FP4_GGUF_INT64, a->i64, 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.f64", FP4_GGUF_FLOAT64, a->f64, 2, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.empty", FP4_GGUF_FLOAT32, NULL, 0, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr_str(w, "a.str", rt_strs, rt_lens, 4, &gerr));
    const char *cstrs[] = {"x", "yy", ""};
    CHECK_OK(fp4_gguf_writer_add_arr_str(w, "a.cstr", cstrs, NULL, 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_arr_str(w, "a.str_empty", NULL, NULL, 0, &gerr));
}
#define RT_NKV 30

/* Each array: the stored bytes decode (little-endian) to the host values. */
static void rt_check_arr(const fp4_gguf *g, const char *key, fp4_gguf_type t, const void *want, uint64_t n) {
    int64_t k = fp4_gguf_key_index(g, key);
    const void *data = NULL;
    int64_t cnt = 0;
    CHECK_MSG(fp4_gguf_arr_type(g, k) == t, "%s", key);
    CHECK_MSG(fp4_gguf_get_arr(g, k, t, &data, &cnt) == FP4_OK && (uint64_t)cnt == n, "%s", key);
    size_t es = fp4_gguf_type_size(t);
    for (uint64_t i = 0; data && i < n; i++) {
        uint64_t v = 0, h = 0;
        for (size_t b = 0; b < es; b++) v |= (uint64_t)((const uint8_t *)data)[i * es + b] << (8 * b);
        if (es == 1) h = ((const uint8_t *)want)[i];
        if (es == 2) h = ((const uint16_t *)want)[i];
        if (es == 4) h = ((const uint32_t *)want)[i];
        if (es == 8) h = ((const uint64_t *)want)[i];
        CHECK_MSG(v == h, "%s[%llu]", key, (unsigned long long)i);
    }
    CHECK(fp4_gguf_get_arr(g, k, t == FP4_GGUF_INT8 ? FP4_GGUF_UINT8 : FP4_GGUF_INT8, &data, &cnt) ==
          FP4_ERR_DTYPE);
}

static void rt_check_scalars(const fp4_gguf *g) {
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    uint64_t u64; int64_t i64; float f32; double f64; int b; const char *s; uint64_t len;
    CHECK(fp4_gguf_get_u8(g, fp4_gguf_key_index(g, "t.u8"), &u8) == FP4_OK && u8 == 200);
    CHECK(fp4_gguf_get_i8(g, fp4_gguf_key_index(g, "t.i8"), &i8) == FP4_OK && i8 == -7);
    CHECK(fp4_gguf_get_u16(g, fp4_gguf_key_index(g, "t.u16"), &u16) == FP4_OK && u16 == 65000);
    CHECK(fp4_gguf_get_i16(g, fp4_gguf_key_index(g, "t.i16"), &i16) == FP4_OK && i16 == -30000);
    CHECK(fp4_gguf_get_u32(g, fp4_gguf_key_index(g, "t.u32"), &u32) == FP4_OK && u32 == 4000000000u);
    CHECK(fp4_gguf_get_i32(g, fp4_gguf_key_index(g, "t.i32"), &i32) == FP4_OK && i32 == INT32_MIN);
    CHECK(fp4_gguf_get_f32(g, fp4_gguf_key_index(g, "t.f32"), &f32) == FP4_OK &&
          f32_bits(f32) == f32_bits(-1.5e-3f));
    CHECK(fp4_gguf_get_u64(g, fp4_gguf_key_index(g, "t.u64"), &u64) == FP4_OK && u64 == (1ull << 63) + 5);
    CHECK(fp4_gguf_get_i64(g, fp4_gguf_key_index(g, "t.i64"), &i64) == FP4_OK && i64 == INT64_MIN);
    CHECK(fp4_gguf_get_f64(g, fp4_gguf_key_index(g, "t.f64"), &f64) == FP4_OK && f64 == 3.141592653589793);
    CHECK(fp4_gguf_get_bool(g, fp4_gguf_key_index(g, "t.bool1"), &b) == FP4_OK && b == 1);
    CHECK(fp4_gguf_get_bool(g, fp4_gguf_key_index(g, "t.bool0"), &b) == FP4_OK && b == 0);
    CHECK(fp4_gguf_get_str(g, fp4_gguf_key_index(g, "general.architecture"), &s, &len) == FP4_OK &&
          len == 5 && memcmp(s, "llama", 5) == 0);
    CHECK(fp4_gguf_get_str(g, fp4_gguf_key_index(g, "t.str_nul"), &s, &len) == FP4_OK && len == 3 &&
          memcmp(s, "a\0b", 3) == 0);
    CHECK(fp4_gguf_get_str(g, fp4_gguf_key_index(g, "t.str_empty"), &s, &len) == FP4_OK && len == 0);
    /* every getter refuses every other type: the PR #26690 class */
    int64_t k = fp4_gguf_key_index(g, "t.u32");
    CHECK(fp4_gguf_get_u8(g, k, &u8) == FP4_ERR_DTYPE && fp4_gguf_get_i32(g, k, &i32) == FP4_ERR_DTYPE);
    CHECK(fp4_gguf_get_u64(g, k, &u64) == FP4_ERR_DTYPE && fp4_gguf_get_f32(g, k, &f32) == FP4_ERR_DTYPE);
    CHECK(fp4_gguf_get_bool(g, k, &b) == FP4_ERR_DTYPE && fp4_gguf_get_str(g, k, &s, &len) == FP4_ERR_DTYPE);
    k = fp4_gguf_key_index(g, "t.str_nul");
    CHECK(fp4_gguf_get_u32(g, k, &u32) == FP4_ERR_DTYPE && fp4_gguf_get_f64(g, k, &f64) == FP4_ERR_DTYPE);
    CHECK(fp4_gguf_get_i8(g, k, &i8) == FP4_ERR_DTYPE && fp4_gguf_get_i16(g, k, &i16) == FP4_ERR_DTYPE);
    CHECK(fp4_gguf_get_u16(g, k, &u16) == FP4_ERR_DTYPE && fp4_gguf_get_i64(g, k, &i64) == FP4_ERR_DTYPE);
    /* missing key, index out of range, NULL output */
    CHECK(fp4_gguf_key_index(g, "nope") == -1 && fp4_gguf_get_u32(g, -1, &u32) == FP4_ERR_NOT_FOUND);
    CHECK(fp4_gguf_get_u32(g, fp4_gguf_n_kv(g), &u32) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_get_u32(g, 0, NULL) == FP4_ERR_INVALID_ARG &&
          fp4_gguf_get_u32(NULL, 0, &u32) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_key(g, -1) == NULL && fp4_gguf_key(g, fp4_gguf_n_kv(g)) == NULL);
    CHECK(fp4_gguf_kv_type(g, -1) == FP4_GGUF_TYPE_NONE &&
          fp4_gguf_arr_type(g, fp4_gguf_key_index(g, "t.u8")) == FP4_GGUF_TYPE_NONE);
}

static void rt_check_kvs(const fp4_gguf *g, const rt_arrays *a, uint32_t align) {
    int64_t base = align ? 1 : 0;
    CHECK_EQ_INT(fp4_gguf_n_kv(g), RT_NKV + base);
    if (align)
        CHECK(strcmp(fp4_gguf_key(g, 0), "general.alignment") == 0 &&
              fp4_gguf_kv_type(g, 0) == FP4_GGUF_UINT32);
    CHECK(strcmp(fp4_gguf_key(g, base), "t.u8") == 0 && fp4_gguf_kv_type(g, base) == FP4_GGUF_UINT8);
    CHECK(strcmp(fp4_gguf_key(g, base + RT_NKV - 1), "a.str_empty") == 0);
    CHECK(fp4_gguf_kv_type(g, base + RT_NKV - 1) == FP4_GGUF_ARRAY);
    for (int64_t i = 0; i < fp4_gguf_n_kv(g); i++) CHECK(fp4_gguf_key_index(g, fp4_gguf_key(g, i)) == i);
    rt_check_scalars(g);
    rt_check_arr(g, "a.u8", FP4_GGUF_UINT8, a->u8, 5);
    rt_check_arr(g, "a.i8", FP4_GGUF_INT8, a->i8, 4);
    rt_check_arr(g, "a.u16", FP4_GGUF_UINT16, a->u16, 3);
    rt_check_arr(g, "a.i16", FP4_GGUF_INT16, a->i16, 3);
    rt_check_arr(g, "a.u32", FP4_GGUF_UINT32, a->u32, 6);
    rt_check_arr(g, "a.i32", FP4_GGUF_INT32, a->i32, 2);
    rt_check_arr(g, "a.f32", FP4_GGUF_FLOAT32, a->f32, 37);
    rt_check_arr(g, "a.bool", FP4_GGUF_BOOL, a->b, 4);
    rt_check_arr(g, "a.u64", FP4_GGUF_UINT64, a->u64, 2);
    rt_check_arr(g, "a.i64", FP4_GGUF_INT64, a->i64, 3);
    rt_check_arr(g, "a.f64", FP4_GGUF_FLOAT64, a->f64, 2);
    rt_check_arr(g, "a.empty", FP4_GGUF_FLOAT32, NULL, 0);
    int64_t k = fp4_gguf_key_index(g, "a.str");
    int64_t n = 0;
    uint64_t len;
    const char *s;
    const void *data;
    CHECK(fp4_gguf_arr_type(g, k) == FP4_GGUF_STRING && fp4_gguf_get_arr_str_count(g, k, &n) == FP4_OK &&
          n == 4);
    for (int64_t j = 0; j < 4; j++)
        CHECK(fp4_gguf_get_arr_str(g, k, j, &s, &len) == FP4_OK && len == rt_lens[j] &&
              memcmp(s, rt_strs[j], len) == 0);
    CHECK(fp4_gguf_get_arr_str(g, k, 4, &s, &len) == FP4_ERR_INVALID_ARG &&
          fp4_gguf_get_arr_str(g, k, -1, &s, &len) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_get_arr(g, k, FP4_GGUF_STRING, &data, &n) == FP4_ERR_DTYPE);
    CHECK(fp4_gguf_get_arr_str(g, fp4_gguf_key_index(g, "a.u8"), 0, &s, &len) == FP4_ERR_DTYPE);
    k = fp4_gguf_key_index(g, "a.cstr");
    CHECK(fp4_gguf_get_arr_str(g, k, 1, &s, &len) == FP4_OK && len == 2 && memcmp(s, "yy", 2) == 0);
    CHECK(fp4_gguf_get_arr_str_count(g, fp4_gguf_key_index(g, "a.str_empty"), &n) == FP4_OK && n == 0);
}

static void rt_check_tensors(const fp4_gguf *g, uint8_t *const *data, uint32_t align) {
    CHECK_EQ_INT(fp4_gguf_n_tensors(g), RT_NT);
    uint64_t d = fp4_gguf_data_offset(g), off = 0;
    CHECK(d % align == 0);
    for (int i = 0; i < RT_NT; i++) {
        const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
        const rt_tensor *r = &rt_tensors[i];
        uint64_t n = rt_size(r);
        if (!t) { CHECK(t); continue; }
        CHECK_MSG(strcmp(t->name, r->name) == 0 && t->type == r->type && t->n_dims == r->n_dims, "%s",
                  r->name);
        CHECK(memcmp(t->ne, r->ne, sizeof t->ne) == 0 &&
              t->n_elements == r->ne[0] * r->ne[1] * r->ne[2] * r->ne[3]);
        CHECK_MSG(t->size == n && t->offset == d + off && t->offset % align == 0, "%s", r->name);
        CHECK(t->data && memcmp(t->data, data[i], n) == 0);
        CHECK(fp4_gguf_tensor_index(g, r->name) == i && fp4_gguf_find(g, r->name) == t);
        off += (n + align - 1) / align * align;
    }
    CHECK(fp4_gguf_file_size(g) == d + off);
    CHECK(fp4_gguf_tensor_at(g, -1) == NULL && fp4_gguf_tensor_at(g, RT_NT) == NULL);
    CHECK(fp4_gguf_tensor_index(g, "missing") == -1 && fp4_gguf_tensor_index(g, NULL) == -1);
    CHECK(fp4_gguf_find(g, "missing") == NULL && fp4_gguf_find(g, NULL) == NULL &&
          fp4_gguf_find(NULL, "x") == NULL);
}

static void test_roundtrip(uint32_t align) {
    test_rng r = {align + 1};
    rt_arrays a;
    rt_fill(&a, &r);
    uint8_t *data[RT_NT];
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    if (align) CHECK_OK(fp4_gguf_writer_set_alignment(w, align, &gerr));
    rt_write_kvs(w, &a);
    for (int i = 0; i < RT_NT; i++) {
        const rt_tensor *t = &rt_tensors[i];
        CHECK_OK(fp4_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &gerr));
        uint64_t n = rt_size(t);
        CHECK(fp4_gguf_writer_tensor_size(w, i) == n);
        data[i] = malloc(n);
        for (uint64_t k = 0; k < n; k++) data[i][k] = (uint8_t)rng_u64(&r);
    }
    const char *path = tmp("rt");
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    for (int i = 0; i < RT_NT; i++) {
        uint64_t n = rt_size(&rt_tensors[i]), h = n / 3;
        /* three chunks, one maybe empty */
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, data[i], h, &gerr));
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, data[i] + h, h, &gerr));
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, data[i] + 2 * h, n - 2 * h, &gerr));
    }
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    uint32_t al = align ? align : 32;
    fp4_gguf *g = NULL;
    fp4_error err;
    CHECK_OK(fp4_gguf_open(path, &g, &err));
    if (g) {
        CHECK(fp4_gguf_version(g) == 3 && fp4_gguf_alignment(g) == al);
        rt_check_kvs(g, &a, align);
        rt_check_tensors(g, data, al);
    }
    fp4_gguf_close(g);
    size_t n = 0;
    uint8_t *bytes = check_slurp(path, &n);
    g = NULL;
    CHECK_OK(fp4_gguf_open_buffer(bytes, n, &g, &err));
    if (g) rt_check_tensors(g, data, al);
    fp4_gguf_close(g);
    free(bytes);
    remove(path);
    for (int i = 0; i < RT_NT; i++) free(data[i]);
}


/* Many keys and tensors: every name finds itself (sorted index), in file order. */
static void test_many(void) {
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    char name[64];
    int ok = 1;
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "k.%d", (i * 7919) % 3000);
        ok &= fp4_gguf_writer_add_i32(w, name, i, &gerr) == FP4_OK;
    }
    int64_t ne[1] = {1};
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "blk.%d.w", 1499 - i);
        ok &= fp4_gguf_writer_add_tensor(w, name, FP4_TYPE_F32, 1, ne, &gerr) == FP4_OK;
    }
    CHECK(ok);
    CHECK(fp4_gguf_writer_add_i32(w, "k.1234", 0, &gerr) == FP4_ERR_DUPLICATE);
    CHECK(fp4_gguf_writer_add_tensor(w, "blk.77.w", FP4_TYPE_F32, 1, ne, &gerr) == FP4_ERR_DUPLICATE);
    const char *path = tmp("many");
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    for (int i = 0; i < 1500; i++)
        ok &= fp4_gguf_writer_write_tensor_data(w, i, &(float){(float)i}, 4, &gerr) == FP4_OK;
    CHECK(ok);
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(path, &g, NULL));
    CHECK(fp4_gguf_n_kv(g) == 3000 && fp4_gguf_n_tensors(g) == 1500);
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "k.%d", (i * 7919) % 3000);
        int32_t v = -1;
        ok &= fp4_gguf_key_index(g, name) == i && fp4_gguf_get_i32(g, i, &v) == FP4_OK && v == i;
    }
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "blk.%d.w", 1499 - i);
        const fp4_gguf_tensor *t = fp4_gguf_find(g, name);
        float f = -1;
        if (t) memcpy(&f, t->data, 4);
        ok &= t && fp4_gguf_tensor_index(g, name) == i && f == (float)i;
    }
    CHECK(ok);
    CHECK(fp4_gguf_key_index(g, "k.3000") == -1 && fp4_gguf_key_index(g, "k.") == -1 &&
          fp4_gguf_key_index(g, "") == -1);
    CHECK(fp4_gguf_tensor_index(g, "blk.1500.w") == -1 && fp4_gguf_tensor_index(g, "blk.1.") == -1);
    fp4_gguf_close(g);
    remove(path);
}
/* ------------------------------------------------------------------------------------------ */
static int file_exists(const char *p) { return access(p, F_OK) == 0; }

static const char *werr(const fp4_gguf_writer *w) { (void)w; return gerr.rule; } /* the last call's error */

static void test_writer_misuse(void) {
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u32(w, "a.b", 1, &gerr));
    CHECK(fp4_gguf_writer_add_u8(w, "a.b", 1, &gerr) == FP4_ERR_DUPLICATE &&
          strcmp(werr(w), "gguf.kv.dup_key") == 0);
    CHECK(fp4_gguf_writer_add_u8(w, "", 1, &gerr) == FP4_ERR_FORMAT &&
          strcmp(werr(w), "gguf.kv.key_empty") == 0);
    CHECK(fp4_gguf_writer_add_u8(w, "a b", 1, &gerr) == FP4_ERR_FORMAT &&
          strcmp(werr(w), "gguf.kv.key_chars") == 0);
    CHECK(fp4_gguf_writer_add_u8(w, NULL, 1, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_add_bool(w, "a.c", 2, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "gguf.bool") == 0);
    uint8_t bad_bools[2] = {1, 3};
    CHECK(fp4_gguf_writer_add_arr(w, "a.d", FP4_GGUF_BOOL, bad_bools, 2, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_add_arr(w, "a.d", FP4_GGUF_STRING, bad_bools, 2, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_add_arr(w, "a.d", FP4_GGUF_ARRAY, bad_bools, 2, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_add_str(w, "a.e", NULL, 3, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_set_alignment(w, 12, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "gguf.alignment") == 0);
    CHECK(fp4_gguf_writer_set_alignment(w, 4, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_gguf_writer_add_u32(w, "general.alignment", 16, &gerr)); /* routed to set_alignment */
    CHECK(fp4_gguf_writer_set_alignment(w, 64, &gerr) == FP4_ERR_DUPLICATE);
    CHECK_OK(fp4_gguf_writer_add_arr(w, "a.d", FP4_GGUF_BOOL, (const uint8_t[]){0, 1}, 2, &gerr));
    int64_t ne[2] = {64, 2};
    CHECK_OK(fp4_gguf_writer_add_tensor(w, "t0", FP4_TYPE_GGML_NVFP4, 2, ne, &gerr));
    CHECK(fp4_gguf_writer_add_tensor(w, "t0", FP4_TYPE_F32, 1, ne, &gerr) == FP4_ERR_DUPLICATE &&
          strcmp(werr(w), "gguf.tensor.dup") == 0);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_Q4_K, 1, ne, &gerr) == FP4_ERR_SHAPE &&
          strcmp(werr(w), "gguf.tensor.block") == 0 && strcmp(gerr.tensor, "t1") == 0);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", (fp4_type)2, 1, ne, &gerr) == FP4_ERR_UNSUPPORTED);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_F32, 0, ne, &gerr) == FP4_ERR_FORMAT);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_F32, 5, ne, &gerr) == FP4_ERR_FORMAT);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_F32, 1, (const int64_t[]){-1}, &gerr) ==
          FP4_ERR_SHAPE);
    CHECK(fp4_gguf_writer_add_tensor(w, "", FP4_TYPE_F32, 1, ne, &gerr) == FP4_ERR_FORMAT);
    CHECK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_F64, 1, (const int64_t[]){INT64_MAX / 8}, &gerr) ==
          FP4_ERR_OVERFLOW);
    CHECK(fp4_gguf_writer_set_alignment(w, 64, &gerr) == FP4_ERR_INVALID_ARG); /* after a tensor */
    CHECK_OK(fp4_gguf_writer_add_tensor(w, "t1", FP4_TYPE_F32, 1, (const int64_t[]){3}, &gerr));
    /* before the header */
    CHECK(fp4_gguf_writer_write_tensor_data(w, 0, "x", 1, &gerr) == FP4_ERR_INVALID_ARG);
    const char *path = tmp("misuse");
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    CHECK(fp4_gguf_writer_add_u8(w, "late.key", 1, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "writer.state") == 0);
    CHECK(fp4_gguf_writer_add_tensor(w, "late", FP4_TYPE_F32, 1, ne, &gerr) == FP4_ERR_INVALID_ARG);
    uint8_t buf[200] = {0};
    CHECK(fp4_gguf_writer_write_tensor_data(w, 1, buf, 12, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "writer.order") == 0);
    CHECK(fp4_gguf_writer_write_tensor_data(w, 0, buf, 73, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "writer.size") == 0);
    CHECK_OK(fp4_gguf_writer_write_tensor_data(w, 0, buf, 72, &gerr));
    CHECK(fp4_gguf_writer_finish(w, &gerr) == FP4_ERR_INVALID_ARG &&
          strcmp(werr(w), "writer.incomplete") == 0);
    CHECK(!file_exists(path)); /* a failed finish leaves no partial file */
    fp4_gguf_writer_free(w);

    /* the refused calls above left no trace: a clean file with the accepted content */
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u32(w, "a.b", 1, &gerr));
    CHECK(fp4_gguf_writer_add_arr(w, "a.d", FP4_GGUF_BOOL, bad_bools, 2, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_writer_add_u8(w, "a.b", 9, &gerr) == FP4_ERR_DUPLICATE);
    CHECK(fp4_gguf_writer_add_arr_str(w, "a.s", (const char *const[]){"x", NULL}, (const uint64_t[]){1, 5},
                                      2, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_gguf_writer_add_str(w, "a.s", "ok", 2, &gerr));
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    CHECK(fp4_gguf_writer_finish(w, &gerr) == FP4_ERR_INVALID_ARG);
    fp4_gguf_writer_free(w);
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(path, &g, NULL));
    uint32_t v = 0;
    CHECK(fp4_gguf_n_kv(g) == 2 && fp4_gguf_get_u32(g, 0, &v) == FP4_OK && v == 1 &&
          fp4_gguf_n_tensors(g) == 0);
    fp4_gguf_close(g);
    remove(path);

    /* an unfinished writer works under a temporary name beside the target, never on the target;
     * freeing it removes that name and leaves the target as it was */
    FILE *old = fopen(path, "wb");
    CHECK(old && fwrite("old bytes", 1, 9, old) == 9);
    if (old) fclose(old);
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_tensor(w, "t", FP4_TYPE_F32, 1, ne, &gerr));
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    CHECK(file_equals(path, "old bytes", 9) && tmp_names_beside(path) == 1);
    fp4_gguf_writer_free(w);
    CHECK(file_equals(path, "old bytes", 9) && tmp_names_beside(path) == 0);
    remove(path);
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    /* a parent that cannot be created (a component is a file): refused */
    CHECK(fp4_gguf_writer_write_header(w, "/dev/null/x.gguf", &gerr) == FP4_ERR_IO &&
          strcmp(werr(w), "out.io") == 0);
    fp4_gguf_writer_free(w);
    fp4_gguf_writer_free(NULL);
    fp4_gguf_close(NULL);
    CHECK(fp4_gguf_writer_create(NULL, &gerr) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_n_kv(NULL) == 0 && fp4_gguf_n_tensors(NULL) == 0 && fp4_gguf_tensor_at(NULL, 0) == NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Interop with ggml's GGUF code (libggml-base.so, dlopen; absent library = failure)           */

typedef struct gg_params { bool no_alloc; void **ctx; } gg_params; /* struct gguf_init_params */

typedef struct gg_lib {
    void *h;
    void *(*init_from_file)(const char *fname, gg_params params);
    void (*free_ctx)(void *ctx);
    int64_t (*n_tensors)(const void *ctx);
    int64_t (*n_kv)(const void *ctx);
    int64_t (*find_key)(const void *ctx, const char *key);
    const char *(*get_key)(const void *ctx, int64_t id);
    int (*get_kv_type)(const void *ctx, int64_t id);
    int (*get_arr_type)(const void *ctx, int64_t id);
    uint32_t (*get_val_u32)(const void *ctx, int64_t id);
    int32_t (*get_val_i32)(const void *ctx, int64_t id);
    float (*get_val_f32)(const void *ctx, int64_t id);
    uint64_t (*get_val_u64)(const void *ctx, int64_t id);
    bool (*get_val_bool)(const void *ctx, int64_t id);
    const char *(*get_val_str)(const void *ctx, int64_t id);
    size_t (*get_arr_n)(const void *ctx, int64_t id);
    const void *(*get_arr_data)(const void *ctx, int64_t id);
    const char *(*get_arr_str)(const void *ctx, int64_t id, size_t i);
    uint32_t (*get_version)(const void *ctx);
    size_t (*get_alignment)(const void *ctx);
    size_t (*get_data_offset)(const void *ctx);
    const char *(*get_tensor_name)(const void *ctx, int64_t id);
    size_t (*get_tensor_offset)(const void *ctx, int64_t id);
    int (*get_tensor_type)(const void *ctx, int64_t id);
    size_t (*get_tensor_size)(const void *ctx, int64_t id);
    void *(*init_empty)(void);
    void (*set_val_u8)(void *ctx, const char *key, uint8_t v);
    void (*set_val_i32)(void *ctx, const char *key, int32_t v);
    void (*set_val_f32)(void *ctx, const char *key, float v);
    void (*set_val_u64)(void *ctx, const char *key, uint64_t v);
    void (*set_val_f64)(void *ctx, const char *key, double v);
    void (*set_val_bool)(void *ctx, const char *key, bool v);
    void (*set_val_str)(void *ctx, const char *key, const char *v);
    void (*set_arr_data)(void *ctx, const char *key, int type, const void *data, size_t n);
    void (*set_arr_str)(void *ctx, const char *key, const char **data, size_t n);
    bool (*write_to_file)(const void *ctx, const char *fname, bool only_meta);
} gg_lib;

#define GG_SYM(f, s) {#s, offsetof(gg_lib, f)}
static const struct { const char *name; size_t off;
} gg_syms[] = {
    GG_SYM(init_from_file, gguf_init_from_file),
    GG_SYM(free_ctx, gguf_free),
    GG_SYM(n_tensors, gguf_get_n_tensors),
    GG_SYM(n_kv, gguf_get_n_kv),
    GG_SYM(find_key, gguf_find_key),
    GG_SYM(get_key, gguf_get_key),
    GG_SYM(get_kv_type, gguf_get_kv_type),
    GG_SYM(get_arr_type, gguf_get_arr_type),
    GG_SYM(get_val_u32, gguf_get_val_u32),
    GG_SYM(get_val_i32, gguf_get_val_i32),
    GG_SYM(get_val_f32, gguf_get_val_f32),
    GG_SYM(get_val_u64, gguf_get_val_u64),
    GG_SYM(get_val_bool, gguf_get_val_bool),
    GG_SYM(get_val_str, gguf_get_val_str),
    GG_SYM(get_arr_n, gguf_get_arr_n),
    GG_SYM(get_arr_data, gguf_get_arr_data),
    GG_SYM(get_arr_str, gguf_get_arr_str),
    GG_SYM(get_version, gguf_get_version),
    GG_SYM(get_alignment, gguf_get_alignment),
    GG_SYM(get_data_offset, gguf_get_data_offset),
    GG_SYM(get_tensor_name, gguf_get_tensor_name),
    GG_SYM(get_tensor_offset, gguf_get_tensor_offset),
    GG_SYM(get_tensor_type, gguf_get_tensor_type),
    GG_SYM(get_tensor_size, gguf_get_tensor_size),
    GG_SYM(init_empty, gguf_init_empty),
    GG_SYM(set_val_u8, gguf_set_val_u8),
    GG_SYM(set_val_i32, gguf_set_val_i32),
    GG_SYM(set_val_f32, gguf_set_val_f32),
    GG_SYM(set_val_u64, gguf_set_val_u64),
    GG_SYM(set_val_f64, gguf_set_val_f64),
    GG_SYM(set_val_bool, gguf_set_val_bool),
    GG_SYM(set_val_str, gguf_set_val_str),
    GG_SYM(set_arr_data, gguf_set_arr_data),
    GG_SYM(set_arr_str, gguf_set_arr_str),
    GG_SYM(write_to_file, gguf_write_to_file),
};

static int gg_open(gg_lib *L) {
    const char *dir = getenv("FP4_GGML_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/libggml-base.so",
             dir && *dir ? dir : "third_party/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
    memset(L, 0, sizeof *L);
    L->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(L->h != NULL, "cannot open ggml (%s): %s; run `make oracle`", path, dlerror());
    if (!L->h) return 0;
    for (size_t i = 0; i < sizeof gg_syms / sizeof gg_syms[0]; i++) {
        void *f = dlsym(L->h, gg_syms[i].name);
        CHECK_MSG(f != NULL, "ggml lacks %s", gg_syms[i].name);
        if (!f) return 0;
        memcpy((char *)L + gg_syms[i].off, &f, sizeof f);
    }
    return 1;
}

static const rt_tensor gg_tensors[] = {
    {"token_embd.weight", FP4_TYPE_F32, 2, {8, 4, 1, 1}},
    {"blk.0.attn_q.weight", FP4_TYPE_F16, 2, {16, 3, 1, 1}},
    {"blk.0.ffn_up.weight", FP4_TYPE_GGML_NVFP4, 2, {128, 2, 1, 1}},
    {"blk.0.ffn_up.scale", FP4_TYPE_F32, 1, {1, 1, 1, 1}},
    {"blk.0.ffn_down.weight", FP4_TYPE_Q4_K, 3, {256, 2, 2, 1}},
};
#define GG_NT 5

/* ggml opens a file our writer produced and sees the same keys, values and tensors. */
static void gg_reads_ours(const gg_lib *L, uint32_t align) {
    test_rng r = {77 + align};
    rt_arrays a;
    rt_fill(&a, &r);
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    if (align) CHECK_OK(fp4_gguf_writer_set_alignment(w, align, &gerr));
    rt_write_kvs(w, &a);
    uint8_t *data[GG_NT];
    for (int i = 0; i < GG_NT; i++) {
        CHECK_OK(fp4_gguf_writer_add_tensor(w, gg_tensors[i].name, gg_tensors[i].type, gg_tensors[i].n_dims,
                                            gg_tensors[i].ne, &gerr));
        uint64_t n = rt_size(&gg_tensors[i]);
        data[i] = malloc(n);
        for (uint64_t k = 0; k < n; k++) data[i][k] = (uint8_t)rng_u64(&r);
    }
    const char *path = tmp("ggml_in");
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    for (int i = 0; i < GG_NT; i++)
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, data[i], rt_size(&gg_tensors[i]), &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    fp4_gguf *g = NULL;
    CHECK_OK(fp4_gguf_open(path, &g, NULL));
    void *ctx = L->init_from_file(path, (gg_params){true, NULL});
    CHECK_MSG(ctx != NULL, "ggml refused our file (alignment %u)", align);
    if (ctx && g) {
        CHECK(L->get_version(ctx) == 3 && L->get_alignment(ctx) == fp4_gguf_alignment(g));
        CHECK(L->get_data_offset(ctx) == fp4_gguf_data_offset(g));
        CHECK_EQ_INT(L->n_tensors(ctx), GG_NT);
        CHECK_EQ_INT(L->n_kv(ctx), fp4_gguf_n_kv(g));
        for (int64_t i = 0; i < fp4_gguf_n_kv(g) && i < L->n_kv(ctx); i++) {
            CHECK_MSG(strcmp(L->get_key(ctx, i), fp4_gguf_key(g, i)) == 0, "key %lld", (long long)i);
            CHECK(L->get_kv_type(ctx, i) == (int)fp4_gguf_kv_type(g, i));
        }
        uint32_t u32;
        CHECK(fp4_gguf_get_u32(g, fp4_gguf_key_index(g, "t.u32"), &u32) == FP4_OK &&
              L->get_val_u32(ctx, L->find_key(ctx, "t.u32")) == u32);
        CHECK(L->get_val_i32(ctx, L->find_key(ctx, "t.i32")) == INT32_MIN);
        CHECK(f32_bits(L->get_val_f32(ctx, L->find_key(ctx, "t.f32"))) == f32_bits(-1.5e-3f));
        CHECK(L->get_val_u64(ctx, L->find_key(ctx, "t.u64")) == (1ull << 63) + 5);
        CHECK(L->get_val_bool(ctx, L->find_key(ctx, "t.bool1")) == true);
        CHECK(strcmp(L->get_val_str(ctx, L->find_key(ctx, "general.architecture")), "llama") == 0);
        int64_t k = L->find_key(ctx, "a.f32");
        CHECK(L->get_arr_type(ctx, k) == FP4_GGUF_FLOAT32 && L->get_arr_n(ctx, k) == 37 &&
              memcmp(L->get_arr_data(ctx, k), a.f32, sizeof a.f32) == 0);
        k = L->find_key(ctx, "a.cstr");
        CHECK(L->get_arr_n(ctx, k) == 3 && strcmp(L->get_arr_str(ctx, k, 1), "yy") == 0);
        for (int i = 0; i < GG_NT; i++) {
            const fp4_gguf_tensor *t = fp4_gguf_tensor_at(g, i);
            CHECK_MSG(strcmp(L->get_tensor_name(ctx, i), t->name) == 0, "tensor %d", i);
            CHECK(L->get_tensor_type(ctx, i) == (int)t->type && L->get_tensor_size(ctx, i) == t->size);
            CHECK(L->get_tensor_offset(ctx, i) == t->offset - fp4_gguf_data_offset(g));
            CHECK(memcmp(t->data, data[i], t->size) == 0);
        }
    }
    if (ctx) L->free_ctx(ctx);
    fp4_gguf_close(g);
    remove(path);
    for (int i = 0; i < GG_NT; i++) free(data[i]);
}

/* We open a file ggml's writer produced (metadata only: its tensors need a ggml context). */
static void gg_writes_ours_reads(const gg_lib *L) {
    void *ctx = L->init_empty();
    CHECK(ctx != NULL);
    if (!ctx) return;
    L->set_val_str(ctx, "general.architecture", "llama");
    L->set_val_u8(ctx, "x.u8", 9);
    L->set_val_i32(ctx, "x.i32", -12345);
    L->set_val_f32(ctx, "x.f32", 0.25f);
    L->set_val_u64(ctx, "x.u64", 1ull << 40);
    L->set_val_f64(ctx, "x.f64", -2.5);
    L->set_val_bool(ctx, "x.bool", true);
    float f[3] = {1.0f, -0.0f, 3.5f};
    L->set_arr_data(ctx, "x.arr", FP4_GGUF_FLOAT32, f, 3);
    const char *s[3] = {"<s>", "", "\xe2\x96\x81hi"};
    L->set_arr_str(ctx, "x.toks", s, 3);
    const char *path = tmp("ggml_out");
    CHECK(L->write_to_file(ctx, path, false));
    L->free_ctx(ctx);
    fp4_gguf *g = NULL;
    fp4_error err;
    fp4_status st = fp4_gguf_open(path, &g, &err);
    CHECK_MSG(st == FP4_OK, "ggml's file refused: %s [%s] %s", fp4_status_str(st), err.rule, err.msg);
    if (g) {
        uint8_t u8;
        int32_t i32;
        float f32;
        uint64_t u64, n;
        double f64;
        int b;
        const char *str;
        const void *d;
        CHECK(fp4_gguf_n_kv(g) == 9 && fp4_gguf_n_tensors(g) == 0);
        CHECK(fp4_gguf_get_u8(g, fp4_gguf_key_index(g, "x.u8"), &u8) == FP4_OK && u8 == 9);
        CHECK(fp4_gguf_get_i32(g, fp4_gguf_key_index(g, "x.i32"), &i32) == FP4_OK && i32 == -12345);
        CHECK(fp4_gguf_get_f32(g, fp4_gguf_key_index(g, "x.f32"), &f32) == FP4_OK && f32 == 0.25f);
        CHECK(fp4_gguf_get_u64(g, fp4_gguf_key_index(g, "x.u64"), &u64) == FP4_OK && u64 == 1ull << 40);
        CHECK(fp4_gguf_get_f64(g, fp4_gguf_key_index(g, "x.f64"), &f64) == FP4_OK && f64 == -2.5);
        CHECK(fp4_gguf_get_bool(g, fp4_gguf_key_index(g, "x.bool"), &b) == FP4_OK && b == 1);
        int64_t cnt = 0;
        CHECK(fp4_gguf_get_arr(g, fp4_gguf_key_index(g, "x.arr"), FP4_GGUF_FLOAT32, &d, &cnt) == FP4_OK &&
              cnt == 3 && memcmp(d, f, sizeof f) == 0);
        int64_t k = fp4_gguf_key_index(g, "x.toks");
        for (int64_t j = 0; j < 3; j++)
            CHECK(fp4_gguf_get_arr_str(g, k, j, &str, &n) == FP4_OK && n == strlen(s[j]) &&
                  memcmp(str, s[j], n) == 0);
    }
    fp4_gguf_close(g);
    remove(path);
}

static void test_ggml_interop(void) {
    gg_lib L;
    if (!gg_open(&L)) return;
    gg_reads_ours(&L, 0);
    gg_reads_ours(&L, 64);
    gg_reads_ours(&L, 8);
    gg_writes_ours_reads(&L);
    dlclose(L.h);
}

int main(void) {
    test_types();
    test_roundtrip(0);
    test_roundtrip(8);
    test_roundtrip(32);
    test_roundtrip(64);
    test_many();
    test_writer_misuse();
    test_ggml_interop();
    return check_report();
}
