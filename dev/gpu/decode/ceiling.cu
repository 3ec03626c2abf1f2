/* ceiling.cu — the read ceiling of this sitting (issue 32 item 1: "80 % of the bytes-per-token
 * roofline at the read ceiling measured in the same sitting"): a plain streaming read of 2 GiB
 * with 16-byte loads, several grid shapes, the best median reported. Needs only the CUDA runtime
 * (linked statically: the device lacks nothing then).
 *   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -cudart static -o ceiling ceiling.cu
 *   ./ceiling [reps] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

static __global__ void read_kernel(const uint4 *__restrict__ p, size_t n, unsigned *sink) {
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) { /* four loads in flight a thread */
        const uint4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
                    d = __ldg(p + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        const uint4 a = __ldg(p + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9E3779B9u) atomicAdd(sink, 1u); /* keeps the loads */
}

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) return fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)), 1;          \
    } while (0)

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    const size_t bytes = (size_t)2 << 30, n = bytes / 16;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    uint4 *p;
    unsigned *sink;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(p, 1, bytes));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int shapes[][2] = {{4, 512}, {8, 256}, {8, 512}, {16, 256}, {32, 128}};
    double best = 0;
    printf("device %s, %d SMs; read of %zu MiB, median of %d\n", pr.name, pr.multiProcessorCount, bytes >> 20,
           reps);
    for (const auto &sh : shapes) {
        const int grid = pr.multiProcessorCount * sh[0], block = sh[1];
        std::vector<float> t;
        for (int r = 0; r < reps + 2; r++) {
            CK(cudaEventRecord(a));
            read_kernel<<<grid, block>>>(p, n, sink);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (r >= 2) t.push_back(ms);
        }
        CK(cudaGetLastError());
        std::sort(t.begin(), t.end());
        const double med = bytes / (t[t.size() / 2] * 1e-3) / 1e12, top = bytes / (t[0] * 1e-3) / 1e12;
        printf("  %3d blocks/SM x %4d threads: median %.3f TB/s, best %.3f TB/s\n", sh[0], sh[1], med, top);
        best = med > best ? med : best;
    }
    printf("read ceiling %.3f TB/s (best median)\n", best);
    return 0;
}
