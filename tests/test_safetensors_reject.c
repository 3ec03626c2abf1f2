/* test_safetensors_reject.c — every refusal of the safetensors reader and the HF directory
 * (reliability.md §4.2 items 1–19 and more), each matched by its exact rule string and status,
 * each next to valid twins that must open. Files are built in memory by a tiny builder. */
#include "check.h"
#include "fp4lane_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t buf[1 << 16];

/* [u64 n_field][hdr bytes][data_len zero bytes] into buf; returns the size */
static size_t build_raw(uint64_t n_field, const char *hdr, size_t hdr_len, size_t data_len) {
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n_field >> (8 * i));
    memcpy(buf + 8, hdr, hdr_len);
    memset(buf + 8 + hdr_len, 0, data_len);
    return 8 + hdr_len + data_len;
}
static size_t build(const char *hdr, size_t data_len) {
    return build_raw(strlen(hdr), hdr, strlen(hdr), data_len);
}

#define ENT(name, dt, shape, off)                                                                            \
    "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" off "}"
#define ONE(name, dt, shape, off) "{" ENT(name, dt, shape, off) "}"

static void expect_fail(const char *what, size_t size, fp4_status code, const char *rule,
                        const char *tensor) {
    fp4_st *st = NULL;
    fp4_error err;
    fp4_status s = fp4_st_open_buffer(buf, size, &st, &err);
    CHECK_MSG(s == code && st == NULL && strcmp(err.rule, rule) == 0 && err.code == code,
              "%s: got %s / \"%s\" (%s), want %s / \"%s\"", what, fp4_status_str(s), err.rule, err.msg,
              fp4_status_str(code), rule);
    if (tensor)
        CHECK_MSG(strcmp(err.tensor, tensor) == 0, "%s: tensor \"%s\", want \"%s\"", what, err.tensor,
                  tensor);
    fp4_st_close(st);
}

static void expect_ok(const char *what, size_t size, size_t n_tensors) {
    fp4_st *st = NULL;
    fp4_error err;
    fp4_status s = fp4_st_open_buffer(buf, size, &st, &err);
    CHECK_MSG(s == FP4_OK, "%s: valid twin refused: %s (%s)", what, err.rule, err.msg);
    CHECK_EQ_INT(fp4_st_n_tensors(st), n_tensors);
    fp4_st_close(st);
}

typedef struct rcase {
    const char *what, *hdr;
    size_t data;
    fp4_status code;
    const char *rule, *tensor;
} rcase;

