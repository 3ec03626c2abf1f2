/* device.cu — device enumeration, tensor upload into one arena (llama.cpp type-40 views repacked on
 * the device: ggml_repack.cu), scratch allocation (its size comes from the dispatch table:
 * fp4_cuda_scratch_bytes in dispatch.cu). Host code only (C-style). */
#include "common.cuh"
#include <string.h>
#include <unistd.h>

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

/* ---- the NVFP4 upload: staged through pinned memory, checked on the device ----------------------
 * A view's rows (type-40 blocks, or the canonical payload and scale planes) are cut into chunks of
 * whole rows of at most one staging buffer. For chunk k the host copies the rows from the view's
 * memory (the file mapping: pageable) into pinned buffer k % 2, on several threads, while the
 * device still copies chunk k-1 from the other buffer; then one asynchronous copy on the stager's
 * stream moves the chunk to its place (canonical rows: a 2D copy straight to the plane at its
 * stride; type-40 blocks: to the device staging buffer, then the repack kernel, ggml_repack.cu).
 * Buffer k % 2 is refilled only after its event says the copy out of it completed; the device
 * staging buffer is reused in stream order (the next chunk's copy follows the repack that reads
 * it). Every scale byte is checked on the device as it arrives (the repack kernel, or
 * fp4_cu_scale_nan over the scale plane): the bytes the kernels will read, whatever happened to
 * the host memory since the loader checked it at open. The upload waits for its stream before it
 * returns, so the caller may free or reuse everything. */

typedef void (*fp4_rows_fn)(void *ctx, int64_t r0, int64_t r1);
fp4_status fp4_parallel_rows(int64_t n_rows, int n_threads, fp4_rows_fn fn, void *ctx);
fp4_status fp4_nvfp4_view_check_shape(const fp4_nvfp4_view *w);

void fp4_cu_stager_close(fp4_cu_stager *s) {
    if (!s) return;
    if (s->stream) cudaStreamSynchronize(s->stream);
    for (int k = 0; k < 2; k++) {
        if (s->host[k]) cudaFreeHost(s->host[k]);
        if (s->freed[k]) cudaEventDestroy(s->freed[k]);
    }
    if (s->h_bad) cudaFreeHost(s->h_bad);
    if (s->dev) cudaFree(s->dev);
    if (s->d_bad) cudaFree(s->d_bad);
    if (s->stream) cudaStreamDestroy(s->stream);
    memset(s, 0, sizeof *s);
}

fp4_status fp4_cu_stager_open(fp4_cu_stager *s, size_t bytes) {
    if (!s) return FP4_ERR_INVALID_ARG;
    memset(s, 0, sizeof *s);
    if (bytes < 4096) bytes = 4096;
    bytes = FP4_CU_ALIGN(bytes);
    cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    for (int k = 0; k < 2 && e == cudaSuccess; k++) {
        e = cudaHostAlloc((void **)&s->host[k], bytes, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->freed[k], cudaEventDisableTiming);
    }
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&s->h_bad, sizeof(int), cudaHostAllocDefault);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->dev, bytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_bad, sizeof(int));
    if (e != cudaSuccess) {
        const fp4_status st = FP4_CUDA_FAIL(e, "cudaHostAlloc/cudaMalloc(upload staging)");
        fp4_cu_stager_close(s);
        return st;
    }
    s->bytes = bytes;
    /* a fill is a memory pass: one thread per 2 MiB of a buffer, at most 8 and one per core */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long t = (long)(bytes >> 21);
    if (t > cores) t = cores;
    s->threads = t < 1 ? 1 : t > 8 ? 8 : (int)t;
    return FP4_OK;
}

typedef struct fill_job {
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes;
    int64_t parts;
} fill_job;

static void fill_parts(void *ctx, int64_t i0, int64_t i1) {
    const fill_job *j = (const fill_job *)ctx;
    const size_t a = (size_t)((double)j->bytes * (double)i0 / (double)j->parts) & ~(size_t)63,
                 b = i1 == j->parts
                         ? j->bytes
                         : (size_t)((double)j->bytes * (double)i1 / (double)j->parts) & ~(size_t)63;
    if (b > a) memcpy(j->dst + a, j->src + a, b - a);
}

/* rows [0, n_rows) of row bytes each, contiguous at src, to the device: each chunk of whole rows
 * through a pinned buffer, then either a 2D copy to dst (rows dpitch apart) or, when n_in > 0, a
 * copy to the device staging buffer and the repack of its type-40 blocks into the planes p / sc */
