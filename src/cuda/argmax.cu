/* argmax.cu — greedy decoding on the device: the first index of each row's largest value, NaN never
 * chosen, 0 when every value is NaN or -inf (fp4_sampler_sample's greedy choice, sample.c). The
 * decode step runs it on its logits so that one int32 per sequence crosses to the host instead of
 * the vocabulary's floats (src/cuda/step/step.cu, fp4_rt_step_greedy).
 *
 * Each value is a 64-bit key: its f32 bits in an order-preserving form (-0.0 as +0.0, so the two
 * zeros tie as they compare) above 0xFFFFFFFF - index, so the largest key is the largest value at
 * its first index; NaN and -inf make no key. AM_BLOCKS blocks a row each reduce their strided share
 * to one key and atomicMax it into the row's slot of the work buffer; the grid's last block (a
 * ticket) turns the keys into indices and zeroes the slots and the ticket for the next call.
 * Beside each row's key, a flag: the row holds NaN or an infinity (an exponent field of all ones,
 * tested on the bits each thread reads anyway), reported to d_nonfinite so that a decode step
 * refuses such a row instead of reading it as token 0 (rt.c, rule rt.nonfinite); the choice
 * itself is unchanged. Work buffer: rows keys (u64), the ticket (8 bytes), rows flags (u32). */
#include "common.cuh"

#define AM_THREADS 256
#define AM_BLOCKS 64 /* blocks per row: 16 384 threads over a 128k vocabulary, ~8 values each (16 were
                      * slower: bench/gpu.md "Session 7") */

static __device__ __forceinline__ unsigned long long am_key(float v, int64_t i) {
    if (v != v || v == -INFINITY) return 0ull;
    uint32_t u = v == 0.0f ? 0u : __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (uint32_t)i);
}

static __device__ __forceinline__ unsigned long long am_max(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}

static __global__ __launch_bounds__(AM_THREADS) void argmax_kernel(const float *__restrict__ x, int64_t V,
                                                                   int64_t ld, int rows,
                                                                   unsigned long long *keys, unsigned *ticket,
                                                                   unsigned *flags, int32_t *out,
                                                                   int32_t *nonfinite) {
    __shared__ unsigned long long part[AM_THREADS / 32];
    __shared__ unsigned pbad[AM_THREADS / 32];
    __shared__ int last;
    const int row = blockIdx.y, tid = threadIdx.x;
    const float *r = x + (int64_t)row * ld;
    unsigned long long k = 0ull;
    unsigned bad = 0u;
    for (int64_t i = (int64_t)blockIdx.x * AM_THREADS + tid; i < V; i += (int64_t)AM_BLOCKS * AM_THREADS) {
        const float v = r[i];
        k = am_max(k, am_key(v, i));
        bad |= (__float_as_uint(v) & 0x7F800000u) == 0x7F800000u;
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1)
        k = am_max(k, __shfl_xor_sync(0xFFFFFFFFu, k, m));
    bad = __any_sync(0xFFFFFFFFu, bad);
    if ((tid & 31) == 0) part[tid >> 5] = k, pbad[tid >> 5] = bad;
    __syncthreads();
    if (tid == 0) {
        for (int w = 1; w < AM_THREADS / 32; w++)
            k = am_max(k, part[w]), bad |= pbad[w];
        if (k) atomicMax(&keys[row], k);
        if (bad) atomicOr(&flags[row], 1u);
        __threadfence();
        last = atomicAdd(ticket, 1u) == (unsigned)(AM_BLOCKS * rows - 1);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = tid; i < rows; i += AM_THREADS) {
        const unsigned long long kk = atomicExch(&keys[i], 0ull);
        out[i] = kk ? (int32_t)(0xFFFFFFFFu - (uint32_t)(kk & 0xFFFFFFFFull)) : 0;
        const unsigned f = atomicExch(&flags[i], 0u);
        if (nonfinite) nonfinite[i] = f ? 1 : 0;
    }
    if (tid == 0) *ticket = 0u;
}

extern "C" {

FP4_API size_t fp4_cuda_argmax_work_bytes(int64_t rows) {
    return rows < 1 ? 0 : ((size_t)rows * 12 + 8 + 7) & ~(size_t)7;
}

FP4_API fp4_status fp4_cuda_argmax_rows(const float *d_x, int64_t rows, int64_t V, int64_t ld, void *d_work,
                                        int32_t *d_out, int32_t *d_nonfinite, fp4_cuda_stream stream) {
    if (!d_x || !d_work || !d_out || rows < 1 || V < 1 || ld < V) return FP4_ERR_INVALID_ARG;
    if (rows > 65535 || V > (int64_t)0xFFFFFFFFu || ((uintptr_t)d_work & 7)) return FP4_ERR_LIMIT;
    unsigned long long *keys = (unsigned long long *)d_work;
    argmax_kernel<<<dim3(AM_BLOCKS, (unsigned)rows), AM_THREADS, 0, (cudaStream_t)stream>>>(
        d_x, V, ld, (int)rows, keys, (unsigned *)(keys + rows), (unsigned *)(keys + rows + 1), d_out,
        d_nonfinite);
    FP4_CUDA_CHECK(cudaGetLastError());
    return FP4_OK;
}

} /* extern "C" */
