/* test_gguf_reject.c — the GGUF reject checklist (reliability.md §4.1 items 1–35 that concern the
 * container): a byte-level builder emits a small valid file with one fault injected; each case
 * asserts refusal with the exact FP4_ERR_* code and err->rule (and the tensor it names), and each
 * group has valid twins that must open. Also: every truncation length of a valid file, and the
 * builder's bytes equal the writer's for the same content. */
#include "check.h"
#include "fp4lane_io.h"
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static fp4_error gerr; /* filled by the GGUF writer calls (their fp4_error *err) */

/* ---- byte builder ---- */
typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        b->p = realloc(b->p, c);
        assert(b->p);
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void bb_u8(bb *b, uint8_t v) { bb_put(b, &v, 1); }
static void bb_le(bb *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) bb_u8(b, (uint8_t)(v >> (8 * i)));
}
static void bb_u32(bb *b, uint32_t v) { bb_le(b, v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_le(b, v, 8); }
static void bb_strn(bb *b, const char *s, size_t n) { bb_u64(b, n); bb_put(b, s, n); }
static void bb_str(bb *b, const char *s) { bb_strn(b, s, strlen(s)); }
static void bb_key(bb *b, const char *key, uint32_t type) { bb_str(b, key); bb_u32(b, type); }
static void bb_fill(bb *b, uint8_t v, size_t n) {
    for (size_t i = 0; i < n; i++) bb_u8(b, v);
}

/* ---- file spec: zero fields mean the defaults of the valid base file ---- */
typedef struct tdesc {
    const char *name;
    uint32_t n_dims, type;
    uint64_t ne[4];
    int set_off;
    uint64_t off;
} tdesc;

typedef struct gspec {
    const char *magic;            /* NULL: "GGUF"                                        */
    int set_version, set_nt, set_nkv;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    int align_kv;                 /* emit general.alignment = align_val                  */
    uint32_t align_val;
    int (*kv)(bb *b);             /* extra KVs; returns how many                         */
    int nt;                       /* 0: the two default tensors; -1: no tensors          */
    tdesc t[4];
    uint8_t pad;                  /* padding byte (0 in a valid file)                    */
    int pad_only_data;            /* nonzero pad only between tensors, not before data   */
    int last_unpadded;            /* file ends at the last tensor's data                 */
    size_t tail;                  /* extra bytes after everything                        */
    int drop_data;                /* file ends right after the tensor infos              */
    size_t cut;                   /* remove this many bytes from the end                 */
} gspec;

static const tdesc default_t[2] = {
    {"blk.0.ffn_up.weight", 2, FP4_TYPE_GGML_NVFP4, {128, 2, 1, 1}, 0, 0},
    {"blk.0.ffn_up.scale", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0},
};

static uint64_t tsize(const tdesc *t) {
    size_t row;
    if (t->n_dims < 1 || t->n_dims > 4 || t->ne[0] > (1u << 20) ||
        fp4_type_row_size(t->type, (int64_t)t->ne[0], &row) != FP4_OK)
        return 0;
    uint64_t n = row;
    for (uint32_t j = 1; j < t->n_dims; j++) {
        if (t->ne[j] > 64) return 0;
        n *= t->ne[j];
    }
    return n;
}

static uint64_t up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void build(const gspec *s, bb *b) {
    uint32_t align =
        s->align_kv && s->align_val >= 8 && s->align_val <= 4096 && !(s->align_val & (s->align_val - 1))
            ? s->align_val
            : 32;
    const tdesc *t = s->nt > 0 ? s->t : default_t;
    int nt = s->nt > 0 ? s->nt : s->nt < 0 ? 0 : 2;
    bb kvs = {0};
    int n_kv = 1;
    bb_key(&kvs, "general.architecture", 8);
    bb_str(&kvs, "llama");
    if (s->align_kv) bb_key(&kvs, "general.alignment", 4), bb_u32(&kvs, s->align_val), n_kv++;
    if (s->kv) n_kv += s->kv(&kvs);
    bb_put(b, s->magic ? s->magic : "GGUF", 4);
    bb_u32(b, s->set_version ? s->version : 3);
    bb_u64(b, s->set_nt ? s->n_tensors : (uint64_t)nt);
    bb_u64(b, s->set_nkv ? s->n_kv : (uint64_t)n_kv);
    bb_put(b, kvs.p, kvs.n);
    free(kvs.p);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        bb_str(b, t[i].name);
        bb_u32(b, t[i].n_dims);
        for (uint32_t j = 0; j < t[i].n_dims && j < 8; j++) bb_u64(b, j < 4 ? t[i].ne[j] : 1);
        bb_u32(b, t[i].type);
        bb_u64(b, t[i].set_off ? t[i].off : off);
        off += up(tsize(&t[i]), align);
    }
    if (s->drop_data) return;
    bb_fill(b, s->pad_only_data ? 0 : s->pad, up(b->n, align) - b->n);
    for (int i = 0; i < nt; i++) {
        uint64_t n = tsize(&t[i]);
        for (uint64_t k = 0; k < n; k++) bb_u8(b, (uint8_t)(0x11 + 3 * k + i));
        if (i + 1 < nt || !s->last_unpadded) bb_fill(b, s->pad, up(n, align) - n);
    }
    bb_fill(b, 0xAB, s->tail);
    b->n -= s->cut < b->n ? s->cut : b->n;
}