static fp4_status stage_rows(fp4_cu_stager *s, const uint8_t *src, size_t row, int64_t n_rows, uint8_t *dst,
                             size_t dpitch, int64_t n_in, uint8_t *p, size_t pstride, uint8_t *sc,
                             size_t sstride) {
    if (row > s->bytes) return FP4_ERR_INVALID_ARG; /* the caller sized the buffers for one row */
    const int64_t per = (int64_t)(s->bytes / row);
    for (int64_t r0 = 0, k = 0; r0 < n_rows; r0 += per, k ^= 1) {
        const int64_t n = n_rows - r0 < per ? n_rows - r0 : per;
        const size_t bytes = (size_t)n * row;
        cudaError_t e = s->used[k] ? cudaEventSynchronize(s->freed[k]) : cudaSuccess;
        if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "cudaEventSynchronize(upload staging)");
        fill_job job = {s->host[k], src + (size_t)r0 * row, bytes, 0};
        int threads = (int)(bytes >> 21);
        threads = threads < 1 ? 1 : threads > s->threads ? s->threads : threads;
        job.parts = threads;
        fp4_status st = fp4_parallel_rows(threads, threads, fill_parts, &job);
        if (st != FP4_OK) return st;
        if (n_in > 0)
            e = cudaMemcpyAsync(s->dev, s->host[k], bytes, cudaMemcpyHostToDevice, s->stream);
        else
            e = cudaMemcpy2DAsync(dst + (size_t)r0 * dpitch, dpitch, s->host[k], row, row, (size_t)n,
                                  cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess) e = cudaEventRecord(s->freed[k], s->stream);
        if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "cudaMemcpyAsync(upload staging)");
        s->used[k] = 1;
        if (n_in > 0 &&
            (st = fp4_cu_ggml_repack(s->dev, n, n_in, p + (size_t)r0 * pstride, (int64_t)pstride,
                                     sc + (size_t)r0 * sstride, (int64_t)sstride, s->d_bad, s->stream)))
            return st;
    }
    return FP4_OK;
}

/* buffers of at least one row of every plane of w (the view's shape is checked) */
static fp4_status stager_fit(fp4_cu_stager *s, const fp4_nvfp4_view *w) {
    const size_t row =
        w->packing == FP4_PACK_GGML64 ? (size_t)(w->n_in / 64) * 36 : (size_t)(w->n_in / 2); /* > scales */
    if (row <= s->bytes) return FP4_OK;
    fp4_cu_stager_close(s);
    return fp4_cu_stager_open(s, row);
}

