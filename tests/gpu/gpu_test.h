/* gpu_test.h — helpers shared by the GPU tests (header-only, static): device buffers that fail
 * the test instead of exiting, seeded NVFP4 tensors (random and adversarial), bit comparison
 * that prints the first few (index, expected, actual) triples, and the quick switch
 * (FP4_GPU_QUICK=1, used under compute-sanitizer) that shrinks the shapes. The tests use the
 * public API (fp4lane_cuda.h) only: they test the routes of fp4_cuda_project(); the kernel lab
 * (dev/cuda) tests the variants. */
#ifndef FP4_GPU_TEST_H
#define FP4_GPU_TEST_H

#include "fp4lane_cuda.h"
extern "C" {
#include "check.h"
}
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

static int gt_quick(void) {
    const char *q = getenv("FP4_GPU_QUICK");
    return q && q[0] == '1';
}

/* Skip cleanly on a machine without a GPU: the standard line with nothing counted. */
#define GT_REQUIRE_DEVICE()                                                                         \
    do {                                                                                            \
        if (fp4_cuda_available() != FP4_OK) {                                                       \
            check_gpu_skip();                                          \
            return check_report();                                                                  \
        }                                                                                           \
        CHECK_OK(fp4_cuda_init(0, NULL));                                                           \
    } while (0)

static void *gt_dev(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    CHECK_MSG(e == cudaSuccess, "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    return e == cudaSuccess ? p : NULL;
}
static void gt_up(void *d, const void *h, size_t bytes) {
    cudaError_t e = cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    CHECK_MSG(e == cudaSuccess, "H2D: %s", cudaGetErrorString(e));
}
static void gt_down(void *h, const void *d, size_t bytes) {
    cudaError_t e = cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    CHECK_MSG(e == cudaSuccess, "D2H: %s", cudaGetErrorString(e));
}
static void gt_sync(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    CHECK_MSG(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
}
static float *gt_dev_floats(const float *h, int64_t n) {
    float *d = (float *)gt_dev((size_t)n * 4);
    if (d) gt_up(d, h, (size_t)n * 4);
    return d;
}
/* NaN-poisoned output buffer: an element the kernel forgot to write shows up. */
static float *gt_dev_poison(int64_t n) {
    float *d = (float *)gt_dev((size_t)n * 4);
    if (d) cudaMemset(d, 0xFF, (size_t)n * 4);
    return d;
}

/* Bit-for-bit comparison of n floats; prints up to 5 mismatches; returns the count. */
static int64_t gt_cmp_bits(const char *what, const float *want, const float *got, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (f32_bits(want[i]) != f32_bits(got[i])) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: want %.9g (0x%08x) got %.9g (0x%08x)\n", what, (long long)i,
                        want[i], f32_bits(want[i]), got[i], f32_bits(got[i]));
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld differ", what, (long long)bad, (long long)n);
    return bad;
}

static int64_t gt_cmp_bytes(const char *what, const uint8_t *want, const uint8_t *got, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (want[i] != got[i]) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: want 0x%02x got 0x%02x\n", what, (long long)i, want[i], got[i]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld bytes differ", what, (long long)bad, (long long)n);
    return bad;
}

/* ---- seeded NVFP4 tensors ---- */

typedef struct gt_nvfp4 {
    uint8_t *payload, *scales;
    fp4_nvfp4_view view;
} gt_nvfp4;

/* A finite E4M3FN byte: lo..hi range of the positive bytes, sometimes negative. */
static uint8_t gt_scale_byte(test_rng *r, int lo, int hi, int allow_negative) {
    uint8_t b = (uint8_t)(lo + (int)(rng_u64(r) % (uint64_t)(hi - lo + 1)));
    if (b == 0x7F) b = 0x7E;
    if (allow_negative && (rng_u64(r) & 7) == 0) b |= 0x80;
    return b;
}

/* kind 0: random codes, realistic scales (0x28..0x5F: 0.03..~15);
 * kind 1: adversarial: zero groups, zero rows, max scale bytes 0x7E, tiny 0x01, negative scales,
 *         all-±6 groups, scale byte 0x00 (value 0). */
