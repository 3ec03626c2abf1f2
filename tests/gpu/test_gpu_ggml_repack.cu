/* test_gpu_ggml_repack.cu — the upload of llama.cpp's type-40 blocks left packed by the loader
 * (FP4_PACK_GGML64, FP4_LOAD_DEFER_REPACK: staged to the device and repacked there by
 * src/cuda/ggml_repack.cu) against the canonical upload of the same weights in canonical rows:
 * every byte of the device arena (payload plane, scale plane, the k_pad padding, the alignment
 * tail) downloaded and compared, and every field of the fp4_cuda_tensor. Shapes: n_in of one
 * block, not a multiple of 256 (64, 192, 320, 4160), a multiple (256, 1024), odd row counts
 * (1, 3, 5, 7, 33, 2001) and tensors of 9.6 and 18 MB (one chunk of the public upload's 32 MiB
 * stager; many of the small stagers below); random and adversarial weights (gpu_test.h: zero
 * groups and rows, scale bytes 0x00 / 0x01 / 0x7E, negative scales, all-±6 groups). The fused
 * q/k/v and gate/up tensors of the CUDA step (fp4_cu_step_upload_fused, src/cuda/step/upload.cu) built
 * from deferred parts against eager parts, byte for byte. Every arena is also compared with the
 * one the host computes from the canonical rows (expect_arena: the planes at their k_pad
 * strides, zeros elsewhere), so a staging fault both uploads share (a chunk dropped, a row
 * offset wrong) cannot pass.
 * The staging (fp4_cu_stager, device.cu): the same tensors through stagers of 4 KiB (many chunks,
 * a row per chunk, rows that do not divide the buffer), one sized to grow for a row, and one
 * stager reused across tensors of every size, fused groups included (the engine's session);
 * a NaN scale byte in the last chunk of many, in blocks and in a canonical scale plane, refused
 * with the stager still usable after; F16 rows through a small stager. Refusals: a NaN scale
 * byte inside a block (FP4_ERR_NAN_SCALE, nothing allocated), n_in % 64 (FP4_ERR_SHAPE). A
 * failure names the tensor, its shape and the first differing byte (plane, row, column).
 * FP4_GPU_QUICK=1: no tensor above 4 MB. */
#include "gpu_test.h"
#include "cuda/step/step_impl.cuh"
#include <string.h>

extern "C" void fp4_ggml_pack_row(const uint8_t *payload, const uint8_t *scales, int64_t n_in,
                                  uint8_t *blocks);

/* the weights of t packed into type-40 blocks (malloc'd), and the deferred view over them */
static uint8_t *pack_blocks(const gt_nvfp4 *t, fp4_nvfp4_view *g) {
    const int64_t n_out = t->view.n_out, n_in = t->view.n_in;
    uint8_t *blk = (uint8_t *)malloc((size_t)(n_out * (n_in / 64) * 36));
    for (int64_t r = 0; r < n_out; r++)
        fp4_ggml_pack_row(t->payload + r * (n_in / 2), t->scales + r * (n_in / 16), n_in,
                          blk + r * (n_in / 64) * 36);
    *g = t->view;
    g->payload = blk;
    g->scales = NULL;
    g->packing = FP4_PACK_GGML64;
    return blk;
}

/* The arenas of a (eager) and b (deferred), field by field and byte by byte; the first differing
 * byte is named by plane, row and column. Returns the number of differing bytes. */