fp4_status fp4_cu_upload_nvfp4_into(fp4_cu_stager *s, const fp4_nvfp4_view *w, uint8_t *p, size_t pstride,
                                    uint8_t *sc, size_t sstride) {
    if (!s || !s->stream || !p || !sc) return FP4_ERR_INVALID_ARG;
    fp4_status st = fp4_nvfp4_view_check_shape(w);
    if (st == FP4_OK && (pstride < (size_t)(w->n_in / 2) || sstride < (size_t)(w->n_in / 16)))
        st = FP4_ERR_INVALID_ARG;
    if (st == FP4_OK) st = stager_fit(s, w);
    if (st != FP4_OK) return st;
    cudaError_t e = cudaMemsetAsync(s->d_bad, 0, sizeof(int), s->stream);
    if (e != cudaSuccess) return FP4_CUDA_FAIL(e, "cudaMemsetAsync(upload NaN flag)");
    if (w->packing == FP4_PACK_GGML64)
        st = stage_rows(s, w->payload, (size_t)(w->n_in / 64) * 36, w->n_out, NULL, 0, w->n_in, p, pstride,
                        sc, sstride);
    else {
        st = stage_rows(s, w->payload, (size_t)(w->n_in / 2), w->n_out, p, pstride, 0, NULL, 0, NULL, 0);
        if (st == FP4_OK)
            st = stage_rows(s, w->scales, (size_t)(w->n_in / 16), w->n_out, sc, sstride, 0, NULL, 0, NULL, 0);
        if (st == FP4_OK)
            st = fp4_cu_scale_nan(sc, w->n_out, w->n_in / 16, (int64_t)sstride, s->d_bad, s->stream);
    }
    if (st == FP4_OK) {
        e = cudaMemcpyAsync(s->h_bad, s->d_bad, sizeof(int), cudaMemcpyDeviceToHost, s->stream);
        if (e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaMemcpyAsync(upload NaN flag)");
    }
    /* on every path: nothing of this upload may still run when the caller frees or refills */
    e = cudaStreamSynchronize(s->stream);
    if (st == FP4_OK && e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaStreamSynchronize(upload)");
    if (st == FP4_OK && *s->h_bad) st = FP4_ERR_NAN_SCALE;
    return st;
}

fp4_status fp4_cu_tensor_upload_nvfp4_staged(fp4_cu_stager *s, const fp4_nvfp4_view *w,
                                             fp4_cuda_tensor *out) {
    if (!w || !out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    fp4_status st = fp4_nvfp4_view_check_shape(w);
    if (st != FP4_OK) return st;
    const int64_t k_pad = (w->n_in + 255) / 256 * 256;
    const size_t pstride = (size_t)(k_pad / 2), sstride = (size_t)(k_pad / 16);
    const size_t pbytes = FP4_CU_ALIGN(pstride * (size_t)w->n_out);
    const size_t sbytes = FP4_CU_ALIGN(sstride * (size_t)w->n_out);
    void *arena = NULL;
    FP4_CUDA_CHECK(cudaMalloc(&arena, pbytes + sbytes));
    uint8_t *p = (uint8_t *)arena, *sc = p + pbytes;
    const cudaError_t e = cudaMemsetAsync(arena, 0, pbytes + sbytes, s ? s->stream : 0);
    if (e != cudaSuccess)
        st = FP4_CUDA_FAIL(e, "cudaMemsetAsync(arena)");
    else
        st = fp4_cu_upload_nvfp4_into(s, w, p, pstride, sc, sstride);
    if (st != FP4_OK) {
        if (s && s->stream) cudaStreamSynchronize(s->stream);
        cudaFree(arena);
        return st;
    }
    out->type = FP4_TYPE_NVFP4_E2M1;
    out->n_out = w->n_out;
    out->n_in = w->n_in;
    out->k_pad = k_pad;
    out->d_payload = p;
    out->d_scales = sc;
    out->payload_stride = (int64_t)pstride;
    out->scale_stride = (int64_t)sstride;
    out->scale2 = w->scale2;
    out->input_scale_inv = w->input_scale_inv;
    out->d_arena = arena;
    out->arena_bytes = pbytes + sbytes;
    return FP4_OK;
}

/* one call, one stager: its buffers no larger than the view's biggest plane */
FP4_API fp4_status fp4_cuda_tensor_upload_nvfp4(const fp4_nvfp4_view *w, fp4_cuda_tensor *out) {
    if (!w || !out) return FP4_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    fp4_status st = fp4_nvfp4_view_check_shape(w);
    if (st != FP4_OK) return st;
    const size_t row = w->packing == FP4_PACK_GGML64 ? (size_t)(w->n_in / 64) * 36 : (size_t)(w->n_in / 2);
    const size_t all = row * (size_t)w->n_out;
    fp4_cu_stager s;
    if ((st = fp4_cu_stager_open(&s, all < FP4_CU_STAGE_BYTES ? all : FP4_CU_STAGE_BYTES))) return st;
    st = fp4_cu_tensor_upload_nvfp4_staged(&s, w, out);
    fp4_cu_stager_close(&s);
    return st;
}

FP4_API fp4_status fp4_cuda_tensor_upload(int64_t type, const void *host_data, int64_t n_out, int64_t n_in,
                                          fp4_cuda_tensor *out) {
    return fp4_cu_tensor_upload_staged(NULL, type, host_data, n_out, n_in, out);
}

/* s NULL, or a row larger than its buffers: one synchronous copy from pageable memory */
fp4_status fp4_cu_tensor_upload_staged(fp4_cu_stager *s, int64_t type, const void *host_data, int64_t n_out,
                                       int64_t n_in, fp4_cuda_tensor *out) {
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
    if (s && s->stream && row_bytes <= s->bytes) {
        fp4_status st = stage_rows(s, (const uint8_t *)host_data, row_bytes, n_out, (uint8_t *)arena,
                                   row_bytes, 0, NULL, 0, NULL, 0);
        const cudaError_t e = cudaStreamSynchronize(s->stream);
        if (st == FP4_OK && e != cudaSuccess) st = FP4_CUDA_FAIL(e, "cudaStreamSynchronize(upload)");
        if (st != FP4_OK) {
            cudaFree(arena);
            return st;
        }
    } else {
        const cudaError_t e = cudaMemcpy(arena, host_data, bytes, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            cudaFree(arena);
            return FP4_CUDA_FAIL(e, "cudaMemcpy(arena, host_data, bytes, cudaMemcpyHostToDevice)");
        }
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
