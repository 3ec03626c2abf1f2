/* pf_lab.cu — what an L2 prefetch of gate/up's weights, issued while the HBM is idle (attention,
 * RMSNorm and the small o projection of a decode step), is worth (session 11). One iteration:
 *   1. pf_kernel: G blocks; block b issues cp.async.bulk.prefetch.L2 for the first fraction f of
 *      the payload and scale bytes of the rows the item kernel's block b will own (rows
 *      [b n / G, (b + 1) n / G)), then every block spins for `spin` ns (attention's stand-in);
 *   2. optionally the o projection (4096 x 4096) through fp4_cuda_project (its own weights);
 *   3. gate/up (28672 x 4096) through fp4_cuda_project.
 * Copies of both matrices rotate so the L2 never holds an earlier iteration's bytes. Prints µs per
 * iteration; the saving of a fraction f is t(0) - t(f) in the same row. Dev only; never installed.
 *   pf_lab [--mode exact|native] [--grid G] */
#include "lab.h"

static __device__ __forceinline__ void pf_l2(const void *p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
static __device__ __forceinline__ uint64_t pf_now(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* 16 KB pieces, one lane each in turn; the range [p, p + bytes) with p and bytes multiples of 16 */
static __device__ void pf_range(const uint8_t *p, uint64_t bytes, int lane) {
    const uint64_t piece = 16384;
    for (uint64_t o = (uint64_t)lane * piece; o < bytes; o += 32 * piece) {
        const uint64_t n = bytes - o < piece ? bytes - o : piece;
        pf_l2(p + o, (unsigned)n);
    }
}

static __global__ void pf_kernel(const uint8_t *payload, const uint8_t *scales, int64_t n_out,
                                 int64_t pstride, int64_t sstride, float f, uint64_t spin_ns) {
    const uint64_t t0 = pf_now();
    const int64_t G = gridDim.x, b = blockIdx.x;
    const int64_t r0 = b * n_out / G, r1 = (b + 1) * n_out / G;
    if (f > 0.0f) {
        const uint64_t pb = (uint64_t)((double)((r1 - r0) * pstride) * f) & ~(uint64_t)15;
        const uint64_t sb = (uint64_t)((double)((r1 - r0) * sstride) * f) & ~(uint64_t)15;
        pf_range(payload + r0 * pstride, pb, threadIdx.x);
        pf_range(scales + r0 * sstride, sb, threadIdx.x);
    }
    while (pf_now() - t0 < spin_ns) {
    }
}

#define NCOP 4
struct pf_ctx {
    fp4_cuda_tensor gu[NCOP], o[NCOP];
    fp4_cuda_scratch s;
    float *dx, *dy;
    fp4_mode mode;
    int grid, with_o;
    float f;
    uint64_t spin;
};

static void pf_run(void *c, int copy, cudaStream_t s) {
    pf_ctx *k = (pf_ctx *)c;
    const fp4_cuda_tensor *g = &k->gu[copy % NCOP];
    pf_kernel<<<k->grid, 32, 0, s>>>(g->d_payload, g->d_scales, g->n_out, g->payload_stride, g->scale_stride,
                                     k->f, k->spin);
    if (k->with_o) LAB_OK(fp4_cuda_project(&k->o[copy % NCOP], k->mode, k->dx, 1, k->dy + 32768, &k->s, s));
    LAB_OK(fp4_cuda_project(g, k->mode, k->dx, 1, k->dy, &k->s, s));
}

static void make_copies(int64_t n_out, int64_t n_in, uint64_t seed0, fp4_cuda_tensor *t) {
    test_rng seed = {seed0};
    uint8_t *payload = (uint8_t *)malloc((size_t)(n_out * n_in / 2));
    uint8_t *scales = (uint8_t *)malloc((size_t)(n_out * n_in / 16));
    for (int64_t i = 0; i < n_out * n_in / 2; i += 8) {
        const uint64_t r = rng_u64(&seed);
        memcpy(payload + i, &r, 8);
    }
    for (int64_t i = 0; i < n_out * n_in / 16; i++)
        scales[i] = (uint8_t)(0x28 + rng_u64(&seed) % 0x38);
    fp4_nvfp4_view v = {payload, scales, 4.0e-3f, 0.0f, n_out, n_in};
    for (int c = 0; c < NCOP; c++)
        LAB_OK(fp4_cuda_tensor_upload_nvfp4(&v, &t[c]));
    free(payload);
    free(scales);
}

int main(int argc, char **argv) {
    fp4_mode mode = FP4_MODE_EXACT;
    int grid = 264;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = !strcmp(argv[++i], "native") ? FP4_MODE_NATIVE : FP4_MODE_EXACT;
        else if (!strcmp(argv[i], "--grid") && i + 1 < argc)
            grid = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: pf_lab [--mode exact|native] [--grid G]\n");
            return 2;
        }
    }
    fp4_cuda_device_info info;
    LAB_OK(fp4_cuda_init(0, &info));
    printf("device %s, %d SMs, L2 %zu MB; mode %s, prefetch grid %d\n", info.name, info.sm_count,
           (size_t)(info.l2_bytes >> 20), mode == FP4_MODE_NATIVE ? "native" : "exact", grid);
    static pf_ctx k;
    k.mode = mode;
    k.grid = grid;
    make_copies(28672, 4096, 11, k.gu);
    make_copies(4096, 4096, 12, k.o);
    printf("routes: gate/up %s, o %s\n", fp4_cuda_route_name(&k.gu[0], mode, 1),
           fp4_cuda_route_name(&k.o[0], mode, 1));
    LAB_OK(fp4_cuda_scratch_alloc(fp4_cuda_scratch_bytes(&k.gu[0], 1), &k.s));
    float x[4096];
    test_rng seed = {5};
    for (int i = 0; i < 4096; i++)
        x[i] = rng_normal(&seed);
    LAB_CUDA(cudaMalloc(&k.dx, sizeof x));
    LAB_CUDA(cudaMemcpy(k.dx, x, sizeof x, cudaMemcpyHostToDevice));
    LAB_CUDA(cudaMalloc(&k.dy, (28672 + 32768) * 4));
    cudaStream_t s;
    LAB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const float fr[] = {0.0f, 0.25f, 0.5f, 0.6f, 0.7f, 0.8f, 1.0f};
    static const uint64_t spins[] = {0, 5000, 10000, 20000};
    for (int with_o = 0; with_o < 2; with_o++)
        for (size_t si = 0; si < sizeof spins / sizeof spins[0]; si++) {
            k.with_o = with_o;
            k.spin = spins[si];
            printf("o %s, spin %5llu ns:", with_o ? "yes" : "no ", (unsigned long long)k.spin);
            for (size_t fi = 0; fi < sizeof fr / sizeof fr[0]; fi++) {
                k.f = fr[fi];
                printf("  f %.2f %7.2f", k.f, lab_time_us(pf_run, &k, NCOP, 40, s));
                fflush(stdout);
            }
            printf("  (us per iteration)\n");
        }
    return 0;
}