static int64_t same_device_tensor(const char *what, const fp4_cuda_tensor *a, const fp4_cuda_tensor *b) {
    CHECK_MSG(
        a->type == b->type && a->n_out == b->n_out && a->n_in == b->n_in && a->k_pad == b->k_pad &&
            a->payload_stride == b->payload_stride && a->scale_stride == b->scale_stride &&
            f32_bits(a->scale2) == f32_bits(b->scale2) &&
            f32_bits(a->input_scale_inv) == f32_bits(b->input_scale_inv) && a->arena_bytes == b->arena_bytes,
        "%s: tensor fields differ (k_pad %lld/%lld, strides %lld/%lld, %lld/%lld, arena %zu/%zu)", what,
        (long long)a->k_pad, (long long)b->k_pad, (long long)a->payload_stride, (long long)b->payload_stride,
        (long long)a->scale_stride, (long long)b->scale_stride, a->arena_bytes, b->arena_bytes);
    const uint8_t *pa = (const uint8_t *)a->d_arena, *pb = (const uint8_t *)b->d_arena;
    CHECK_MSG(a->d_payload == pa && b->d_payload == pb && a->d_scales - pa == b->d_scales - pb,
              "%s: planes at different offsets of their arenas", what);
    if (a->arena_bytes != b->arena_bytes || !pa || !pb) return -1;
    const size_t n = a->arena_bytes;
    uint8_t *ha = (uint8_t *)malloc(n), *hb = (uint8_t *)malloc(n);
    gt_down(ha, pa, n);
    gt_down(hb, pb, n);
    const size_t soff = (size_t)(a->d_scales - pa);
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (ha[i] == hb[i]) continue;
        if (bad++ < 5) {
            const int in_s = i >= soff;
            const size_t off = in_s ? i - soff : i,
                         stride = (size_t)(in_s ? a->scale_stride : a->payload_stride);
            const int64_t row = (int64_t)(off / stride), col = (int64_t)(off % stride);
            const char *where = row >= a->n_out                              ? "alignment tail"
                                : col >= (in_s ? a->n_in / 16 : a->n_in / 2) ? "k_pad padding"
                                                                             : "data";
            fprintf(stderr, "  %s: arena byte %zu = %s row %lld %s %lld (%s): eager 0x%02x deferred 0x%02x\n",
                    what, i, in_s ? "scale plane" : "payload plane", (long long)row, in_s ? "group" : "byte",
                    (long long)col, where, ha[i], hb[i]);
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %zu device bytes differ (first ones above)", what, (long long)bad, n);
    free(ha), free(hb);
    return bad;
}

/* the arena the upload of v (canonical rows) must leave, computed on the host */
static uint8_t *expect_arena(const fp4_nvfp4_view *v, size_t *bytes) {
    const int64_t k_pad = (v->n_in + 255) / 256 * 256;
    const size_t ps = (size_t)(k_pad / 2), ss = (size_t)(k_pad / 16);
    const size_t pb = FP4_CU_ALIGN(ps * (size_t)v->n_out), sb = FP4_CU_ALIGN(ss * (size_t)v->n_out);
    uint8_t *h = (uint8_t *)calloc(pb + sb, 1);
    for (int64_t r = 0; r < v->n_out; r++) {
        memcpy(h + (size_t)r * ps, v->payload + r * (v->n_in / 2), (size_t)(v->n_in / 2));
        memcpy(h + pb + (size_t)r * ss, v->scales + r * (v->n_in / 16), (size_t)(v->n_in / 16));
    }
    *bytes = pb + sb;
    return h;
}

/* the device arena of a against the host's expectation for the canonical rows v, from row row0 of
 * its planes (a fused tensor's part); 0 when every byte agrees */
static int64_t same_as_host(const char *what, const fp4_cuda_tensor *a, const fp4_nvfp4_view *v,
                            int64_t row0) {
    size_t n = 0;
    uint8_t *want = expect_arena(v, &n);
    const size_t pb = FP4_CU_ALIGN((size_t)a->payload_stride * (size_t)v->n_out);
    const size_t pn = (size_t)a->payload_stride * (size_t)v->n_out,
                 sn = (size_t)a->scale_stride * (size_t)v->n_out;
    uint8_t *got = (uint8_t *)malloc(pn + sn);
    gt_down(got, a->d_payload + row0 * a->payload_stride, pn);
    gt_down(got + pn, a->d_scales + row0 * a->scale_stride, sn);
    int64_t bad = 0;
    for (size_t i = 0; i < pn + sn; i++) {
        const uint8_t w = i < pn ? want[i] : want[pb + (i - pn)];
        if (got[i] == w) continue;
        if (bad++ < 3)
            fprintf(stderr, "  %s: %s byte %zu (row %lld of the part): host 0x%02x device 0x%02x\n", what,
                    i < pn ? "payload" : "scale", i < pn ? i : i - pn,
                    (long long)(i < pn ? i / (size_t)a->payload_stride : (i - pn) / (size_t)a->scale_stride),
                    w, got[i]);
    }
    if (row0 == 0 && a->n_out == v->n_out) { /* a whole tensor: its size and alignment tails too */
        CHECK_MSG(a->arena_bytes == n, "%s: arena of %zu bytes, the host's %zu", what, a->arena_bytes, n);
        uint8_t *all = (uint8_t *)malloc(a->arena_bytes);
        gt_down(all, a->d_arena, a->arena_bytes);
        for (size_t i = 0; i < n && i < a->arena_bytes; i++)
            bad += all[i] != want[i] && ((i >= pn && i < pb) || i >= pb + sn);
        free(all);
    }
    CHECK_MSG(bad == 0, "%s: %lld bytes differ from the host's canonical arena", what, (long long)bad);
    free(want), free(got);
    return bad;
}

/* the tensor through stagers of several sizes (4 KiB: many chunks; one row a chunk; 3 rows and a
 * part: rows that do not divide the buffer), deferred and eager, against the host */
static void staged_sizes(const char *what0, const gt_nvfp4 *t, const fp4_nvfp4_view *g) {
    const size_t grow = (size_t)(t->view.n_in / 64) * 36;
    const size_t sizes[4] = {4096, grow, 3 * grow + grow / 2, (size_t)1 << 20};
    for (int i = 0; i < 4; i++) {
        fp4_cu_stager sg;
        CHECK_OK(fp4_cu_stager_open(&sg, sizes[i]));
        for (int d = 0; d < 2; d++) {
            char what[200];
            snprintf(what, sizeof what, "%s, stager %zu B (%zu), %s", what0, sizes[i], sg.bytes,
                     d ? "deferred" : "eager");
            fp4_cuda_tensor o;
            const fp4_status st = fp4_cu_tensor_upload_nvfp4_staged(&sg, d ? g : &t->view, &o);
            CHECK_MSG(st == FP4_OK, "%s: %s (%s)", what, fp4_status_str(st), fp4_cuda_last_error());
            if (st == FP4_OK) same_as_host(what, &o, &t->view, 0);
            fp4_cuda_tensor_free(&o);
        }
        fp4_cu_stager_close(&sg);
        CHECK(sg.stream == NULL && sg.host[0] == NULL && sg.dev == NULL);
    }
}

static void one_shape(int64_t n_out, int64_t n_in, int kind, float isi, uint64_t seed) {
    char what[160];
    snprintf(what, sizeof what, "tensor %lldx%lld kind %d%s", (long long)n_out, (long long)n_in, kind,
             isi > 0 ? " w4a4" : "");
    gt_nvfp4 t;
    gt_make_nvfp4(&t, n_out, n_in, 0.0125f, isi, kind, seed);
    fp4_nvfp4_view g;
    uint8_t *blk = pack_blocks(&t, &g);
    fp4_cuda_tensor a, b;
    const fp4_status sa = fp4_cuda_tensor_upload_nvfp4(&t.view, &a),
                     sb = fp4_cuda_tensor_upload_nvfp4(&g, &b);
    CHECK_MSG(sa == FP4_OK && sb == FP4_OK, "%s: eager upload %s, deferred %s (%s)", what, fp4_status_str(sa),
              fp4_status_str(sb), fp4_cuda_last_error());
    if (sa == FP4_OK && sb == FP4_OK) {
        const int64_t bad = same_device_tensor(what, &a, &b) + same_as_host(what, &a, &t.view, 0);
        printf("%-44s %zu device bytes, %lld differ\n", what, a.arena_bytes, (long long)bad);
    }
    staged_sizes(what, &t, &g);
    fp4_cuda_tensor_free(&a);
    fp4_cuda_tensor_free(&b);
    free(blk);
    gt_free_nvfp4(&t);
}

/* a fused group of np parts (q/k/v or gate/up: one row length and scale2, the rows of each in
 * order) uploaded from eager views and from deferred ones */
static void fused(fp4_cu_stager *sg, int np, const int64_t *rows, int64_t n_in, uint64_t seed) {
    char what[160];
    if (np == 3)
        snprintf(what, sizeof what, "fused q/k/v %lld+%lld+%lld x %lld", (long long)rows[0],
                 (long long)rows[1], (long long)rows[2], (long long)n_in);
    else
        snprintf(what, sizeof what, "fused gate/up %lld+%lld x %lld", (long long)rows[0], (long long)rows[1],
                 (long long)n_in);
    gt_nvfp4 t[3];
    fp4_nvfp4_view g[3];
    uint8_t *blk[3];
    fp4_tensor e[3], d[3];
    const fp4_tensor *pe[3], *pd[3];
    for (int i = 0; i < np; i++) {
        gt_make_nvfp4(&t[i], rows[i], n_in, 0.03125f, 0.0f, i == 1, seed + (uint64_t)i);
        blk[i] = pack_blocks(&t[i], &g[i]);
        memset(&e[i], 0, sizeof e[i]);
        e[i].name = "part", e[i].type = FP4_TYPE_NVFP4_E2M1, e[i].n_dims = 2, e[i].ne[0] = n_in;
        e[i].ne[1] = rows[i], e[i].ne[2] = e[i].ne[3] = 1, e[i].st_dtype = -1;
        d[i] = e[i];
        e[i].nvfp4 = t[i].view;
        d[i].nvfp4 = g[i];
        pe[i] = &e[i], pd[i] = &d[i];
    }
    fp4_cuda_tensor a, b;
    const fp4_status sa = fp4_cu_step_upload_fused(sg, pe, np, &a),
                     sb = fp4_cu_step_upload_fused(sg, pd, np, &b);
    CHECK_MSG(sa == FP4_OK && sb == FP4_OK, "%s: eager %s, deferred %s (%s)", what, fp4_status_str(sa),
              fp4_status_str(sb), fp4_cuda_last_error());
    if (sa == FP4_OK && sb == FP4_OK) {
        int64_t bad = same_device_tensor(what, &a, &b), r = 0;
        CHECK_MSG(a.n_out == rows[0] + rows[1] + (np == 3 ? rows[2] : 0), "%s: %lld rows", what,
                  (long long)a.n_out);
        for (int i = 0; i < np; r += rows[i], i++) /* each part's rows where the fused tensor has them */
            bad += same_as_host(what, &b, &t[i].view, r);
        printf("%-44s %zu device bytes, %lld differ\n", what, a.arena_bytes, (long long)bad);
    }
    fp4_cuda_tensor_free(&a);
    fp4_cuda_tensor_free(&b);
    for (int i = 0; i < np; i++)
        free(blk[i]), gt_free_nvfp4(&t[i]);
}

/* F16 rows (the engine's head and embedding tables take this path) through a 4 KiB stager: rows of
 * 1 KiB, four a chunk, the last chunk partial; and a row larger than the stager (the plain copy) */
static void dense_staged(void) {
    const int64_t n_out = 103, n_in = 512;
    const size_t bytes = (size_t)(n_out * n_in * 2);
    uint8_t *h = (uint8_t *)malloc(bytes), *back = (uint8_t *)malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (uint8_t)(i * 2654435761u >> 24) & 0x7B; /* no F16 NaN pattern needed: bytes only */
    fp4_cu_stager sg;
    CHECK_OK(fp4_cu_stager_open(&sg, 4096));
    for (int big = 0; big < 2; big++) {
        const int64_t rows = big ? 3 : n_out, cols = big ? 4096 : n_in; /* 8 KiB rows > 4 KiB */
        fp4_cuda_tensor o;
        const fp4_status st = fp4_cu_tensor_upload_staged(&sg, FP4_TYPE_F16, h, rows, cols, &o);
        CHECK_MSG(st == FP4_OK, "F16 %lldx%lld staged: %s (%s)", (long long)rows, (long long)cols,
                  fp4_status_str(st), fp4_cuda_last_error());
        if (st == FP4_OK) {
            gt_down(back, o.d_payload, (size_t)(rows * cols * 2));
            CHECK_MSG(!memcmp(back, h, (size_t)(rows * cols * 2)), "F16 %lldx%lld staged: bytes differ",
                      (long long)rows, (long long)cols);
        }
        fp4_cuda_tensor_free(&o);
    }
    fp4_cu_stager_close(&sg);
    free(h), free(back);
}

static void refusals(void) {
    gt_nvfp4 t;
    gt_make_nvfp4(&t, 3, 128, 0.5f, 0.0f, 0, 99);
    fp4_nvfp4_view g;
    uint8_t *blk = pack_blocks(&t, &g);
    fp4_cuda_tensor o;
    blk[(2 * 2 + 1) * 36 + 3] = 0x7F; /* row 2, block 1, group 7 */
    fp4_status st = fp4_cuda_tensor_upload_nvfp4(&g, &o);
    CHECK_MSG(st == FP4_ERR_NAN_SCALE && o.d_arena == NULL, "NaN scale in a block: %s", fp4_status_str(st));
    int64_t br = -1, bc = -1;
    CHECK(fp4_nvfp4_view_check(&g, &br, &bc) == FP4_ERR_NAN_SCALE && br == 2 && bc == 7);
    blk[(2 * 2 + 1) * 36 + 3] = 0x38;
    /* through a stager of 4 KiB: a NaN in the last of many chunks, in blocks and in a canonical
     * scale plane; the flag is cleared for the next tensor, which uploads */
    gt_nvfp4 big;
    gt_make_nvfp4(&big, 200, 256, 0.5f, 0.0f, 0, 98); /* 200 rows of 144 B of blocks: 8 chunks */
    fp4_nvfp4_view bg;
    uint8_t *bblk = pack_blocks(&big, &bg);
    fp4_cu_stager sg;
    CHECK_OK(fp4_cu_stager_open(&sg, 4096));
    const uint8_t keep = bblk[(199 * 4 + 3) * 36 + 2], keeps = big.scales[199 * 16 + 15];
    bblk[(199 * 4 + 3) * 36 + 2] = 0xFF; /* row 199, block 3, group 14: -NaN */
    st = fp4_cu_tensor_upload_nvfp4_staged(&sg, &bg, &o);
    CHECK_MSG(st == FP4_ERR_NAN_SCALE && o.d_arena == NULL, "NaN in the last chunk: %s", fp4_status_str(st));
    bblk[(199 * 4 + 3) * 36 + 2] = keep;
    big.scales[199 * 16 + 15] = 0x7F;
    st = fp4_cu_tensor_upload_nvfp4_staged(&sg, &big.view, &o);
    CHECK_MSG(st == FP4_ERR_NAN_SCALE && o.d_arena == NULL, "NaN in a canonical scale plane: %s",
              fp4_status_str(st));
    big.scales[199 * 16 + 15] = keeps;
    st = fp4_cu_tensor_upload_nvfp4_staged(&sg, &bg, &o);
    CHECK_MSG(st == FP4_OK, "after a refusal: %s (%s)", fp4_status_str(st), fp4_cuda_last_error());
    if (st == FP4_OK) same_as_host("after a refusal", &o, &big.view, 0);
    fp4_cuda_tensor_free(&o);
    fp4_cu_stager_close(&sg);
    fp4_cu_stager_close(&sg); /* idempotent */
    free(bblk);
    gt_free_nvfp4(&big);
    g.n_in = 96; /* not whole blocks */
    st = fp4_cuda_tensor_upload_nvfp4(&g, &o);
    CHECK_MSG(st == FP4_ERR_SHAPE && o.d_arena == NULL, "n_in 96 in blocks: %s", fp4_status_str(st));
    free(blk);
    gt_free_nvfp4(&t);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    const int quick = gt_quick();
    static const int64_t shapes[][2] = {{1, 64},   {3, 64},    {5, 192},   {7, 320}, {2, 256},
                                        {9, 1024}, {33, 4160}, {1, 16384}, {64, 576}};
    uint64_t seed = 1000;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int kind = 0; kind < 2; kind++)
            one_shape(shapes[i][0], shapes[i][1], kind, 0.0f, seed++);
    one_shape(5, 320, 0, 1.0f / 6.0f, seed++); /* W4A4: the input scale travels unchanged */
    if (!quick) {
        one_shape(2001, 16384, 0, 0.0f, seed++); /* 18 MB of blocks: 2001 chunks of a row .. 19 of 1 MiB */
        one_shape(4096, 4160, 1, 0.0f, seed++);  /* 9.6 MB: one chunk, n_in % 256 != 0 */
    }
    /* the engine's session: one stager for every fused group, at the engine's size and at 4 KiB
     * (parts across many chunks, one part's rows in another's chunk never) */
    const int64_t qkv[3] = {256, 128, 128}, qkv_odd[3] = {7, 3, 5}, gu[3] = {512, 512, 0};
    const size_t sizes[2] = {FP4_CU_STAGE_BYTES, 4096};
    for (int i = 0; i < 2; i++) {
        fp4_cu_stager sg;
        CHECK_OK(fp4_cu_stager_open(&sg, sizes[i]));
        fused(&sg, 3, qkv, 256, 77);
        fused(&sg, 3, qkv_odd, 320, 78);
        fused(&sg, 2, gu, 256, 79);
        fused(&sg, 2, gu, 4160, 80);
        fused(&sg, 2, gu, 16384, 81); /* a row of 9216 B of blocks: the 4 KiB stager grows */
        CHECK(sg.bytes >= 9216);
        fp4_cu_stager_close(&sg);
    }
    dense_staged();
    refusals();
    return check_report();
}