static void gt_make_nvfp4(gt_nvfp4 *t, int64_t n_out, int64_t n_in, float scale2, float input_scale_inv,
                          int kind, uint64_t seed) {
    test_rng r = {seed};
    t->payload = (uint8_t *)malloc((size_t)(n_out * n_in / 2));
    t->scales = (uint8_t *)malloc((size_t)(n_out * n_in / 16));
    for (int64_t i = 0; i < n_out * n_in / 2; i++) t->payload[i] = (uint8_t)rng_u64(&r);
    for (int64_t i = 0; i < n_out * n_in / 16; i++) t->scales[i] = gt_scale_byte(&r, 0x28, 0x5F, 0);
    if (kind == 1) {
        const int64_t ng = n_in / 16;
        for (int64_t row = 0; row < n_out; row++) {
            for (int64_t g = 0; g < ng; g++) {
                uint8_t *p = t->payload + row * (n_in / 2) + g * 8;
                uint8_t *s = t->scales + row * ng + g;
                switch (rng_u64(&r) % 9) {
                case 0: memset(p, 0, 8); break;                                 /* zero codes */
                case 1: *s = 0x7E; break;                                       /* 448 */
                case 2: *s = 0x01; break;                                       /* 2^-9 */
                case 3: *s = gt_scale_byte(&r, 0x01, 0x7E, 1); break;           /* anything, +- */
                case 4: memset(p, 0x77, 8); *s = 0x7E; break;                   /* all +6 at 448 */
                case 5: memset(p, 0xFF, 8); *s = 0x7E; break;                   /* all -6 at 448 */
                case 6: *s = 0x00; break;                                       /* scale 0 */
                case 7: memset(p, 0x88, 8); break;                              /* all -0 */
                default: break;
                }
            }
            if (row % 7 == 3) memset(t->payload + row * (n_in / 2), 0, (size_t)(n_in / 2)); /* zero row */
        }
    }
    t->view.payload = t->payload;
    t->view.scales = t->scales;
    t->view.scale2 = scale2;
    t->view.input_scale_inv = input_scale_inv;
    t->view.n_out = n_out;
    t->view.n_in = n_in;
    t->view.packing = FP4_PACK_CANONICAL;
}

static void gt_free_nvfp4(gt_nvfp4 *t) {
    free(t->payload);
    free(t->scales);
}

/* Activations: kind 0 normal(0,1); kind 1 adversarial per 256-block: zero blocks, a repeated
 * maximum of both signs (ties of the first-max rule), huge (~1e24) and tiny (subnormal)
 * values, exact powers of two, and grid points of the Q8_K rounding. */
static void gt_make_act(float *x, int64_t n, int kind, uint64_t seed) {
    test_rng r = {seed};
    for (int64_t i = 0; i < n; i++) x[i] = rng_normal(&r);
    if (kind != 1) return;
    for (int64_t b = 0; b * 256 < n; b++) {
        float *v = x + b * 256;
        const int64_t len = n - b * 256 < 256 ? n - b * 256 : 256;
        switch (b % 8) {
        case 0: memset(v, 0, (size_t)len * 4); break;
        case 1: /* -m first, then +m: the first in index order wins */
            v[3 % len] = -5.0f;
            v[200 % len] = 5.0f;
            break;
        case 2: /* huge, but no super-block total overflows f32 (inf - inf would give a NaN
                 * whose bits are the host CPU's choice, not the contract's) */
            for (int64_t i = 0; i < len; i++) v[i] *= 1e24f;
            v[0] = 3.0e25f;
            break;
        case 3:
            for (int64_t i = 0; i < len; i++) v[i] = (float)(rng_normal(&r) * 1e-40);
            break;
        case 4:
            for (int64_t i = 0; i < len; i++)
                v[i] = ldexpf(1.0f, (int)(rng_u64(&r) % 20) - 10) * ((i & 1) ? -1.f : 1.f);
            break;
        case 5: /* values that land on half-integers of the Q8_K grid: ties to even */
            for (int64_t i = 0; i < len; i++) v[i] = (float)((int)(rng_u64(&r) % 255) - 127) * 0.5f;
            v[0] = 127.0f;
            break;
        case 6: /* a lone nonzero */
            memset(v, 0, (size_t)len * 4);
            v[len - 1] = -1e-3f;
            break;
        default: break;
        }
    }
}

/* ---- one projection case: a device tensor, its activations, scratch and output buffers ---- */

typedef struct gt_case {
    fp4_cuda_tensor t;         /* owned: freed by gt_case_free */
    int64_t n_out, n_in;
    int maxc;                  /* the widest call of the case */
    float *dx, *dy;            /* device: x (maxc, n_in), y (maxc, n_out) */
    float *got, *again;        /* host: (maxc, n_out) */
    fp4_cuda_scratch s;        /* fp4_cuda_scratch_bytes(t, maxc) */
} gt_case;

static int gt_max_cols(const int *cols, int n) {
    int m = 1;
    for (int i = 0; i < n; i++) m = cols[i] > m ? cols[i] : m;
    return m;
}

