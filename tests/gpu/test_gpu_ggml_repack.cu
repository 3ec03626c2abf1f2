/* test_gpu_ggml_repack.cu — the upload of llama.cpp's type-40 blocks left packed by the loader
 * (FP4_PACK_GGML64, FP4_LOAD_DEFER_REPACK: staged to the device and repacked there by
 * src/cuda/ggml_repack.cu) against the canonical upload of the same weights in canonical rows:
 * every byte of the device arena (payload plane, scale plane, the k_pad padding, the alignment
 * tail) downloaded and compared, and every field of the fp4_cuda_tensor. Shapes: n_in of one
 * block, not a multiple of 256 (64, 192, 320, 4160), a multiple (256, 1024), odd row counts
 * (1, 3, 5, 7, 33, 2001) and one tensor larger than the 16 MiB staging buffer (several chunks,
 * a partial last one); random and adversarial weights (gpu_test.h: zero groups and rows, scale
 * bytes 0x00 / 0x01 / 0x7E, negative scales, all-±6 groups). The fused q/k/v and gate/up tensors
 * of the CUDA step (upload_fused, src/runtime/step_upload.cuh) built from deferred parts against
 * eager parts, byte for byte. Refusals: a NaN scale byte inside a block (FP4_ERR_NAN_SCALE,
 * nothing allocated), n_in % 64 (FP4_ERR_SHAPE). A failure names the tensor, its shape and the
 * first differing byte (plane, row, column). FP4_GPU_QUICK=1: no tensor above the staging size. */
#include "gpu_test.h"
#include "cuda/common.cuh"
#include "runtime/backend.h"
#include "runtime/step_upload.cuh"
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
        const int64_t bad = same_device_tensor(what, &a, &b);
        printf("%-44s %zu device bytes, %lld differ\n", what, a.arena_bytes, (long long)bad);
    }
    fp4_cuda_tensor_free(&a);
    fp4_cuda_tensor_free(&b);
    free(blk);
    gt_free_nvfp4(&t);
}

/* a fused group of np parts (q/k/v or gate/up: one row length and scale2, the rows of each in
 * order) uploaded from eager views and from deferred ones */
static void fused(int np, const int64_t *rows, int64_t n_in, uint64_t seed) {
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
    const fp4_status sa = upload_fused(pe, np, &a), sb = upload_fused(pd, np, &b);
    CHECK_MSG(sa == FP4_OK && sb == FP4_OK, "%s: eager %s, deferred %s (%s)", what, fp4_status_str(sa),
              fp4_status_str(sb), fp4_cuda_last_error());
    if (sa == FP4_OK && sb == FP4_OK) {
        const int64_t bad = same_device_tensor(what, &a, &b);
        printf("%-44s %zu device bytes, %lld differ\n", what, a.arena_bytes, (long long)bad);
    }
    fp4_cuda_tensor_free(&a);
    fp4_cuda_tensor_free(&b);
    for (int i = 0; i < np; i++)
        free(blk[i]), gt_free_nvfp4(&t[i]);
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
        one_shape(2001, 16384, 0, 0.0f, seed++); /* 18 MB of blocks: two chunks, the last partial */
        one_shape(4096, 4160, 1, 0.0f, seed++);  /* 9.6 MB: one chunk, n_in % 256 != 0 */
    }
    const int64_t qkv[3] = {256, 128, 128}, qkv_odd[3] = {7, 3, 5}, gu[3] = {512, 512, 0};
    fused(3, qkv, 256, 77);
    fused(3, qkv_odd, 320, 78);
    fused(2, gu, 256, 79);
    fused(2, gu, 4160, 80);
    refusals();
    return check_report();
}
