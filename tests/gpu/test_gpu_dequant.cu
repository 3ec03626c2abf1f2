/* test_gpu_dequant.cu — the dequant fixture on the GPU: every finite E4M3FN byte x every E2M1
 * code x several scale2, bit-identical to fp4_nvfp4_dequant_row (f32) and to its RNE f16/bf16
 * roundings; the SPEC §2 worked fixture; rows padded to k_pad; embedding lookup (NVFP4, F16,
 * BF16, out-of-range ids); argument checks that return a status. */
#include "gpu_test.h"

/* One row per scale2; group g uses finite scale byte #g and holds codes 0..15 in order. */
static void fixture_all_bytes(void) {
    uint8_t finite[256];
    int nf = 0;
    for (int b = 0; b < 256; b++)
        if (!fp4_e4m3fn_is_nan((uint8_t)b)) finite[nf++] = (uint8_t)b;
    CHECK_EQ_INT(nf, 254);
    const float s2[] = {1.0f, 0.25f, 3.0517578125e-05f, 7.0f / 3.0f, 1.7e-38f, 1e30f, 0x1p-126f * 3.0f};
    const int64_t n_out = (int64_t)(sizeof s2 / sizeof s2[0]), n_in = (int64_t)nf * 16;
    for (int64_t r = 0; r < n_out; r++) {
        uint8_t *payload = (uint8_t *)malloc((size_t)n_in / 2),
                *scales = (uint8_t *)malloc((size_t)n_in / 16);
        for (int g = 0; g < nf; g++) {
            for (int j = 0; j < 8; j++) payload[g * 8 + j] = (uint8_t)((2 * j) | ((2 * j + 1) << 4));
            scales[g] = finite[g];
        }
        fp4_nvfp4_view v = {payload, scales, s2[r], 0.0f, 1, n_in};
        fp4_cuda_tensor t;
        CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&v, &t));
        float *want = (float *)malloc((size_t)n_in * 4), *got = (float *)malloc((size_t)n_in * 4);
        CHECK_OK(fp4_nvfp4_dequant_row(payload, scales, s2[r], n_in, want));
        float *d32 = gt_dev_poison(n_in);
        uint16_t *d16 = (uint16_t *)gt_dev((size_t)n_in * 2), *db16 = (uint16_t *)gt_dev((size_t)n_in * 2);
        CHECK_OK(fp4_cuda_nvfp4_dequant(&t, 0, 1, FP4_TYPE_F32, d32, NULL));
        CHECK_OK(fp4_cuda_nvfp4_dequant(&t, 0, 1, FP4_TYPE_F16, d16, NULL));
        CHECK_OK(fp4_cuda_nvfp4_dequant(&t, 0, 1, FP4_TYPE_BF16, db16, NULL));
        gt_sync("dequant");
        gt_down(got, d32, (size_t)n_in * 4);
        gt_cmp_bits("dequant f32", want, got, n_in);
        uint16_t *h16 = (uint16_t *)malloc((size_t)n_in * 2);
        gt_down(h16, d16, (size_t)n_in * 2);
        int64_t bad = 0;
        for (int64_t i = 0; i < n_in; i++) bad += h16[i] != fp4_f32_to_f16(want[i]);
        CHECK_MSG(bad == 0, "dequant f16: %lld differ (scale2 %g)", (long long)bad, s2[r]);
        gt_down(h16, db16, (size_t)n_in * 2);
        bad = 0;
        for (int64_t i = 0; i < n_in; i++) bad += h16[i] != fp4_f32_to_bf16(want[i]);
        CHECK_MSG(bad == 0, "dequant bf16: %lld differ (scale2 %g)", (long long)bad, s2[r]);
        free(h16);
        cudaFree(d32);
        cudaFree(d16);
        cudaFree(db16);
        free(want);
        free(got);
        free(payload);
        free(scales);
        fp4_cuda_tensor_free(&t);
    }
}