/* ---- extra KV emitters (each returns the number of pairs it wrote) ---- */
static int kv_key_umax(bb *b) { bb_u64(b, UINT64_MAX); bb_put(b, "abc", 3); return 1; }
static int kv_key_beyond(bb *b) { bb_u64(b, 4000); bb_put(b, "abc", 3); return 1; }
static int kv_key_empty(bb *b) { bb_key(b, "", 4); bb_u32(b, 1); return 1; }
static int kv_key_nul(bb *b) { bb_strn(b, "gen\0ral.x", 9); bb_u32(b, 4); bb_u32(b, 1); return 1; }
static int kv_key_utf8(bb *b) { bb_key(b, "general.caf\xc3\xa9", 4); bb_u32(b, 1); return 1; }
static int kv_key_space(bb *b) { bb_key(b, "general.a b", 4); bb_u32(b, 1); return 1; }
static int kv_key_long(bb *b, size_t n) {
    char *k = malloc(n);
    memset(k, 'k', n);
    bb_strn(b, k, n);
    bb_u32(b, 4);
    bb_u32(b, 7);
    free(k);
    return 1;
}
static int kv_key_65536(bb *b) { return kv_key_long(b, 65536); }
static int kv_key_65535(bb *b) { return kv_key_long(b, 65535); }
static int kv_dup(bb *b) { bb_key(b, "general.architecture", 8); bb_str(b, "qwen"); return 1; }
static int kv_type13(bb *b) { bb_key(b, "x.y", 13); bb_u32(b, 0); return 1; }
static int kv_type_neg(bb *b) { bb_key(b, "x.y", 0xFFFFFFFFu); bb_u32(b, 0); return 1; }
static int kv_str_beyond(bb *b) { bb_key(b, "x.s", 8); bb_u64(b, 5000); bb_put(b, "abc", 3); return 1; }
static int kv_str_cap(bb *b) { bb_key(b, "x.s", 8); bb_u64(b, (64ull << 20) + 1); return 1; }
static int kv_str_umax(bb *b) { bb_key(b, "x.s", 8); bb_u64(b, UINT64_MAX); return 1; }
static int kv_arr_nested(bb *b) {
    bb_key(b, "x.a", 9);
    bb_u32(b, 9);
    bb_u64(b, 1);
    bb_u32(b, 4);
    bb_u64(b, 0);
    return 1;
}
static int kv_arr_type13(bb *b) { bb_key(b, "x.a", 9); bb_u32(b, 13); bb_u64(b, 0); return 1; }
static int kv_arr_bounds(bb *b) {
    bb_key(b, "x.a", 9);
    bb_u32(b, 10);
    bb_u64(b, 64u << 20);
    bb_u64(b, 5);
    return 1;
}
static int kv_arr_short(bb *b) { bb_key(b, "x.a", 9); bb_u32(b, 5); bb_u64(b, 1000); bb_u32(b, 5); return 1; }
static int kv_arr_cap(bb *b) { bb_key(b, "x.a", 9); bb_u32(b, 0); bb_u64(b, (64u << 20) + 1); return 1; }
static int kv_arr_umax(bb *b) { bb_key(b, "x.a", 9); bb_u32(b, 12); bb_u64(b, UINT64_MAX); return 1; }
static int kv_sarr_bounds(bb *b) {
    bb_key(b, "x.a", 9);
    bb_u32(b, 8);
    bb_u64(b, 1u << 20);
    bb_str(b, "a");
    return 1;
}
static int kv_sarr_elem(bb *b) {
    bb_key(b, "x.a", 9); bb_u32(b, 8); bb_u64(b, 3); bb_str(b, "a"); bb_u64(b, 3000); bb_put(b, "b", 1);
    return 1;
}
static int kv_bool2(bb *b) { bb_key(b, "x.b", 7); bb_u8(b, 2); return 1; }
static int kv_barr_bad(bb *b) {
    bb_key(b, "x.b", 9);
    bb_u32(b, 7);
    bb_u64(b, 3);
    bb_put(b, "\x01\x00\xff", 3);
    return 1;
}
static int kv_bools_ok(bb *b) {
    bb_key(b, "x.b", 7); bb_u8(b, 1);
    bb_key(b, "x.c", 9); bb_u32(b, 7); bb_u64(b, 3); bb_put(b, "\x01\x00\x01", 3);
    return 2;
}
static int kv_align_u64(bb *b) { bb_key(b, "general.alignment", 10); bb_u64(b, 32); return 1; }
static int kv_align_str(bb *b) { bb_key(b, "general.alignment", 8); bb_str(b, "32"); return 1; }
static int kv_align_i32(bb *b) { bb_key(b, "general.alignment", 5); bb_u32(b, 32); return 1; }
static int kv_empty_things(bb *b) {
    bb_key(b, "x.s", 8); bb_u64(b, 0);
    bb_key(b, "x.a", 9); bb_u32(b, 6); bb_u64(b, 0);
    bb_key(b, "x.t", 9); bb_u32(b, 8); bb_u64(b, 0);
    bb_key(b, "x.u", 9); bb_u32(b, 8); bb_u64(b, 2); bb_str(b, ""); bb_strn(b, "a\0b", 3);
    return 4;
}

