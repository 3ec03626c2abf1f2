/* device.cu — device enumeration, tensor upload into one arena (llama.cpp type-40 views repacked on
 * the device: ggml_repack.cu), scratch allocation (its size comes from the dispatch table:
 * fp4_cuda_scratch_bytes in dispatch.cu). Host code only (C-style). */
#include "common.cuh"
#include <string.h>

extern "C" {

FP4_API fp4_status fp4_cuda_device_count(int *count) {
    if (!count) return FP4_ERR_INVALID_ARG;
    *count = 0;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no device / no driver" error */
        return FP4_ERR_NO_DEVICE;
    }
    *count = n;
    return n > 0 ? FP4_OK : FP4_ERR_NO_DEVICE;
}

FP4_API fp4_status fp4_cuda_available(void) {
    int n = 0;
    if (fp4_cuda_device_count(&n) != FP4_OK) return FP4_ERR_NO_DEVICE;
    for (int d = 0; d < n; d++) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess && major >= 8)
            return FP4_OK;
    }
    (void)cudaGetLastError();
    return FP4_ERR_NO_DEVICE;
}

FP4_API fp4_status fp4_cuda_init(int device, fp4_cuda_device_info *info) {
    int n = 0;
    if (fp4_cuda_device_count(&n) != FP4_OK) return FP4_ERR_NO_DEVICE;
    if (device < 0 || device >= n) return FP4_ERR_INVALID_ARG;
    cudaDeviceProp p;
    FP4_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    if (p.major < 8) return FP4_ERR_NO_DEVICE;
    FP4_CUDA_CHECK(cudaSetDevice(device));
    FP4_CUDA_CHECK(cudaFree(0)); /* create the context now, not inside the first timed call */
    if (info) {
        memset(info, 0, sizeof *info);
        strncpy(info->name, p.name, sizeof info->name - 1);
        info->cc_major = p.major;
        info->cc_minor = p.minor;
        info->sm_count = p.multiProcessorCount;
        info->global_mem_bytes = p.totalGlobalMem;
        info->l2_bytes = (size_t)p.l2CacheSize;
    }
    return FP4_OK;
}

int fp4_cu_sm_count(void) {
    static int cached[FP4_CU_MAX_DEVICES]; /* written once per device, read and written atomically */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 0;
    if (dev < FP4_CU_MAX_DEVICES) {
        const int c = __atomic_load_n(&cached[dev], __ATOMIC_RELAXED);
        if (c) return c;
    }
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
    if (dev < FP4_CU_MAX_DEVICES) __atomic_store_n(&cached[dev], n, __ATOMIC_RELAXED);
    return n;
}

/* The attribute is per device (it lives in the device's context). Two threads may both set it
 * the first time: the call is idempotent, and the flag is written with release order after it. */
fp4_status fp4_cu_smem_opt_in(const void *kernel, size_t bytes, int *done) {
    int dev = 0;
    FP4_CUDA_CHECK(cudaGetDevice(&dev));
    const int cacheable = dev >= 0 && dev < FP4_CU_MAX_DEVICES;
    if (cacheable && __atomic_load_n(&done[dev], __ATOMIC_ACQUIRE)) return FP4_OK;
    FP4_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    if (cacheable) __atomic_store_n(&done[dev], 1, __ATOMIC_RELEASE);
    return FP4_OK;
}

/* ---- tensors --------------------------------------------------------------------------------- */

FP4_API void fp4_cuda_tensor_free(fp4_cuda_tensor *t) {
    if (!t) return;
    if (t->d_arena) cudaFree(t->d_arena);
    if (t->d_frag) cudaFree((void *)t->d_frag);
    memset(t, 0, sizeof *t);
}

/* A type-40 view (FP4_PACK_GGML64): its rows go through a device staging buffer of at most
 * GGML_STAGE_BYTES (whole rows, at least one), allocated here and freed before returning, and
 * fp4_cu_ggml_repack writes them into the zeroed planes p / s at the canonical upload's strides,
 * so the arena holds the bytes the canonical upload of the repacked view leaves. Every copy and
 * launch is on the legacy default stream, in order: a chunk's copy waits for the previous
 * chunk's kernel; the last one is waited for before the staging buffer is freed. */
#define GGML_STAGE_BYTES ((size_t)16 << 20)