/* Takes t (uploaded by the caller); x: maxc columns of t->n_in values on the host. */
static void gt_case_init(gt_case *c, const fp4_cuda_tensor *t, const float *x, int maxc) {
    memset(c, 0, sizeof *c);
    c->t = *t;
    c->n_out = t->n_out;
    c->n_in = t->n_in;
    c->maxc = maxc;
    c->dx = gt_dev_floats(x, c->n_in * maxc);
    c->dy = gt_dev_poison(c->n_out * maxc);
    c->got = (float *)malloc((size_t)(c->n_out * maxc) * 4);
    c->again = (float *)malloc((size_t)(c->n_out * maxc) * 4);
    CHECK_OK(fp4_cuda_scratch_alloc(fp4_cuda_scratch_bytes(t, maxc), &c->s));
}

/* y = W x for nc columns through fp4_cuda_project (the table must pick `route`) into c->got, the
 * output NaN-poisoned first; a second call must give the same bits (c->again). */
static void gt_case_project(gt_case *c, fp4_mode mode, int nc, const char *route) {
    const size_t bytes = (size_t)(c->n_out * nc) * 4;
    CHECK_MSG(!strcmp(fp4_cuda_route_name(&c->t, mode, nc), route), "route %s, want %s",
              fp4_cuda_route_name(&c->t, mode, nc), route);
    for (int rep = 0; rep < 2; rep++) {
        cudaMemset(c->dy, 0xFF, bytes);
        const fp4_status st = fp4_cuda_project(&c->t, mode, c->dx, nc, c->dy, &c->s, NULL);
        CHECK_MSG(st == FP4_OK, "%s cols %d: %s %s", route, nc, fp4_status_str(st), fp4_cuda_last_error());
        gt_sync(route);
        gt_down(rep ? c->again : c->got, c->dy, bytes);
    }
    CHECK_MSG(!memcmp(c->got, c->again, bytes), "%s cols %d: two runs differ", route, nc);
    if (nc == 1) { /* the item kernel's own activation pass (QIN) against the separate pass: same bytes */
        setenv("FP4LANE_CUDA_NO_QIN", "1", 1);
        cudaMemset(c->dy, 0xFF, bytes);
        const fp4_status st = fp4_cuda_project(&c->t, mode, c->dx, nc, c->dy, &c->s, NULL);
        unsetenv("FP4LANE_CUDA_NO_QIN");
        CHECK_MSG(st == FP4_OK, "%s NO_QIN: %s %s", route, fp4_status_str(st), fp4_cuda_last_error());
        gt_sync(route);
        gt_down(c->again, c->dy, bytes);
        CHECK_MSG(!memcmp(c->got, c->again, bytes), "%s %lldx%lld: QIN and the separate pass differ", route,
                  (long long)c->n_out, (long long)c->n_in);
        /* FP4LANE_CUDA_DECODE's variants of the item kernel (a16_stream.cuh DEC_*): each bit alone
         * and all of them, and none ("0"), the same bytes as the form the test runs under (the
         * variable as the caller set it, or the default), which is put back after */
        static const char *const dec[] = {"0", "1", "2", "4", "8", "16", "32", "63"};
        const char *was = getenv("FP4LANE_CUDA_DECODE");
        char keep[16] = "";
        if (was) snprintf(keep, sizeof keep, "%s", was);
        for (size_t v = 0; v < sizeof dec / sizeof dec[0]; v++) {
            setenv("FP4LANE_CUDA_DECODE", dec[v], 1);
            cudaMemset(c->dy, 0xFF, bytes);
            const fp4_status sv = fp4_cuda_project(&c->t, mode, c->dx, nc, c->dy, &c->s, NULL);
            if (was) setenv("FP4LANE_CUDA_DECODE", keep, 1);
            else unsetenv("FP4LANE_CUDA_DECODE");
            CHECK_MSG(sv == FP4_OK, "%s DECODE=%s: %s %s", route, dec[v], fp4_status_str(sv),
                      fp4_cuda_last_error());
            gt_sync(route);
            gt_down(c->again, c->dy, bytes);
            CHECK_MSG(!memcmp(c->got, c->again, bytes), "%s %lldx%lld: DECODE=%s differs", route,
                      (long long)c->n_out, (long long)c->n_in, dec[v]);
        }
    }
}

static void gt_case_free(gt_case *c) {
    cudaFree(c->dx);
    cudaFree(c->dy);
    free(c->got);
    free(c->again);
    fp4_cuda_scratch_free(&c->s);
    fp4_cuda_tensor_free(&c->t);
}

#endif