/* ---- checks ---- */
static int n_cases;

/* With FP4_GGUF_SEED_DIR set, every case small enough is also written there as a fuzz seed. */
static void seed_dump(const uint8_t *p, size_t n) {
    const char *dir = getenv("FP4_GGUF_SEED_DIR");
    if (!dir || n >= 4096) return;
    char path[512];
    snprintf(path, sizeof path, "%s/case-%03d.gguf", dir, n_cases);
    FILE *f = fopen(path, "wb");
    if (f) fwrite(p, 1, n, f), fclose(f);
}

static void expect_ok(const gspec *s, const char *label) {
    bb b = {0};
    build(s, &b);
    seed_dump(b.p, b.n);
    n_cases++;
    fp4_gguf *g = NULL;
    fp4_error err;
    fp4_status st = fp4_gguf_open_buffer(b.p, b.n, &g, &err);
    CHECK_MSG(st == FP4_OK && g, "%s: valid twin refused: %s [%s] %s", label, fp4_status_str(st), err.rule,
              err.msg);
    fp4_gguf_close(g);
    free(b.p);
}

static void expect_buf(const uint8_t *p, size_t n, fp4_status code, const char *rule, const char *tensor,
                       const char *label) {
    fp4_gguf *g = (fp4_gguf *)&n_cases;
    fp4_error err;
    seed_dump(p, n);
    fp4_status st = fp4_gguf_open_buffer(p, n, &g, &err);
    CHECK_MSG(st == code && err.code == code && strcmp(err.rule, rule) == 0,
              "%s: got %s [%s] (%s), want %s [%s]", label, fp4_status_str(st), err.rule, err.msg,
              fp4_status_str(code), rule);
    CHECK_MSG(g == NULL, "%s: handle left non-NULL", label);
    if (tensor)
        CHECK_MSG(strcmp(err.tensor, tensor) == 0, "%s: tensor '%s', want '%s'", label, err.tensor, tensor);
    CHECK_MSG(err.msg[0] != '\0', "%s: empty message", label);
    n_cases++;
}