static const rcase cases[] = {
    /* 4: header start */
    {"not an object: array", "[]", 0, FP4_ERR_FORMAT, "st.not_object", NULL},
    {"not an object: string", "\"x\"", 0, FP4_ERR_FORMAT, "st.not_object", NULL},
    {"not an object: all whitespace", "        ", 0, FP4_ERR_FORMAT, "st.not_object", NULL},
    {"not an object: garbage", "  x{}", 0, FP4_ERR_FORMAT, "st.not_object", NULL},
    {"BOM", "\xef\xbb\xbf{}", 0, FP4_ERR_FORMAT, "st.bom", NULL},
    {"invalid UTF-8 in a name", "{\"\xff\":1}", 0, FP4_ERR_FORMAT, "st.utf8", NULL},
    {"overlong UTF-8", "{\"\xc0\xaf\":1}", 0, FP4_ERR_FORMAT, "st.utf8", NULL},
    {"UTF-8 surrogate", "{\"\xed\xa0\x80\":1}", 0, FP4_ERR_FORMAT, "st.utf8", NULL},
    /* 5: JSON */
    {"truncated JSON", "{\"a\":{\"dtype\":\"F32\"", 0, FP4_ERR_FORMAT, "st.json", NULL},
    {"invalid JSON", "{a:1}", 0, FP4_ERR_FORMAT, "st.json", NULL},
    {"trailing comma", "{\"__metadata__\":{},}", 0, FP4_ERR_FORMAT, "st.json", NULL},
    {"trailing bytes in header", "{}  x", 0, FP4_ERR_FORMAT, "st.trailing", NULL},
    {"second object in header", "{}{}", 0, FP4_ERR_FORMAT, "st.trailing", NULL},
    {"nesting too deep", "{\"a\":{\"shape\":[[1]]}}", 0, FP4_ERR_LIMIT, "st.depth", NULL},
    {"nesting far too deep", "{\"a\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}", 0, FP4_ERR_LIMIT, "st.depth",
     NULL},
    {"integer beyond int64", ONE("a", "U8", "[2,18446744073709551614]", "[0,0]"), 0, FP4_ERR_FORMAT,
     "st.number", NULL},
    /* 6: duplicates */
    {"duplicate tensor", "{" ENT("a", "U8", "[1]", "[0,1]") "," ENT("a", "U8", "[1]", "[1,2]") "}", 2,
     FP4_ERR_DUPLICATE, "st.dup", NULL},
    {"duplicate field", "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     FP4_ERR_DUPLICATE, "st.dup", NULL},
    {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, FP4_ERR_DUPLICATE, "st.dup",
     NULL},
    /* 7: entry fields */
    {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, FP4_ERR_FORMAT, "st.entry.fields",
     "a"},
    {"missing shape", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, FP4_ERR_FORMAT,
     "st.entry.fields", "a"},
    {"missing data_offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, FP4_ERR_FORMAT, "st.entry.fields",
     "a"},
    {"unknown field", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":0}}", 1,
     FP4_ERR_FORMAT, "st.entry.extra", "a"},
    {"entry is an array", "{\"a\":[1]}", 0, FP4_ERR_FORMAT, "st.entry.type", "a"},
    {"entry is a number", "{\"a\":1}", 0, FP4_ERR_FORMAT, "st.entry.type", "a"},
    {"dtype is a number", "{\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, FP4_ERR_FORMAT,
     "st.entry.type", "a"},
    {"shape is an object", "{\"a\":{\"dtype\":\"U8\",\"shape\":{},\"data_offsets\":[0,1]}}", 1,
     FP4_ERR_FORMAT, "st.entry.type", "a"},
    {"data_offsets is a string", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":\"0,1\"}}", 1,
     FP4_ERR_FORMAT, "st.entry.type", "a"},
    /* 8: dtype strings */
    {"dtype F8_E4M3FN", ONE("a", "F8_E4M3FN", "[1]", "[0,1]"), 1, FP4_ERR_DTYPE, "st.dtype", "a"},
    {"dtype fp4", ONE("a", "fp4", "[1]", "[0,1]"), 1, FP4_ERR_DTYPE, "st.dtype", "a"},
    {"dtype lowercase", ONE("a", "f32", "[1]", "[0,4]"), 4, FP4_ERR_DTYPE, "st.dtype", "a"},
    {"dtype empty", ONE("a", "", "[1]", "[0,1]"), 1, FP4_ERR_DTYPE, "st.dtype", "a"},
    {"dtype with NUL", ONE("a", "U8\\u0000", "[1]", "[0,1]"), 1, FP4_ERR_DTYPE, "st.dtype", "a"},
    /* 9: shape */
    {"negative dim", ONE("a", "U8", "[-1]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.shape", "a"},
    {"fractional dim", ONE("a", "U8", "[1.5]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.shape", "a"},
    {"exponent dim", ONE("a", "U8", "[1e3]", "[0,1000]"), 1000, FP4_ERR_SHAPE, "st.shape", "a"},
    {"string dim", ONE("a", "U8", "[\"1\"]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.shape", "a"},
    {"bool dim", ONE("a", "U8", "[true]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.shape", "a"},
    {"dim above 2^48", ONE("a", "U8", "[281474976710657,0]", "[0,0]"), 0, FP4_ERR_LIMIT, "st.dim_cap", "a"},
    {"rank 5", ONE("a", "U8", "[1,1,1,1,1]", "[0,1]"), 1, FP4_ERR_LIMIT, "st.rank", "a"},
    /* 10, 11: size arithmetic */
    {"element count overflow", ONE("a", "U8", "[281474976710656,281474976710656]", "[0,0]"), 0,
     FP4_ERR_OVERFLOW, "st.nbytes_overflow", "a"},
    {"bit count overflow", ONE("a", "F64", "[281474976710656,65536]", "[0,0]"), 0, FP4_ERR_OVERFLOW,
     "st.nbytes_overflow", "a"},
    {"F4 odd count", ONE("a", "F4", "[3]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.subbyte", "a"},
    {"F6 partial byte", ONE("a", "F6_E2M3", "[2]", "[0,1]"), 1, FP4_ERR_SHAPE, "st.subbyte", "a"},
    /* 12, 13: offsets */
    {"one offset", ONE("a", "U8", "[1]", "[1]"), 1, FP4_ERR_FORMAT, "st.offsets", "a"},
    {"three offsets", ONE("a", "U8", "[1]", "[0,1,1]"), 1, FP4_ERR_FORMAT, "st.offsets", "a"},
    {"negative offset", ONE("a", "U8", "[1]", "[-1,0]"), 1, FP4_ERR_FORMAT, "st.offsets", "a"},
    {"fractional offset", ONE("a", "U8", "[1]", "[0,1.0]"), 1, FP4_ERR_FORMAT, "st.offsets", "a"},
    {"end before begin", ONE("a", "U8", "[0]", "[8,4]"), 8, FP4_ERR_BOUNDS, "st.offsets_order", "a"},
    {"span != nbytes", ONE("a", "F32", "[2]", "[0,4]"), 4, FP4_ERR_SHAPE, "st.offsets_size", "a"},
    {"span != nbytes (MLX #3363)", ONE("a", "F32", "[1000]", "[0,4]"), 4, FP4_ERR_SHAPE, "st.offsets_size",
     "a"},
    /* 14: layout */
    {"first begin not 0", ONE("a", "U8", "[1]", "[1,2]"), 2, FP4_ERR_BOUNDS, "st.gap", "a"},
    {"gap between", "{" ENT("a", "U8", "[1]", "[0,1]") "," ENT("b", "U8", "[1]", "[2,3]") "}", 3,
     FP4_ERR_BOUNDS, "st.gap", "b"},
    {"aliased tensors", "{" ENT("a", "U8", "[4]", "[0,4]") "," ENT("b", "U8", "[4]", "[0,4]") "}", 4,
     FP4_ERR_BOUNDS, "st.overlap", "b"},
    {"partial overlap", "{" ENT("a", "U8", "[4]", "[0,4]") "," ENT("b", "U8", "[4]", "[2,6]") "}", 6,
     FP4_ERR_BOUNDS, "st.overlap", "b"},
    {"empty tensor inside another", "{" ENT("a", "U8", "[4]", "[0,4]") "," ENT("b", "U8", "[0]", "[2,2]") "}",
     4, FP4_ERR_BOUNDS, "st.overlap", "b"},
    /* 15: file end */
    {"data truncated", ONE("a", "F32", "[4]", "[0,16]"), 15, FP4_ERR_TRUNCATED, "st.data_truncated", "a"},
    {"data truncated, last is a scale",
     "{" ENT("w", "U8", "[2,8]", "[0,16]") "," ENT("w_scale", "F8_E4M3", "[2,1]", "[16,18]") "}", 17,
     FP4_ERR_TRUNCATED, "st.data_truncated", "w_scale"},
    {"polyglot tail", ONE("a", "F32", "[4]", "[0,16]"), 17, FP4_ERR_FORMAT, "st.tail", NULL},
    {"tail after no tensors", "{}", 1, FP4_ERR_FORMAT, "st.tail", NULL},
    /* 16: __metadata__ */
    {"metadata is a string", "{\"__metadata__\":\"x\"}", 0, FP4_ERR_FORMAT, "st.metadata", NULL},
    {"metadata is an array", "{\"__metadata__\":[]}", 0, FP4_ERR_FORMAT, "st.metadata", NULL},
    {"metadata value is a number", "{\"__metadata__\":{\"k\":1}}", 0, FP4_ERR_FORMAT, "st.metadata.value",
     NULL},
    {"metadata value is null", "{\"__metadata__\":{\"k\":null}}", 0, FP4_ERR_FORMAT, "st.metadata.value",
     NULL},
    {"metadata value is an object", "{\"__metadata__\":{\"k\":{}}}", 0, FP4_ERR_FORMAT, "st.metadata.value",
     NULL},
    {"metadata value is a non-empty object", "{\"__metadata__\":{\"k\":{\"a\":1}}}", 0, FP4_ERR_FORMAT,
     "st.nested_object", NULL},
    {"object inside a shape", ONE("a", "U8", "[{\"x\":1}]", "[0,1]"), 1, FP4_ERR_LIMIT, "st.depth", NULL},
    {"shape array far too long", ONE("a", "U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "[0,1]"), 1,
     FP4_ERR_LIMIT, "st.array_len", NULL},
    {"rank 9", ONE("a", "U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]"), 1, FP4_ERR_LIMIT, "st.rank", "a"},
    {"metadata value with NUL", "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, FP4_ERR_FORMAT,
     "st.metadata.value", NULL},
    /* 17: names */
    {"empty name", ONE("", "U8", "[1]", "[0,1]"), 1, FP4_ERR_FORMAT, "st.name", NULL},
    {"NUL in name", ONE("a\\u0000hidden", "U8", "[1]", "[0,1]"), 1, FP4_ERR_FORMAT, "st.name", NULL},
    {"__metadata__ with a tensor shape", ONE("__metadata__", "U8", "[1]", "[0,1]"), 1, FP4_ERR_FORMAT,
     "st.metadata.value", NULL},
};

/* valid twins: each must open with the given tensor count */
static const struct {
    const char *what, *hdr;
    size_t data, n;
} twins[] = {
    {"empty object", "{}", 0, 0},
    {"padded with spaces", "{}      ", 0, 0},
    {"leading whitespace", " \t\r\n{}", 0, 0},
    {"empty metadata", "{\"__metadata__\":{}}", 0, 0},
    {"metadata with empty string and unicode",
     "{\"__metadata__\":{\"\":\"\",\"k\\u00e9\":\"\\u2211 \\\"q\\\"\"}}", 0, 0},
    {"one U8", ONE("a", "U8", "[1]", "[0,1]"), 1, 1},
    {"escaped name", ONE("a\\\"b\\\\c\\u00e9", "U8", "[1]", "[0,1]"), 1, 1},
    {"scalar", ONE("s", "F32", "[]", "[0,4]"), 4, 1},
    {"4-d", ONE("c", "BF16", "[1,2,3,4]", "[0,48]"), 48, 1},
    {"F4 even count", ONE("a", "F4", "[4]", "[0,2]"), 2, 1},
    {"F6 whole bytes", ONE("a", "F6_E3M2", "[4]", "[0,3]"), 3, 1},
    {"dim exactly 2^48 with a zero", ONE("a", "F64", "[281474976710656,0]", "[0,0]"), 0, 1},
    {"empty tensors at the same offset",
     "{" ENT("a", "U8", "[0]", "[0,0]") "," ENT("b", "U8", "[0]", "[0,0]") "}", 0, 2},
    {"empty tensor between",
     "{" ENT("a", "U8", "[2]", "[0,2]") "," ENT("b", "U8", "[0]", "[2,2]") "," ENT("c", "U8", "[2]",
                                                                                   "[2,4]") "}",
     4, 3},
    {"JSON order differs from offset order",
     "{" ENT("b", "U8", "[2]", "[2,4]") "," ENT("a", "U8", "[2]", "[0,2]") "}", 4, 2},
    {"name of 256 bytes",
     ONE("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
         "U8", "[1]", "[0,1]"),
     1, 1},
    {"every dtype name",
     "{" ENT("a", "BOOL", "[1]", "[0,1]") "," ENT("b", "F8_E8M0", "[1]", "[1,2]") "," ENT(
         "c", "F8_E4M3FNUZ", "[1]", "[2,3]") "," ENT("d", "F8_E5M2FNUZ", "[1]",
                                                     "[3,4]") "," ENT("e", "C64", "[1]", "[4,12]") "}",
     12, 5},
};

static void test_framing(void) {
    /* 1: fewer than 8 bytes, every length */
    for (size_t n = 0; n < 8; n++) {
        memset(buf, 0, 8);
        expect_fail("short file", n, FP4_ERR_TRUNCATED, "st.short", NULL);
    }
    /* 2, 3: header length */
    size_t sz = build_raw(3, "{}", 2, 0);
    expect_fail("N runs past the end", sz, FP4_ERR_TRUNCATED, "st.header_len", NULL);
    sz = build_raw(UINT64_MAX, "{}", 2, 0);
    expect_fail("N = 2^64-1", sz, FP4_ERR_LIMIT, "st.header_cap", NULL);
    sz = build_raw(UINT64_MAX - 7, "{}", 2, 0);
    expect_fail("N + 8 wraps", sz, FP4_ERR_LIMIT, "st.header_cap", NULL);
    sz = build_raw((uint64_t)FP4_MAX_ST_HEADER + 1, "{}", 2, 0);
    expect_fail("N above the cap", sz, FP4_ERR_LIMIT, "st.header_cap", NULL);
    sz = build_raw(0, "", 0, 0);
    expect_fail("N = 0", sz, FP4_ERR_FORMAT, "st.header_empty", NULL);
    sz = build_raw(0, "{}", 2, 0);
    expect_fail("N = 0 with bytes after", sz, FP4_ERR_FORMAT, "st.header_empty", NULL);
    /* twin: N exactly the rest of the file */
    sz = build_raw(2, "{}", 2, 0);
    expect_ok("N == file - 8", sz, 0);
    /* a NUL byte raw in the header is not JSON */
    sz = build_raw(3, "{\0}", 3, 0);
    expect_fail("raw NUL in header", sz, FP4_ERR_FORMAT, "st.json", NULL);
}

static void test_names(void) {
    char hdr[1024];
    char name[300];
    memset(name, 'x', 257);
    name[257] = 0;
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", name);
    expect_fail("name of 257 bytes", build(hdr, 1), FP4_ERR_LIMIT, "st.name_len", NULL);
}

/* Counts refused by the pre-scan, before jansson allocates a node per member. */
static void test_counts(void) {
    size_t cap = 16 * ((size_t)FP4_MAX_TENSORS + 2) + 16;
    char *h = malloc(cap);
    size_t n = 0;
    h[n++] = '{';
    for (size_t i = 0; i < (size_t)FP4_MAX_TENSORS + 2; i++)
        n += (size_t)sprintf(h + n, "%s\"%zx\":0", i ? "," : "", i);
    h[n++] = '}';
    uint8_t *p = malloc(8 + n);
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(p + 8, h, n);
    fp4_st *st = NULL;
    fp4_error err;
    CHECK(fp4_st_open_buffer(p, 8 + n, &st, &err) == FP4_ERR_LIMIT && !strcmp(err.rule, "st.tensor_count"));
    /* __metadata__ with more than FP4_ST_MAX_METADATA (65536) pairs */
    n = (size_t)sprintf(h, "{\"__metadata__\":{");
    for (size_t i = 0; i < 65536 + 8; i++) n += (size_t)sprintf(h + n, "%s\"%zx\":\"\"", i ? "," : "", i);
    n += (size_t)sprintf(h + n, "}}");
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(p + 8, h, n);
    CHECK(fp4_st_open_buffer(p, 8 + n, &st, &err) == FP4_ERR_LIMIT && !strcmp(err.rule, "st.metadata_count"));
    /* twin: exactly 65536 pairs load */
    n = (size_t)sprintf(h, "{\"__metadata__\":{");
    for (size_t i = 0; i < 65536; i++) n += (size_t)sprintf(h + n, "%s\"%zx\":\"v\"", i ? "," : "", i);
    n += (size_t)sprintf(h + n, "}}");
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(p + 8, h, n);
    CHECK_OK(fp4_st_open_buffer(p, 8 + n, &st, &err));
    CHECK_EQ_INT(fp4_st_n_metadata(st), 65536);
    CHECK(st && strcmp(fp4_st_metadata_get(st, "fff"), "v") == 0);
    fp4_st_close(st);
    free(p);
    free(h);
}

static void test_cases(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_fail(cases[i].what, build(cases[i].hdr, cases[i].data), cases[i].code, cases[i].rule,
                    cases[i].tensor);
    for (size_t i = 0; i < sizeof twins / sizeof *twins; i++)
        expect_ok(twins[i].what, build(twins[i].hdr, twins[i].data), twins[i].n);
}

/* Every truncation of a valid file is refused, never read out of bounds. */
static void test_truncations(void) {
    static const char hdr[] = "{\"__metadata__\":{\"k\":\"v\"}," ENT("w", "U8", "[2,4]", "[0,8]") ","
                              ENT("s", "F32", "[]", "[8,12]") "}";
    size_t full = build(hdr, 12);
    expect_ok("full file", full, 2);
    uint8_t *copy = malloc(full);
    memcpy(copy, buf, full);
    for (size_t n = 0; n < full; n++) {
        fp4_st *st = NULL;
        fp4_error err;
        uint8_t *p = malloc(n ? n : 1); /* exact-size heap block: ASan sees any overread */
        memcpy(p, copy, n);
        CHECK(fp4_st_open_buffer(p, n, &st, &err) != FP4_OK && st == NULL && err.rule[0]);
        free(p);
    }
    free(copy);
}

static void test_file_api(void) {
    char path[600];
    const char *t = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fp4str_%d.safetensors", t && *t ? t : "/tmp", (int)getpid());
    fp4_st *st = NULL;
    fp4_error err;
    CHECK(fp4_st_open(path, &st, &err) == FP4_ERR_IO && !strcmp(err.rule, "st.open"));
    FILE *f = fopen(path, "wb");
    fwrite("1234567", 1, 7, f);
    fclose(f);
    CHECK(fp4_st_open(path, &st, &err) == FP4_ERR_TRUNCATED && !strcmp(err.rule, "st.short"));
    CHECK(strcmp(err.file, path) == 0);
    size_t sz = build(ONE("a", "F32", "[4]", "[0,16]"), 16);
    f = fopen(path, "wb");
    fwrite(buf, 1, sz - 1, f);
    fclose(f);
    CHECK(fp4_st_open(path, &st, &err) == FP4_ERR_TRUNCATED && !strcmp(err.rule, "st.data_truncated"));
    f = fopen(path, "wb");
    fwrite(buf, 1, sz, f);
    fclose(f);
    CHECK_OK(fp4_st_open(path, &st, &err));
    fp4_st_close(st);
    unlink(path);
    const char *dir = t && *t ? t : "/tmp";
    CHECK(fp4_st_open(dir, &st, &err) == FP4_ERR_IO); /* a directory */
    CHECK(mkfifo(path, 0600) == 0);
    CHECK(fp4_st_open(path, &st, &err) == FP4_ERR_IO && !strcmp(err.rule, "st.open")); /* a FIFO: no hang */
    unlink(path);
    CHECK(fp4_st_open_buffer(NULL, 5, &st, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_st_open_buffer(buf, 5, NULL, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_st_open_buffer(NULL, 0, &st, NULL) == FP4_ERR_TRUNCATED); /* err may be NULL */
}

/* ---- HF directories ---- */

static char dir[512];

static void put_file(const char *name, const void *data, size_t n) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}
static void put_text(const char *name, const char *text) { put_file(name, text, strlen(text)); }
static void del_file(const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}
static void put_st(const char *name, const char *hdr, size_t data) { put_file(name, buf, build(hdr, data)); }

static void expect_dir(const char *what, fp4_status code, const char *rule, const char *tensor) {
    fp4_hfdir *d = NULL;
    fp4_error err;
    fp4_status s = fp4_hfdir_open(dir, &d, &err);
    if (code == FP4_OK) {
        CHECK_MSG(s == FP4_OK, "%s: valid twin refused: %s %s", what, err.rule, err.msg);
    } else {
        CHECK_MSG(s == code && d == NULL && strcmp(err.rule, rule) == 0,
                  "%s: got %s / \"%s\" (%s), want \"%s\"", what, fp4_status_str(s), err.rule, err.msg, rule);
        if (tensor) CHECK_MSG(strcmp(err.tensor, tensor) == 0, "%s: tensor %s", what, err.tensor);
    }
    fp4_hfdir_close(d);
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static void index_with(const char *map) {
    char text[1024];
    snprintf(text, sizeof text, "{\"metadata\":{\"total_size\":3},\"weight_map\":{%s}}", map);
    put_text("model.safetensors.index.json", text);
}

static void test_hfdir(void) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fp4str_dir_%d", t && *t ? t : "/tmp", (int)getpid());
    mkdir(dir, 0700);
    expect_dir("empty directory", FP4_ERR_NOT_FOUND, "hfdir.no_weights", NULL);
    put_st(SHARD1, "{" ENT("a", "U8", "[1]", "[0,1]") "," ENT("b", "U8", "[1]", "[1,2]") "}", 2);
    put_st(SHARD2, ONE("c", "U8", "[1]", "[0,1]"), 1);
    const char *good = "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"";
    index_with(good);
    expect_dir("valid two shards", FP4_OK, NULL, NULL);
    /* 19 */
    index_with("\"a\":\"../" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("shard path with ..", FP4_ERR_FORMAT, "index.path", "a");
    index_with("\"a\":\"/etc/passwd\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("absolute shard path", FP4_ERR_FORMAT, "index.path", "a");
    index_with("\"a\":\"sub/x.safetensors\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("shard path with /", FP4_ERR_FORMAT, "index.path", "a");
    index_with("\"a\":\"..\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("shard path ..", FP4_ERR_FORMAT, "index.path", "a");
    index_with("\"a\":\"\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("empty shard path", FP4_ERR_FORMAT, "index.path", "a");
    index_with("\"a\":\"" SHARD1 "\",\"a\":\"" SHARD2 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("tensor mapped to two shards", FP4_ERR_DUPLICATE, "index.dup", NULL);
    index_with("\"a\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("shard tensor not in the map", FP4_ERR_FORMAT, "index.unmapped", "b");
    index_with("\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\",\"d\":\"" SHARD2 "\"");
    expect_dir("mapped tensor not in its shard", FP4_ERR_NOT_FOUND, "index.missing_tensor", "d");
    index_with("\"a\":\"" SHARD1 "\",\"b\":\"" SHARD2 "\",\"c\":\"" SHARD2 "\"");
    expect_dir("tensor in another shard than mapped", FP4_ERR_DUPLICATE, "index.wrong_shard", "b");
    index_with("\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"model-00003-of-00002.safetensors\"");
    expect_dir("missing shard", FP4_ERR_NOT_FOUND, "index.missing_shard", NULL);
    index_with("\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":3");
    expect_dir("map value not a string", FP4_ERR_FORMAT, "index.json", "c");
    put_text("model.safetensors.index.json", "{\"metadata\":{}}");
    expect_dir("no weight_map", FP4_ERR_FORMAT, "index.json", NULL);
    put_text("model.safetensors.index.json", "[1]");
    expect_dir("index not an object", FP4_ERR_FORMAT, "index.json", NULL);
    put_text("model.safetensors.index.json", "{\"weight_map\":{\"a\":");
    expect_dir("index truncated", FP4_ERR_FORMAT, "index.json", NULL);
    /* a broken shard reports the shard's own rule */
    index_with(good);
    put_st(SHARD2, ONE("c", "U8", "[1]", "[0,1]"), 2);
    expect_dir("shard with a tail", FP4_ERR_FORMAT, "st.tail", NULL);
    put_st(SHARD2, ONE("c", "U8", "[1]", "[0,1]"), 1);
    expect_dir("valid again", FP4_OK, NULL, NULL);
    /* configs */
    put_text("config.json", "{\"a\":1,\"a\":2}");
    expect_dir("config.json duplicate key", FP4_ERR_DUPLICATE, "hfdir.config", NULL);
    put_text("config.json", "{\"a\":");
    expect_dir("config.json truncated", FP4_ERR_FORMAT, "hfdir.config", NULL);
    put_text("config.json", "{\"quantization_config\":{\"quant_algo\":\"NVFP4\"}}");
    put_text("hf_quant_config.json", "[]");
    expect_dir("hf_quant_config.json not an object", FP4_ERR_FORMAT, "hfdir.quant_config", NULL);
    put_text("hf_quant_config.json", "{\"quantization\":{\"quant_algo\":\"NVFP4\",\"group_size\":16}}");
    expect_dir("valid with configs", FP4_OK, NULL, NULL);
    /* single file */
    put_st("model.safetensors", ONE("x", "U8", "[1]", "[0,1]"), 1);
    expect_dir("single file and index", FP4_ERR_FORMAT, "hfdir.ambiguous", NULL);
    del_file("model.safetensors.index.json");
    expect_dir("single file", FP4_OK, NULL, NULL);
    put_st("model.safetensors", ONE("x", "U8", "[1]", "[1,2]"), 2);
    expect_dir("single file with a gap", FP4_ERR_BOUNDS, "st.gap", "x");
    const char *names[] = {SHARD1, SHARD2, "model.safetensors", "config.json", "hf_quant_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) del_file(names[i]);
    rmdir(dir);
}

int main(void) {
    test_framing();
    test_names();
    test_cases();
    test_counts();
    test_truncations();
    test_file_api();
    test_hfdir();
    printf("%zu table cases, %zu valid twins\n", sizeof cases / sizeof *cases, sizeof twins / sizeof *twins);
    return check_report();
}