static fp4_status upload_ggml_rows(const fp4_nvfp4_view *w, uint8_t *p, size_t pstride, uint8_t *s,
                                   size_t sstride) {
    const size_t row = (size_t)(w->n_in / 64) * 36;
    int64_t rows = (int64_t)(GGML_STAGE_BYTES / row);
    if (rows < 1) rows = 1;
    if (rows > w->n_out) rows = w->n_out;
    void *stage = NULL;
    FP4_CUDA_CHECK(cudaMalloc(&stage, (size_t)rows * row));
    fp4_status st = FP4_OK;
    for (int64_t r0 = 0; r0 < w->n_out && st == FP4_OK; r0 += rows) {
        const int64_t n = w->n_out - r0 < rows ? w->n_out - r0 : rows;
        const cudaError_t e =
            cudaMemcpy(stage, w->payload + (size_t)r0 * row, (size_t)n * row, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaMemcpy(stage, type-40 blocks)");
        else
            st = fp4_cu_ggml_repack((const uint8_t *)stage, n, w->n_in, p + (size_t)r0 * pstride,
                                    (int64_t)pstride, s + (size_t)r0 * sstride, (int64_t)sstride, 0);
    }
    if (st == FP4_OK) {
        const cudaError_t e = cudaStreamSynchronize(0);
        if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaStreamSynchronize(type-40 repack)");
    }
    cudaFree(stage);
    return st;
}

FP4_API fp4_status fp4_cuda_tensor_upload_nvfp4(const fp4_nvfp4_view *w, fp4_cuda_tensor *out) {
    if (!w || !out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    fp4_status st = fp4_nvfp4_view_check(w, NULL, NULL);
    if (st != FP4_OK) return st;
    const int64_t k_pad = (w->n_in + 255) / 256 * 256;
    const size_t pstride = (size_t)(k_pad / 2), sstride = (size_t)(k_pad / 16);
    const size_t pbytes = FP4_CU_ALIGN(pstride * (size_t)w->n_out);
    const size_t sbytes = FP4_CU_ALIGN(sstride * (size_t)w->n_out);
    void *arena = NULL;
    FP4_CUDA_CHECK(cudaMalloc(&arena, pbytes + sbytes));
    uint8_t *p = (uint8_t *)arena, *s = p + pbytes;
    cudaError_t e = cudaMemset(arena, 0, pbytes + sbytes);
    if (e == cudaSuccess && w->packing == FP4_PACK_GGML64) {
        st = upload_ggml_rows(w, p, pstride, s, sstride);
        if (st != FP4_OK) {
            cudaFree(arena);
            return st;
        }
    } else {
        if (e == cudaSuccess)
            e = cudaMemcpy2D(p, pstride, w->payload, (size_t)(w->n_in / 2), (size_t)(w->n_in / 2),
                             (size_t)w->n_out, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy2D(s, sstride, w->scales, (size_t)(w->n_in / 16), (size_t)(w->n_in / 16),
                             (size_t)w->n_out, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        cudaFree(arena);
        return FP4_CUDA_FAIL(e, "cudaMemset/cudaMemcpy2D(arena)");
    }
    out->type = FP4_TYPE_NVFP4_E2M1;
    out->n_out = w->n_out;
    out->n_in = w->n_in;
    out->k_pad = k_pad;
    out->d_payload = p;
    out->d_scales = s;
    out->payload_stride = (int64_t)pstride;
    out->scale_stride = (int64_t)sstride;
    out->scale2 = w->scale2;
    out->input_scale_inv = w->input_scale_inv;
    out->d_arena = arena;
    out->arena_bytes = pbytes + sbytes;
    return FP4_OK;
}

FP4_API fp4_status fp4_cuda_tensor_upload(int64_t type, const void *host_data, int64_t n_out, int64_t n_in,
                                          fp4_cuda_tensor *out) {
    if (!out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!host_data || n_out <= 0 || n_in <= 0 || n_in > FP4_MAX_N_IN) return FP4_ERR_INVALID_ARG;
    /* the types a device kernel reads: values per block, bytes per block (ggml's sizes) */
    static const struct { int64_t type, block, bytes, align;
    } kinds[] = {{FP4_TYPE_F16, 1, 2, 8},
                 {FP4_TYPE_BF16, 1, 2, 8},
                 {FP4_TYPE_Q4_K, 256, 144, 256},
                 {FP4_TYPE_Q6_K, 256, 210, 256}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++)
        if (kinds[i].type == type) k = i;
    if (k < 0) return FP4_ERR_UNSUPPORTED;
    if (n_in % kinds[k].align) return FP4_ERR_SHAPE; /* F16/BF16: 16-byte rows; kquant: whole blocks */
    const size_t row_bytes = (size_t)(n_in / kinds[k].block * kinds[k].bytes);
    if ((uint64_t)n_out > SIZE_MAX / row_bytes) return FP4_ERR_OVERFLOW;
    const size_t bytes = row_bytes * (size_t)n_out;
    void *arena = NULL;
    FP4_CUDA_CHECK(cudaMalloc(&arena, FP4_CU_ALIGN(bytes)));
    const cudaError_t e = cudaMemcpy(arena, host_data, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(arena);
        return FP4_CUDA_FAIL(e, "cudaMemcpy(arena, host_data, bytes, cudaMemcpyHostToDevice)");
    }
    out->type = type;
    out->n_out = n_out;
    out->n_in = n_in;
    out->k_pad = n_in;
    out->d_payload = (const uint8_t *)arena;
    out->payload_stride = (int64_t)row_bytes;
    out->d_arena = arena;
    out->arena_bytes = FP4_CU_ALIGN(bytes);
    return FP4_OK;
}

/* ---- scratch ----------------------------------------------------------------------------------- */

FP4_API fp4_status fp4_cuda_scratch_alloc(size_t bytes, fp4_cuda_scratch *s) {
    if (!s) return FP4_ERR_INVALID_ARG;
    s->d_base = NULL;
    s->bytes = 0;
    if (bytes < FP4_CU_COUNTER_BYTES) bytes = FP4_CU_COUNTER_BYTES;
    bytes = FP4_CU_ALIGN(bytes);
    void *p = NULL;
    FP4_CUDA_CHECK(cudaMalloc(&p, bytes));
    const cudaError_t e = cudaMemset(p, 0, bytes);
    if (e != cudaSuccess) {
        cudaFree(p);
        return FP4_CUDA_FAIL(e, "cudaMemset(p, 0, bytes)");
    }
    s->d_base = p;
    s->bytes = bytes;
    return FP4_OK;
}

FP4_API void fp4_cuda_scratch_free(fp4_cuda_scratch *s) {
    if (!s) return;
    if (s->d_base) cudaFree(s->d_base);
    s->d_base = NULL;
    s->bytes = 0;
}

} /* extern "C" */