static void expect(const gspec *s, fp4_status code, const char *rule, const char *tensor, const char *label) {
    bb b = {0};
    build(s, &b);
    expect_buf(b.p, b.n, code, rule, tensor, label);
    free(b.p);
}

static const char *const W = "blk.0.ffn_up.weight";
static const char *const S = "blk.0.ffn_up.scale";

static void test_header(void) {
    gspec base = {0};
    expect_ok(&base, "base file");
    gspec v2 = {.set_version = 1, .version = 2};
    expect_ok(&v2, "version 2");
    /* 1: short files (more in test_truncations) */
    expect_buf((const uint8_t *)"", 0, FP4_ERR_TRUNCATED, "gguf.truncated", NULL, "empty file");
    expect_buf((const uint8_t *)"GGUF\x03\x00\x00\x00", 8, FP4_ERR_TRUNCATED, "gguf.truncated", NULL,
               "8 bytes");
    /* 2 */
    const char *magics[] = {"GGML", "GGJT", "FUGG", "gguf"};
    for (int i = 0; i < 4; i++) {
        gspec s = {.magic = magics[i]};
        expect(&s, FP4_ERR_FORMAT, "gguf.magic", NULL, magics[i]);
    }
    /* 3 */
    uint32_t versions[] = {0, 1, 4, 0xFFFF};
    for (int i = 0; i < 4; i++) {
        gspec s = {.set_version = 1, .version = versions[i]};
        expect(&s, FP4_ERR_UNSUPPORTED, "gguf.version", NULL, "version");
    }
    gspec be = {.set_version = 1, .version = 0x03000000};
    expect(&be, FP4_ERR_UNSUPPORTED, "gguf.endian", NULL, "big-endian version");
    /* 4, 35 */
    uint64_t nts[] = {1ull << 63, 0x1D1D1D1D1D1D1D1Dull, UINT64_MAX, 1000001, 1000};
    for (int i = 0; i < 5; i++) {
        gspec s = {.set_nt = 1, .n_tensors = nts[i]};
        expect(&s, i < 4 ? FP4_ERR_LIMIT : FP4_ERR_TRUNCATED, "gguf.n_tensors", NULL, "n_tensors");
    }
    /* 5 */
    uint64_t nkvs[] = {1ull << 63, 0x1D1D1D1D1D1D1D1Dull, 1000001, 500};
    for (int i = 0; i < 4; i++) {
        gspec s = {.set_nkv = 1, .n_kv = nkvs[i]};
        expect(&s, i < 3 ? FP4_ERR_LIMIT : FP4_ERR_TRUNCATED, "gguf.n_kv", NULL, "n_kv");
    }
}

