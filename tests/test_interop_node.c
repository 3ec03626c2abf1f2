/* test_interop_node.c — Hugging Face's own GGUF parser (npm @huggingface/gguf, pinned in the
 * Makefile, run with node) reads every metadata value and tensor info of a GGUF fp4lane writes,
 * including fp4lane's NVFP4 type ids, and sees what fp4lane's reader sees. The test fails (never
 * skips) when node or the package is missing. */
#include "check.h"
#include "fp4lane_io.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static fp4_error gerr; /* filled by the GGUF writer calls (their fp4_error *err) */

static char *run(const char *cmd) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, p)) > 0) n += k;
    int rc = pclose(p);
    if (buf) buf[n] = 0;
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int main(void) {
    const char *mod = getenv("FP4_HFGGUF");
    char path[512];
    snprintf(path, sizeof path, "%s/fp4lane-hfgguf-%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "fp4lane.weight_precision", "nvfp4", 5, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "fp4lane.activation_precision", "a16", 3, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u8(w, "t.u8", 200, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i8(w, "t.i8", -100, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u16(w, "t.u16", 60000, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i16(w, "t.i16", -30000, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u32(w, "t.u32", 4000000000u, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i32(w, "t.i32", -2000000000, &gerr));
    CHECK_OK(fp4_gguf_writer_add_u64(w, "t.u64", 1ull << 52, &gerr));
    CHECK_OK(fp4_gguf_writer_add_i64(w, "t.i64", -(1ll << 52), &gerr));
    CHECK_OK(fp4_gguf_writer_add_f32(w, "t.f32", 0.1f, &gerr));
    CHECK_OK(fp4_gguf_writer_add_f64(w, "t.f64", -2.5e-300, &gerr));
    CHECK_OK(fp4_gguf_writer_add_bool(w, "t.bool", 1, &gerr));
    const uint32_t arr[3] = {1, 2, 3};
    CHECK_OK(fp4_gguf_writer_add_arr(w, "t.arr_u32", FP4_GGUF_UINT32, arr, 3, &gerr));
    const char *strs[2] = {"alpha", "beta"};
    CHECK_OK(fp4_gguf_writer_add_arr_str(w, "t.arr_str", strs, NULL, 2, &gerr));
    static const struct { const char *name; fp4_type type; int64_t ne0, ne1; } t[] = {
        {"w.weight", FP4_TYPE_NVFP4_E2M1, 64, 4}, {"w.weight.nvfp4_scale", FP4_TYPE_F8_E4M3FN, 4, 4},
        {"w.weight.nvfp4_scale2", FP4_TYPE_F32, 1, 1}, {"e.weight", FP4_TYPE_BF16, 32, 8},
        {"g.weight", FP4_TYPE_GGML_NVFP4, 128, 2}, {"k.weight", FP4_TYPE_Q4_K, 256, 2}};
    const int nt = (int)(sizeof t / sizeof t[0]);
    for (int i = 0; i < nt; i++) {
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        CHECK_OK(fp4_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].ne1 > 1 ? 2 : 1, ne, &gerr));
    }
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    static uint8_t zero[4096];
    for (int i = 0; i < nt; i++)
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, zero, fp4_gguf_writer_tensor_size(w, i), &gerr));
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);

    char cmd[2048];
    snprintf(cmd, sizeof cmd, "node tests/interop/gguf_meta.mjs '%s' '%s'", mod ? mod : "(FP4_HFGGUF unset)",
             path);
    char *out = run(cmd);
    CHECK_MSG(out != NULL, "node / @huggingface/gguf failed (run `make oracle`): %s", cmd);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    CHECK(j != NULL);
    fp4_gguf *g = NULL;
    fp4_error e;
    CHECK_OK(fp4_gguf_open(path, &g, &e));
    if (j && g) {
        json_t *md = json_object_get(j, "metadata"), *ts = json_object_get(j, "tensors");
        CHECK(json_integer_value(json_object_get(md, "version")) == 3);
        CHECK(json_integer_value(json_object_get(md, "kv_count")) == fp4_gguf_n_kv(g));
        CHECK(json_integer_value(json_object_get(md, "tensor_count")) == nt);
        CHECK(!strcmp(json_string_value(json_object_get(md, "fp4lane.weight_precision")), "nvfp4"));
        CHECK(json_number_value(json_object_get(md, "t.u8")) == 200 &&
              json_number_value(json_object_get(md, "t.i8")) == -100);
        CHECK(json_number_value(json_object_get(md, "t.u16")) == 60000 &&
              json_number_value(json_object_get(md, "t.i16")) == -30000);
        CHECK(json_number_value(json_object_get(md, "t.u32")) == 4000000000.0);
        CHECK(json_number_value(json_object_get(md, "t.i32")) == -2000000000.0);
        CHECK(json_number_value(json_object_get(md, "t.u64")) == ldexp(1, 52));
        CHECK(json_number_value(json_object_get(md, "t.i64")) == -ldexp(1, 52));
        CHECK((float)json_number_value(json_object_get(md, "t.f32")) == 0.1f);
        CHECK(json_number_value(json_object_get(md, "t.f64")) == -2.5e-300);
        CHECK(json_is_true(json_object_get(md, "t.bool")));
        json_t *a = json_object_get(md, "t.arr_u32"), *s = json_object_get(md, "t.arr_str");
        CHECK(json_array_size(a) == 3 && json_integer_value(json_array_get(a, 2)) == 3);
        CHECK(json_array_size(s) == 2 && !strcmp(json_string_value(json_array_get(s, 1)), "beta"));
        CHECK(json_array_size(ts) == (size_t)nt);
        for (int i = 0; i < nt && i < (int)json_array_size(ts); i++) {
            json_t *x = json_array_get(ts, (size_t)i);
            const fp4_gguf_tensor *gt = fp4_gguf_tensor_at(g, i);
            CHECK(!strcmp(json_string_value(json_object_get(x, "name")), gt->name));
            CHECK(json_integer_value(json_object_get(x, "dtype")) == (json_int_t)gt->type);
            json_t *sh = json_object_get(x, "shape");
            CHECK((int)json_array_size(sh) == gt->n_dims &&
                  json_integer_value(json_array_get(sh, 0)) == gt->ne[0]);
            CHECK((uint64_t)json_integer_value(json_object_get(x, "offset")) ==
                  gt->offset - fp4_gguf_data_offset(g));
        }
    }
    json_decref(j);
    free(out);
    fp4_gguf_close(g);
    unlink(path);
    return check_report();
}