static void worked_fixture(void) {
    const uint8_t payload[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
    const uint8_t scale[1] = {0x38};
    const float want[16] = {0, 0.125f, 0.25f, 0.375f, 0.5f, 0.75f, 1.0f, 1.5f,
                            -0.0f, -0.125f, -0.25f, -0.375f, -0.5f, -0.75f, -1.0f, -1.5f};
    fp4_nvfp4_view v = {payload, scale, 0.25f, 0.0f, 1, 16};
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&v, &t));
    CHECK_EQ_INT(t.k_pad, 256);
    float *d = gt_dev_poison(16), got[16];
    CHECK_OK(fp4_cuda_nvfp4_dequant(&t, 0, 1, FP4_TYPE_F32, d, NULL));
    gt_sync("fixture");
    gt_down(got, d, sizeof got);
    gt_cmp_bits("worked fixture", want, got, 16);
    cudaFree(d);
    fp4_cuda_tensor_free(&t);
}

/* Many rows, n_in not a multiple of 256 (padded upload), a row range. */
static void padded_rows(void) {
    const int64_t n_out = 53, n_in = 16 * 37;
    gt_nvfp4 w;
    gt_make_nvfp4(&w, n_out, n_in, 0.0123f, 0.0f, 1, 77);
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload_nvfp4(&w.view, &t));
    CHECK_EQ_INT(t.k_pad, 768);
    const int64_t r0 = 5, nr = 40;
    float *d = gt_dev_poison(nr * n_in);
    float *got = (float *)malloc((size_t)(nr * n_in) * 4), *want = (float *)malloc((size_t)(nr * n_in) * 4);
    CHECK_OK(fp4_cuda_nvfp4_dequant(&t, r0, nr, FP4_TYPE_F32, d, NULL));
    gt_sync("padded");
    gt_down(got, d, (size_t)(nr * n_in) * 4);
    for (int64_t r = 0; r < nr; r++)
        fp4_nvfp4_dequant_row(w.payload + (r0 + r) * (n_in / 2), w.scales + (r0 + r) * (n_in / 16), 0.0123f,
                              n_in, want + r * n_in);
    gt_cmp_bits("padded rows", want, got, nr * n_in);
    /* embedding over the same table, with out-of-range ids */
    const int32_t ids[6] = {0, 52, 7, -1, 53, 7};
    int32_t *did = (int32_t *)gt_dev(sizeof ids);
    gt_up(did, ids, sizeof ids);
    float *de = gt_dev_poison(6 * n_in);
    CHECK_OK(fp4_cuda_embed(&t, did, 6, de, NULL));
    gt_sync("embed nvfp4");
    float *ge = (float *)malloc((size_t)(6 * n_in) * 4), *we = (float *)calloc((size_t)(6 * n_in), 4);
    gt_down(ge, de, (size_t)(6 * n_in) * 4);
    for (int i = 0; i < 6; i++)
        if (ids[i] >= 0 && ids[i] < n_out)
            fp4_nvfp4_dequant_row(w.payload + ids[i] * (n_in / 2), w.scales + ids[i] * (n_in / 16), 0.0123f,
                                  n_in, we + i * n_in);
    gt_cmp_bits("embed nvfp4", we, ge, 6 * n_in);
    free(ge);
    free(we);
    cudaFree(de);
    cudaFree(did);
    cudaFree(d);
    free(got);
    free(want);
    gt_free_nvfp4(&w);
    fp4_cuda_tensor_free(&t);
}