static void test_kv(void) {
    struct { int (*kv)(bb *); fp4_status code; const char *rule; const char *label; } bad[] = {
        {kv_key_umax, FP4_ERR_LIMIT, "gguf.kv.key_len", "6: key length UINT64_MAX"},
        {kv_key_beyond, FP4_ERR_TRUNCATED, "gguf.truncated", "6: key longer than the bytes left"},
        {kv_key_empty, FP4_ERR_FORMAT, "gguf.kv.key_empty", "7: empty key"},
        {kv_key_nul, FP4_ERR_FORMAT, "gguf.kv.key_chars", "8: key with NUL"},
        {kv_key_utf8, FP4_ERR_FORMAT, "gguf.kv.key_chars", "8: non-ASCII key"},
        {kv_key_space, FP4_ERR_FORMAT, "gguf.kv.key_chars", "8: key with a space"},
        {kv_key_65536, FP4_ERR_LIMIT, "gguf.kv.key_len", "8: key of 65536 bytes"},
        {kv_dup, FP4_ERR_DUPLICATE, "gguf.kv.dup_key", "9: duplicate key"},
        {kv_type13, FP4_ERR_FORMAT, "gguf.kv.type", "10: value type 13"},
        {kv_type_neg, FP4_ERR_FORMAT, "gguf.kv.type", "10: value type -1"},
        {kv_str_beyond, FP4_ERR_TRUNCATED, "gguf.truncated", "11: string past the end"},
        {kv_str_cap, FP4_ERR_LIMIT, "gguf.string.len", "11: string above the cap"},
        {kv_str_umax, FP4_ERR_LIMIT, "gguf.string.len", "11: string length UINT64_MAX"},
        {kv_arr_nested, FP4_ERR_FORMAT, "gguf.array.nested", "12: array of arrays"},
        {kv_arr_type13, FP4_ERR_FORMAT, "gguf.array.type", "12: array element type 13"},
        {kv_arr_bounds, FP4_ERR_TRUNCATED, "gguf.array.bounds", "13: 2^26 u64 elements in a small file"},
        {kv_arr_short, FP4_ERR_TRUNCATED, "gguf.array.bounds", "13: array past the end"},
        {kv_arr_cap, FP4_ERR_LIMIT, "gguf.array.count", "13: count above the cap"},
        {kv_arr_umax, FP4_ERR_LIMIT, "gguf.array.count", "13: count UINT64_MAX (x8 wraps)"},
        {kv_sarr_bounds, FP4_ERR_TRUNCATED, "gguf.array.bounds", "14: string array count > left/8"},
        {kv_sarr_elem, FP4_ERR_TRUNCATED, "gguf.truncated", "14: string element past the end"},
        {kv_bool2, FP4_ERR_FORMAT, "gguf.bool", "15: bool 2"},
        {kv_barr_bad, FP4_ERR_FORMAT, "gguf.bool", "15: bool array element 0xff"},
        {kv_align_u64, FP4_ERR_DTYPE, "gguf.alignment.type", "16: alignment as uint64"},
        {kv_align_str, FP4_ERR_DTYPE, "gguf.alignment.type", "16: alignment as string"},
        {kv_align_i32, FP4_ERR_DTYPE, "gguf.alignment.type", "16: alignment as int32"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gspec s = {.kv = bad[i].kv};
        expect(&s, bad[i].code, bad[i].rule, NULL, bad[i].label);
    }
    int (*good[])(bb *) = {kv_key_65535, kv_bools_ok, kv_empty_things};
    for (size_t i = 0; i < 3; i++) {
        gspec s = {.kv = good[i]};
        expect_ok(&s, "kv twin");
    }
    /* 17 */
    uint32_t bad_align[] = {0, 13, 4, 1, 2, 1u << 30, 3u << 4, (1u << 20) * 2};
    for (int i = 0; i < 8; i++) {
        gspec s = {.align_kv = 1, .align_val = bad_align[i]};
        expect(&s, FP4_ERR_FORMAT, "gguf.alignment", NULL, "17: bad alignment");
    }
    uint32_t good_align[] = {8, 16, 32, 64, 4096};
    for (int i = 0; i < 5; i++) {
        gspec s = {.align_kv = 1, .align_val = good_align[i]};
        expect_ok(&s, "alignment twin");
    }
}

static void test_tensor_infos(void) {
    char n256[257], n257[258];
    memset(n256, 'n', 256), n256[256] = 0;
    memset(n257, 'n', 257), n257[257] = 0;
    struct { tdesc t; fp4_status code; const char *rule; const char *label;
    } bad[] = {
        {{"", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0}, FP4_ERR_FORMAT, "gguf.tensor.name", "20: empty name"},
        {{n257, 1, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0},
         FP4_ERR_LIMIT,
         "gguf.tensor.name_len",
         "20: 257-byte name"},
        {{"a\tb", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0},
         FP4_ERR_FORMAT,
         "gguf.tensor.name",
         "20: control byte"},
        {{S, 1, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0},
         FP4_ERR_DUPLICATE,
         "gguf.tensor.dup",
         "21: duplicate name"},
        {{"t", 5, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0}, FP4_ERR_FORMAT, "gguf.tensor.n_dims", "22: n_dims 5"},
        {{"t", 0, FP4_TYPE_F32, {1, 1, 1, 1}, 0, 0}, FP4_ERR_FORMAT, "gguf.tensor.n_dims", "22: n_dims 0"},
        {{"t", 2, FP4_TYPE_F32, {4, (uint64_t)-3, 1, 1}, 0, 0},
         FP4_ERR_SHAPE,
         "gguf.tensor.dim",
         "23: negative dim"},
        {{"t", 2, FP4_TYPE_F32, {4, 0, 1, 1}, 0, 0}, FP4_ERR_SHAPE, "gguf.tensor.dim", "23: zero dim"},
        {{"t", 4, FP4_TYPE_F32, {INT64_MAX, 2, 1, 1}, 0, 0},
         FP4_ERR_OVERFLOW,
         "gguf.tensor.ne_overflow",
         "24: (INT64_MAX, 2, 1, 1)"},
        {{"t", 2, FP4_TYPE_F32, {1u << 20, (1ull << 42) + 1, 1, 1}, 0, 0},
         FP4_ERR_OVERFLOW,
         "gguf.tensor.nbytes",
         "25: ne[1] = 2^42+1"},
        {{"t", 1, FP4_TYPE_F64, {(1ull << 61) - 1, 1, 1, 1}, 0, 0},
         FP4_ERR_OVERFLOW,
         "gguf.tensor.nbytes",
         "25: padding wraps"},
        {{"t", 1, 2, {32, 1, 1, 1}, 0, 0}, FP4_ERR_UNSUPPORTED, "gguf.tensor.type", "26: Q4_0 (not ours)"},
        {{"t", 1, 4, {32, 1, 1, 1}, 0, 0}, FP4_ERR_UNSUPPORTED, "gguf.tensor.type", "26: removed type 4"},
        {{"t", 1, 1023, {32, 1, 1, 1}, 0, 0}, FP4_ERR_UNSUPPORTED, "gguf.tensor.type", "26: type 1023"},
        {{"t", 1, 0xFFFFFFFFu, {32, 1, 1, 1}, 0, 0}, FP4_ERR_UNSUPPORTED, "gguf.tensor.type", "26: type -1"},
        {{"t", 1, FP4_TYPE_GGML_NVFP4, {32, 1, 1, 1}, 0, 0},
         FP4_ERR_SHAPE,
         "gguf.tensor.block",
         "27: nvfp4 ne0 32"},
        {{"t", 1, FP4_TYPE_Q4_K, {128, 1, 1, 1}, 0, 0},
         FP4_ERR_SHAPE,
         "gguf.tensor.block",
         "27: q4_K ne0 128"},
        {{"t", 1, FP4_TYPE_NVFP4_E2M1, {3, 1, 1, 1}, 0, 0},
         FP4_ERR_SHAPE,
         "gguf.tensor.block",
         "27: e2m1 ne0 3"},
        {{"t", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 1, 192 + 8},
         FP4_ERR_FORMAT,
         "gguf.tensor.offset_align",
         "28: offset not aligned"},
        {{"t", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 1, 192 + 32},
         FP4_ERR_BOUNDS,
         "gguf.tensor.offset_order",
         "29: gap"},
        {{"t", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 1, 128},
         FP4_ERR_BOUNDS,
         "gguf.tensor.offset_order",
         "29: overlap"},
        {{"t", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 1, 0},
         FP4_ERR_BOUNDS,
         "gguf.tensor.offset_order",
         "29: aliasing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gspec s = {.nt = 3, .t = {default_t[0], default_t[1], bad[i].t}};
        const char *tn = strncmp(bad[i].rule, "gguf.tensor.name", 16) == 0 ? NULL : bad[i].t.name;
        expect(&s, bad[i].code, bad[i].rule, tn, bad[i].label);
    }
    gspec s = {.nt = 3, .t = {default_t[0], default_t[1], {n256, 4, FP4_TYPE_F32, {2, 3, 1, 2}, 0, 0}}};
    expect_ok(&s, "256-byte name, 4 dims");
    gspec t3 = {.nt = 3, .t = {default_t[0], default_t[1], {"t", 1, FP4_TYPE_F32, {1, 1, 1, 1}, 1, 192}}};
    expect_ok(&t3, "explicit offset equal to the running sum");
    /* 29: out of order (the second tensor first) */
    gspec sw = {.nt = 2, .t = {default_t[1], default_t[0]}};
    sw.t[0].set_off = 1, sw.t[0].off = 160;
    expect(&sw, FP4_ERR_BOUNDS, "gguf.tensor.offset_order", S, "29: reordered offsets");
    /* 30: two tensors of 2^63 bytes each */
    gspec big = {.nt = 2, .t = {{"a", 1, FP4_TYPE_F64, {1ull << 60, 1, 1, 1}, 0, 0},
                                {"b", 1, FP4_TYPE_F64, {1ull << 60, 1, 1, 1}, 1, 1ull << 63}}};
    expect(&big, FP4_ERR_OVERFLOW, "gguf.tensor.size_sum", "b", "30: sum of sizes wraps");
    /* 34: fewer tensor infos than declared */
    gspec few = {.set_nt = 1, .n_tensors = 3, .drop_data = 1};
    expect(&few, FP4_ERR_TRUNCATED, "gguf.truncated", NULL, "34: 3 declared, 2 present, no data");
    gspec few2 = {.set_nt = 1, .n_tensors = 3};
    bb b = {0};
    build(&few2, &b);
    fp4_gguf *g = NULL;
    CHECK(fp4_gguf_open_buffer(b.p, b.n, &g, NULL) != FP4_OK && !g); /* data bytes read as an info */
    free(b.p);
}

static void test_data(void) {
    /* 31 */
    gspec nodata = {.drop_data = 1};
    expect(&nodata, FP4_ERR_BOUNDS, "gguf.data.start", NULL, "31: data section past EOF");
    gspec none = {.nt = -1, .drop_data = 1};
    expect_ok(&none, "no tensors, file ends at the infos");
    gspec none_pad = {.nt = -1};
    expect_ok(&none_pad, "no tensors, padded");
    gspec none_tail = {.nt = -1, .tail = 1};
    expect(&none_tail, FP4_ERR_FORMAT, "gguf.trailing", NULL, "33: no tensors, trailing bytes");
    /* 32 */
    gspec cut = {.last_unpadded = 1, .cut = 1};
    expect(&cut, FP4_ERR_BOUNDS, "gguf.data.bounds", S, "32: last tensor 1 byte short");
    gspec cut2 = {.cut = 32 + 8};
    expect(&cut2, FP4_ERR_BOUNDS, "gguf.data.bounds", S, "32: last tensor cut");
    gspec unp = {.last_unpadded = 1};
    expect_ok(&unp, "last tensor unpadded");
    /* 33 */
    gspec tail1 = {.tail = 1};
    expect(&tail1, FP4_ERR_FORMAT, "gguf.trailing", NULL, "33: 1 byte after the padded end");
    gspec tail2 = {.last_unpadded = 1, .tail = 29};
    expect(&tail2, FP4_ERR_FORMAT, "gguf.padding", S, "33: junk inside the last padding");
    gspec tail3 = {.tail = 4096};
    expect(&tail3, FP4_ERR_FORMAT, "gguf.trailing", NULL, "33: a polyglot tail");
    /* padding must be zero */
    gspec pad = {.pad = 0xEE};
    expect(&pad, FP4_ERR_FORMAT, "gguf.padding", NULL, "non-zero padding before the data");
    gspec pad2 = {.pad = 0xEE, .pad_only_data = 1};
    expect(&pad2, FP4_ERR_FORMAT, "gguf.padding", W, "non-zero padding after a tensor");
}

/* 1: every truncation of a valid file is refused, except inside the last tensor's padding. */
static void test_truncations(void) {
    gspec s = {.kv = kv_bools_ok};
    bb b = {0};
    build(&s, &b);
    size_t data_end = b.n - (up(4, 32) - 4); /* the last tensor is an F32 [1], padded to 32 */
    const char *ok_rules[] = {"gguf.truncated", "gguf.n_tensors", "gguf.n_kv", "gguf.array.bounds",
                              "gguf.data.start", "gguf.data.bounds"};
    int refused = 0, bad_rule = 0;
    for (size_t n = 0; n < data_end; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact-size copy so ASan sees any over-read */
        memcpy(copy, b.p, n);
        fp4_gguf *g = NULL;
        fp4_error err;
        fp4_status st = fp4_gguf_open_buffer(copy, n, &g, &err);
        refused += st != FP4_OK && g == NULL;
        int known = 0;
        for (size_t k = 0; k < sizeof ok_rules / sizeof ok_rules[0]; k++)
            known |= strcmp(err.rule, ok_rules[k]) == 0;
        if (st != FP4_OK && !known) {
            bad_rule++;
            fprintf(stderr, "truncation %zu: rule %s\n", n, err.rule);
        }
        fp4_gguf_close(g);
        free(copy);
    }
    CHECK_EQ_INT(refused, data_end);
    CHECK_EQ_INT(bad_rule, 0);
    for (size_t n = data_end; n <= b.n; n++) {
        fp4_gguf *g = NULL;
        CHECK_MSG(fp4_gguf_open_buffer(b.p, n, &g, NULL) == FP4_OK, "length %zu inside the last padding", n);
        fp4_gguf_close(g);
    }
    free(b.p);
}

/* The same file through fp4_gguf_open: err->file, and I/O refusals. */
static void test_paths(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/fp4_gguf_rej_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    gspec s = {.magic = "GGML"};
    bb b = {0};
    build(&s, &b);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.p, 1, b.n, f) == b.n);
    fclose(f);
    free(b.p);
    fp4_gguf *g = NULL;
    fp4_error err;
    CHECK(fp4_gguf_open(path, &g, &err) == FP4_ERR_FORMAT && !g);
    CHECK(strcmp(err.file, path) == 0 && strcmp(err.rule, "gguf.magic") == 0);
    f = fopen(path, "wb");
    fclose(f);
    CHECK(fp4_gguf_open(path, &g, &err) == FP4_ERR_TRUNCATED && strcmp(err.rule, "gguf.truncated") == 0);
    remove(path);
    CHECK(fp4_gguf_open(path, &g, &err) == FP4_ERR_IO && strcmp(err.rule, "gguf.io") == 0 && !g);
    CHECK(fp4_gguf_open("/", &g, &err) == FP4_ERR_IO && strcmp(err.rule, "gguf.io") == 0);
    CHECK(fp4_gguf_open(NULL, &g, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_open_buffer(NULL, 5, &g, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_gguf_open_buffer("GGUF", 4, NULL, NULL) == FP4_ERR_INVALID_ARG);
}

/* The builder and the writer agree byte for byte on the base file. */
static void test_builder_matches_writer(void) {
    gspec s = {.align_kv = 1, .align_val = 64};
    bb b = {0};
    build(&s, &b);
    char path[256];
    snprintf(path, sizeof path, "%s/fp4_gguf_rejw_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    fp4_gguf_writer *w = NULL;
    CHECK_OK(fp4_gguf_writer_create(&w, &gerr));
    CHECK_OK(fp4_gguf_writer_add_str(w, "general.architecture", "llama", 5, &gerr));
    CHECK_OK(fp4_gguf_writer_set_alignment(w, 64, &gerr));
    for (int i = 0; i < 2; i++)
        CHECK_OK(fp4_gguf_writer_add_tensor(
            w, default_t[i].name, (fp4_type)default_t[i].type, (int32_t)default_t[i].n_dims,
            (const int64_t[]){(int64_t)default_t[i].ne[0], (int64_t)default_t[i].ne[1], 1, 1}, &gerr));
    CHECK_OK(fp4_gguf_writer_write_header(w, path, &gerr));
    for (int i = 0; i < 2; i++) {
        uint64_t n = tsize(&default_t[i]);
        uint8_t *d = malloc(n);
        for (uint64_t k = 0; k < n; k++) d[k] = (uint8_t)(0x11 + 3 * k + i);
        CHECK_OK(fp4_gguf_writer_write_tensor_data(w, i, d, n, &gerr));
        free(d);
    }
    CHECK_OK(fp4_gguf_writer_finish(w, &gerr));
    fp4_gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    uint8_t *got = malloc(b.n + 16);
    size_t n = f ? fread(got, 1, b.n + 16, f) : 0;
    if (f) fclose(f);
    CHECK_EQ_INT(n, b.n);
    CHECK(n == b.n && memcmp(got, b.p, n) == 0);
    free(got);
    free(b.p);
    remove(path);
}

int main(void) {
    test_header();
    test_kv();
    test_tensor_infos();
    test_data();
    test_truncations();
    test_paths();
    test_builder_matches_writer();
    printf("%d cases (refusals and valid twins)\n", n_cases);
    return check_report();
}