static void embed_half(int64_t type) {
    const int64_t n_out = 19, n_in = 72;
    test_rng r = {(uint64_t)type};
    uint16_t *h = (uint16_t *)malloc((size_t)(n_out * n_in) * 2);
    for (int64_t i = 0; i < n_out * n_in; i++) {
        const float f = rng_normal(&r) * 3.0f;
        h[i] = type == FP4_TYPE_BF16 ? fp4_f32_to_bf16(f) : fp4_f32_to_f16(f);
    }
    fp4_cuda_tensor t;
    CHECK_OK(fp4_cuda_tensor_upload(type, h, n_out, n_in, &t));
    const int32_t ids[4] = {18, 0, 100, 3};
    int32_t *did = (int32_t *)gt_dev(sizeof ids);
    gt_up(did, ids, sizeof ids);
    float *d = gt_dev_poison(4 * n_in), *got = (float *)malloc((size_t)(4 * n_in) * 4),
          *want = (float *)calloc((size_t)(4 * n_in), 4);
    CHECK_OK(fp4_cuda_embed(&t, did, 4, d, NULL));
    gt_sync("embed half");
    gt_down(got, d, (size_t)(4 * n_in) * 4);
    for (int i = 0; i < 4; i++)
        if (ids[i] < n_out)
            for (int64_t k = 0; k < n_in; k++) {
                const uint16_t v = h[ids[i] * n_in + k];
                want[i * n_in + k] = type == FP4_TYPE_BF16 ? fp4_bf16_to_f32(v) : fp4_f16_to_f32(v);
            }
    gt_cmp_bits(type == FP4_TYPE_BF16 ? "embed bf16" : "embed f16", want, got, 4 * n_in);
    free(got);
    free(want);
    free(h);
    cudaFree(d);
    cudaFree(did);
    fp4_cuda_tensor_free(&t);
}

static void arguments(void) {
    fp4_cuda_tensor t;
    memset(&t, 0, sizeof t);
    CHECK_EQ_INT(fp4_cuda_nvfp4_dequant(NULL, 0, 1, FP4_TYPE_F32, (void *)16, NULL), FP4_ERR_INVALID_ARG);
    CHECK_EQ_INT(fp4_cuda_nvfp4_dequant(&t, 0, 1, FP4_TYPE_F32, (void *)16, NULL), FP4_ERR_INVALID_ARG);
    uint8_t p[8] = {0}, s[1] = {0x7F};
    fp4_nvfp4_view v = {p, s, 1.0f, 0.0f, 1, 16};
    CHECK_EQ_INT(fp4_cuda_tensor_upload_nvfp4(&v, &t), FP4_ERR_NAN_SCALE); /* no kernel sees a NaN scale */
    s[0] = 0x38;
    v.scale2 = -1.0f;
    CHECK_EQ_INT(fp4_cuda_tensor_upload_nvfp4(&v, &t), FP4_ERR_SCALE2);
    CHECK_EQ_INT(fp4_cuda_tensor_upload(FP4_TYPE_F32, p, 1, 8, &t), FP4_ERR_UNSUPPORTED);
    CHECK_EQ_INT(fp4_cuda_tensor_upload(FP4_TYPE_F16, p, 1, 4, &t), FP4_ERR_SHAPE);
    fp4_cuda_tensor_free(NULL);
    fp4_cuda_scratch_free(NULL);
    int n = 0;
    CHECK_OK(fp4_cuda_device_count(&n));
    CHECK(n >= 1);
    fp4_cuda_device_info info;
    CHECK_OK(fp4_cuda_init(0, &info));
    CHECK(info.cc_major >= 8 && info.sm_count > 0);
    CHECK_EQ_INT(fp4_cuda_init(n, NULL), FP4_ERR_INVALID_ARG);
    printf("device: %s, cc %d.%d, %d SMs, L2 %zu MB\n", info.name, info.cc_major, info.cc_minor,
           info.sm_count, info.l2_bytes >> 20);
}

int main(void) {
    GT_REQUIRE_DEVICE();
    arguments();
    worked_fixture();
    fixture_all_bytes();
    padded_rows();
    embed_half(FP4_TYPE_F16);
    embed_half(FP4_TYPE_BF16);
    return check_report();
}
