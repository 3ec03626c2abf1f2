/* common.cuh — internals shared by the CUDA kernels of fp4lane (never installed).
 *
 * What lives here: the status-returning CUDA check macros (they keep the failing call, file,
 * line and cudaGetErrorString for fp4_cuda_last_error()), the scalar codecs of SPEC §1 as device
 * functions (bit-identical to src/format/codec.c), the register decoders that turn packed E2M1
 * nibbles into f16x2 or int8x4 without a lookup in memory, the one copy of the small memory
 * helpers (16-byte loads, cp.async, the split-K arrival and sum), the scratch layout, and the
 * extern "C" declarations of the route launchers that dispatch.cu's table names. The runtime
 * goes through fp4_cuda_project(); the kernel lab (dev/cuda) reuses these helpers and the kernel
 * templates of the *.cuh files, never a copy.
 *
 * Numerics: every f32 operation that the CPU oracle pins is written with an explicit IEEE
 * intrinsic (__fmul_rn, __fdiv_rn, __fmaf_rn, ...) and the library is built with --fmad=false,
 * so no contraction or approximate reciprocal can sneak in.
 */
#ifndef FP4_CUDA_COMMON_CUH
#define FP4_CUDA_COMMON_CUH

#include "fp4lane_cuda.h"
#include "cuda/env.h"
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Hopper thresholds (house style §7.12): the first compute capability with the e4m3x2 -> f16x2
 * conversion instruction, and the one we tune for. */
#define FP4_CU_CC_ADA 890
#define FP4_CU_CC_HOPPER 900

/* ---- status-returning checks (library code never exits) ------------------------------------ */
/* Records "expr: cudaGetErrorString (function, file:line)" for fp4_cuda_last_error() in the
 * calling thread, clears CUDA's non-sticky last error, and returns FP4_ERR_CUDA. */
#ifdef __cplusplus
extern "C"
#endif
    fp4_status
    fp4_cu_fail(cudaError_t e, const char *expr, const char *func, const char *file, int line);
#define FP4_CUDA_FAIL(e, expr) fp4_cu_fail((e), (expr), __func__, __FILE__, __LINE__)
#define FP4_CUDA_CHECK(expr)                                                                        \
    do {                                                                                            \
        cudaError_t e_ = (expr);                                                                    \
        if (e_ != cudaSuccess) return FP4_CUDA_FAIL(e_, #expr);                                     \
    } while (0)
/* after every launch: configuration errors surface here, asynchronous faults at the next sync */
#define FP4_CUDA_LAUNCHED() FP4_CUDA_CHECK(cudaGetLastError())
/* forward a non-OK status from an internal call */
#define FP4_CU_TRY(expr)                                                                            \
    do {                                                                                            \
        fp4_status s_ = (expr);                                                                     \
        if (s_ != FP4_OK) return s_;                                                                \
    } while (0)

/* ---- scratch layout -------------------------------------------------------------------------- */
/* The first FP4_CU_COUNTER_BYTES of a scratch hold split-K arrival counters: zero at allocation,
 * and every kernel that uses one puts it back to zero before it exits. The rest is carved per
 * call. A scratch serves one stream at a time. */
#define FP4_CU_COUNTER_BYTES ((size_t)64 * 1024)
#define FP4_CU_ALIGN(x) (((size_t)(x) + 255) & ~(size_t)255)

/* ---- small helpers ---------------------------------------------------------------------------- */
static inline __host__ __device__ int fp4_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static __device__ __forceinline__ uint32_t fp4_prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

/* 16 bytes through the read-only path (p 16-byte aligned). */
static __device__ __forceinline__ uint4 fp4_ldg16(const void *p) {
    return __ldg(reinterpret_cast<const uint4 *>(p));
}

/* cp.async (sm_80+): 16 bytes global -> shared, bypassing L1; commit / wait by group count. */
static __device__ __forceinline__ void fp4_cp_async16(void *smem, const void *gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
static __device__ __forceinline__ void fp4_cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> static __device__ __forceinline__ void fp4_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* Programmatic dependent launch (sm_90+; no-ops for a plain launch and below sm_90):
 * fp4_pdl_wait blocks until the grids this one depends on have completed and their memory is
 * visible (a kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization calls it
 * before it touches anything an earlier kernel writes or reads); fp4_pdl_trigger lets the
 * dependents of this grid be scheduled before it completes. */
static __device__ __forceinline__ void fp4_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void fp4_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_HOPPER
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The compute capability of the build's cubin (Makefile: CUDA_ARCH without its 'a', e.g. 90). */
#ifndef FP4_CU_BUILD_CC
#define FP4_CU_BUILD_CC 90
#endif

/* 1 when the current device runs this library's Hopper code: the build holds a cubin for
 * FP4_CU_BUILD_CC (sm_90a by default) and compute_80 PTX (Makefile); the cubin loads on its own
 * major version from its minor on (an 'a' cubin on exactly that version). Any other device runs
 * the compute_80 PTX, whose bodies of the Hopper-only code (griddepcontrol, cp.async.bulk,
 * clusters: under __CUDA_ARCH__ >= FP4_CU_CC_HOPPER) are empty: there a launch with programmatic
 * stream serialization would not wait for its predecessor, and a Hopper-only kernel would compute
 * nothing. Cached per device (read and written atomically). */
static inline int fp4_cu_sm90_code(void) {
    static int cached[64]; /* 0 unknown, 1 yes, 2 no */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 0;
    if (dev < 64) {
        const int c = __atomic_load_n(&cached[dev], __ATOMIC_RELAXED);
        if (c) return c == 1;
    }
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    const int ok = FP4_CU_BUILD_CC >= 90 && major == FP4_CU_BUILD_CC / 10 && minor >= FP4_CU_BUILD_CC % 10;
    if (dev < 64) __atomic_store_n(&cached[dev], ok ? 1 : 2, __ATOMIC_RELAXED);
    return ok;
}

/* FP4LANE_CUDA_NO_PDL=1 (env.h: read once per process): every launch below is a plain one (a
 * measuring aid and a way out); also plain on a device that does not run the sm_90a code
 * (fp4_cu_sm90_code: its kernels' fp4_pdl_wait is empty). */
static inline int fp4_cu_pdl_off(void) {
    static int off = -1;
    if (off < 0) off = fp4_cu_env_process()->no_pdl;
    return off || !fp4_cu_sm90_code();
}

/* cudaLaunchKernelEx with programmatic stream serialization when pdl (the kernel calls
 * fp4_pdl_wait before it touches what earlier kernels write or read); if the launch with the
 * attribute is refused, the error is cleared and the kernel launched plainly. */
template <typename... KArgs, typename... Args>
static fp4_status fp4_cu_launch_pdl(cudaLaunchConfig_t cfg, int pdl, void (*kernel)(KArgs...), Args... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    if (pdl && !fp4_cu_pdl_off()) {
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return FP4_OK;
        (void)cudaGetLastError(); /* a refused launch attribute is not sticky */
    }
    cfg.attrs = NULL;
    cfg.numAttrs = 0;
    FP4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
    return FP4_OK;
}

/* The same for a grid, block, dynamic shared memory and stream. */
template <typename... KArgs, typename... Args>
static fp4_status fp4_cu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, int pdl,
                                void (*kernel)(KArgs...), Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    return fp4_cu_launch_pdl(cfg, pdl, kernel, args...);
}

/* Eight F16 or BF16 values (one 16-byte load) widened to f32, exactly. */
template <bool BF16> static __device__ __forceinline__ void fp4_widen8(uint4 q, float v[8]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (BF16) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
        } else {
            const __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
            const float2 f = __half22float2(h);
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    }
}

/* Payload and scale pointers of a warp's R rows from row0 (rows past n_out read the last row;
 * their results are discarded), at this lane's byte offsets poff / soff into the rows. */
template <int R>
static __device__ __forceinline__ void
fp4_warp_rows(const uint8_t *payload, const uint8_t *scales, int64_t pstride, int64_t sstride, int64_t n_out,
              int64_t row0, int poff, int soff, const uint8_t *(&prow)[R], const uint8_t *(&srow)[R]) {
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t row = row0 + r < n_out ? row0 + r : n_out - 1;
        prow[r] = payload + row * pstride + poff;
        srow[r] = scales + row * sstride + soff;
    }
}

/* SPEC §4 step 4, the pinned epilogue of one super-block, up to its accumulation:
 * c = fma(fma(fma(total, 2^-10, 0), d, 0), scale2, 0). Every exact A16 kernel calls this one
 * function; the caller then does acc = fma(1, c, acc) in super-block index order. */
static __device__ __forceinline__ float fp4_cu_a16_term(float total, float d, float scale2) {
    float c = __fmaf_rn(total, 0x1p-10f, 0.0f);
    c = __fmaf_rn(c, d, 0.0f);
    return __fmaf_rn(c, scale2, 0.0f);
}

static __device__ __forceinline__ float fp4_round_f16_dev(float f);
/* SPEC §5 step 4, the W4A4 epilogue of one exact int64 total: ((T * 2^-20) * scale2) *
 * input_scale in f32, then the F16 boundary. */
static __device__ __forceinline__ float fp4_cu_w4a4_term(long long total, float scale2, float input_scale) {
    float v = __fmul_rn(__ll2float_rn(total), 0x1p-20f);
    v = __fmul_rn(v, scale2);
    v = __fmul_rn(v, input_scale);
    return fp4_round_f16_dev(v);
}

static __device__ __forceinline__ float fp4_pow2f(int e) { /* 2^e for -126 <= e <= 127 */
    return __int_as_float((e + 127) << 23);
}

/* E4M3FN byte -> f32, exact (SPEC §1). NaN bytes give NaN. */
static __device__ __forceinline__ float fp4_e4m3_to_f32(uint32_t b) {
    if ((b & 0x7Fu) == 0x7Fu) return __int_as_float(0x7FC00000);
    const int e = (int)((b >> 3) & 15u), m = (int)(b & 7u);
    const float v = e == 0 ? __fmul_rn((float)m, 0x1p-9f) : __fmul_rn((float)(8 + m), fp4_pow2f(e - 10));
    return (b & 0x80u) ? -v : v;
}

/* E4M3FN byte -> value in units of 2^-9 (SPEC §1), 0 for the NaN bytes. */
static __device__ __forceinline__ int fp4_e4m3_q9(uint32_t b) {
    if ((b & 0x7Fu) == 0x7Fu) return 0;
    const uint32_t e = (b >> 3) & 15u, m = b & 7u;
    const int v = e ? (int)((8u + m) << (e - 1u)) : (int)m;
    return (b & 0x80u) ? -v : v;
}

/* f32 -> E4M3FN, round to nearest even from the bits (port of fp4_e4m3fn_encode). */
static __device__ __forceinline__ uint32_t fp4_e4m3_encode(float x) {
    const uint32_t u = __float_as_uint(x);
    const uint32_t sign = (u >> 24) & 0x80u, ax = u & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return 0x7Fu;
    if (ax >= 0x43E00000u) return sign | 0x7Eu;
    const int E = (int)(ax >> 23) - 127;
    if (E < -6) {
        if (E < -11) return sign;
        const uint32_t mant = (ax & 0x7FFFFFu) | (ax >= 0x00800000u ? 0x800000u : 0u);
        const int shift = 23 - (E + 9);
        uint32_t q = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | q;
    }
    const uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t q = mant >> 20;
    const uint32_t rem = mant & 0xFFFFFu;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) q++;
    int e = E + 7;
    if (q == 16u) { q = 8u; e++; }
    return sign | ((uint32_t)e << 3) | (q - 8u);
}

/* SPEC §3 step 5: E2M1 rounding with ties to even; NaN -> 7; sign bit when x < 0. */
static __device__ __forceinline__ uint32_t fp4_dev_e2m1_encode(float x) {
    if (isnan(x)) return 7u;
    const float a = fabsf(x);
    const uint32_t m = (uint32_t)(a > 0.25f) + (uint32_t)(a >= 0.75f) + (uint32_t)(a > 1.25f) +
                       (uint32_t)(a >= 1.75f) + (uint32_t)(a > 2.5f) + (uint32_t)(a >= 3.5f) +
                       (uint32_t)(a > 5.0f);
    return (x < 0.0f ? 8u : 0u) | m;
}

static __device__ __forceinline__ int fp4_dev_e2m1_q1(uint32_t code) {
    const int c = (int)(code & 7u);
    const int m = c < 4 ? c : (2 + (c & 1)) << ((c >> 1) - 1); /* 0,1,2,3,4,6,8,12 */
    return (code & 8u) ? -m : m;
}

static __device__ __forceinline__ float fp4_e2m1_to_f32(uint32_t code) {
    const float v = 0.5f * (float)fp4_dev_e2m1_q1(code & 7u);
    return (code & 8u) ? -v : v; /* code 8 -> -0.0 */
}

/* The F16 output boundary (SPEC §4 step 5): (float)(half)f, round to nearest even. */
static __device__ __forceinline__ float fp4_round_f16_dev(float f) {
    return __half2float(__float2half_rn(f));
}

/* ggml's nearest_int: the magic-number round to nearest even (valid for |f| <= 4194303). */
static __device__ __forceinline__ int fp4_nearest_int_dev(float f) {
    const float v = __fadd_rn(f, 12582912.0f);
    return (__float_as_int(v) & 0x007FFFFF) - 0x00400000;
}

/* ---- register decoders ----------------------------------------------------------------------- */
/* Eight E2M1 nibbles of one 32-bit word (nibble i at bits 4i..4i+3, i.e. elements 8u+i of a row)
 * to four f16x2 words: h[k] = (element k, element k+4). Each value is e2m1 * 2^-14 exactly: the
 * sign goes to bit 15 and the three magnitude bits to bits 9..11 (exponent low bits and the top
 * mantissa bit), the same half-bit embedding as the chapter's §7.4.1. The 2^14 is paid back once
 * per row. */
static __device__ __forceinline__ void fp4_e2m1x8_to_h2(uint32_t w, uint32_t h[4]) {
    h[0] = ((w << 12) & 0x80008000u) | ((w << 9) & 0x0E000E00u);
    h[1] = ((w << 8) & 0x80008000u) | ((w << 5) & 0x0E000E00u);
    h[2] = ((w << 4) & 0x80008000u) | ((w << 1) & 0x0E000E00u);
    h[3] = (w & 0x80008000u) | ((w >> 3) & 0x0E000E00u);
}

/* Four E2M1 nibbles (bits 0..15 of nib; higher bits ignored) to four signed int8 e2m1_q1 values,
 * element order kept. Three byte permutes: positive magnitudes, negative values, then a per-byte
 * select on the sign bit (selector nibble i = i + 4*sign_i). */
static __device__ __forceinline__ uint32_t fp4_e2m1x4_to_q1x4(uint32_t nib) {
    const uint32_t pos = fp4_prmt(0x03020100u, 0x0C080604u, nib);          /* 0,1,2,3 | 4,6,8,12 */
    const uint32_t neg = fp4_prmt(0xFDFEFF00u, 0xF4F8FAFCu, nib & 0x7777u); /* 0,-1,-2,-3 | -4,-6,-8,-12 */
    const uint32_t sel = ((nib >> 1) & 0x4444u) | 0x3210u;
    return fp4_prmt(pos, neg, sel);
}

/* A 32-bit constant the compiler must keep in a register (it would otherwise rematerialize the
 * PRMT lookup tables from uniform registers before every use). */
static __device__ __forceinline__ uint32_t fp4_pin(uint32_t v) {
    asm volatile("" : "+r"(v));
    return v;
}

/* The merged decoder with its four lookup words held in registers (made once per kernel). */
struct fp4_q1_luts {
    uint32_t p0, p1, n0, n1;
};
static __device__ __forceinline__ fp4_q1_luts fp4_q1_luts_make() {
    fp4_q1_luts l = {fp4_pin(0x03020100u), fp4_pin(0x0C080604u), fp4_pin(0xFDFEFF00u), fp4_pin(0xF4F8FAFCu)};
    return l;
}
static __device__ __forceinline__ uint32_t fp4_e2m1x4_to_q1x4_l(uint32_t nib, const fp4_q1_luts &l) {
    const uint32_t pos = fp4_prmt(l.p0, l.p1, nib);
    const uint32_t neg = fp4_prmt(l.n0, l.n1, nib & 0x7777u);
    const uint32_t sel = ((nib >> 1) & 0x4444u) | 0x3210u;
    return fp4_prmt(pos, neg, sel);
}

/* Sign-split decode for dp4a: of four nibbles (bits 0..15), P holds |e2m1_q1| of the positive
 * codes (0 in the bytes of negative codes: the permute's sign-replicate of a byte < 0x80), N the
 * same of the negative codes (selector with the sign bits flipped). dot = dp4a(P,a) - dp4a(N,a).
 * Two permutes per four weights; lut_lo/lut_hi = 0x03020100 / 0x0C080604, pinned. */
static __device__ __forceinline__ void fp4_e2m1x4_split(uint32_t nib, uint32_t nib_flipped, uint32_t lut_lo,
                                                        uint32_t lut_hi, uint32_t *p, uint32_t *n) {
    *p = fp4_prmt(lut_lo, lut_hi, nib);
    *n = fp4_prmt(lut_lo, lut_hi, nib_flipped);
}

/* Two E4M3FN scale bytes (bits 0..15) to f16x2 (low byte -> low half), exact. */
static __device__ __forceinline__ uint32_t fp4_e4m3x2_to_h2(uint32_t two) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= FP4_CU_CC_ADA
    uint32_t d;
    const unsigned short s = (unsigned short)two;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(s));
    return d;
#else
    const __half lo = __float2half_rn(fp4_e4m3_to_f32(two & 0xFFu));
    const __half hi = __float2half_rn(fp4_e4m3_to_f32((two >> 8) & 0xFFu));
    return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
#endif
}

static __device__ __forceinline__ uint32_t fp4_h2_mul(uint32_t a, uint32_t b) {
    __half2 r = __hmul2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
    return *reinterpret_cast<uint32_t *>(&r);
}

static __device__ __forceinline__ uint32_t fp4_f2_to_h2(float lo, float hi) {
    __half2 r = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&r);
}

/* D = A*B + D, m16n8k16, f16 inputs, f32 accumulators (sm_80+). */
static __device__ __forceinline__ void fp4_mma_f16(float d[4], const uint32_t a[4], uint32_t b0,
                                                   uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* D = A*B, m16n8k16, s8 inputs, s32 result from zero (sm_80+). */
static __device__ __forceinline__ void fp4_mma_s8(int d[4], uint32_t a0, uint32_t a1, uint32_t b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                 "{%7,%7,%7,%7};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b), "r"(0));
}

static __device__ __forceinline__ long long fp4_shfl_xor_i64(long long v, int m) {
    return __shfl_xor_sync(0xFFFFFFFFu, v, m);
}

/* Split-K arrival: every block of a slice set calls this after writing its partials; it returns
 * true (in all threads of the block) in the one block that arrives last, which then reduces the
 * slices in slice order (so the result does not depend on arrival order) and leaves the counter
 * at zero for the next launch. */
static __device__ __forceinline__ bool fp4_splitk_arrive(unsigned *counter, int n_slices) {
    __shared__ unsigned last_flag;
    __threadfence(); /* make this block's partials visible device-wide before counting it */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(counter, 1u);
        last_flag = prev == (unsigned)(n_slices - 1);
        if (last_flag) atomicExch(counter, 0u);
    }
    __syncthreads();
    if (last_flag) __threadfence();
    return last_flag != 0;
}

/* The last-arriving block of a split-K set (after fp4_splitk_arrive): the slices of output
 * (tok, row) added in slice order, f32 (partials laid out [slice][column][row]). */
static __device__ __forceinline__ float fp4_splitk_sum(const float *partials, int n_slices, int ncols,
                                                       int64_t n_out, int tok, int64_t row) {
    float sum = 0.0f;
    for (int sp = 0; sp < n_slices; sp++)
        sum = __fadd_rn(sum, __ldcg(partials + ((int64_t)sp * ncols + tok) * n_out + row));
    return sum;
}

/* ---- internal functions (extern "C", hidden by -fvisibility=hidden) ------------------------- */
#define FP4_CU_MAX_DEVICES 64

#ifdef __cplusplus
extern "C" {
#endif

/* SM count of the current device (cached per device), 0 on error. */
int fp4_cu_sm_count(void);
/* cudaFuncAttributeMaxDynamicSharedMemorySize = bytes for `kernel` on the current device, once per
 * device: done[FP4_CU_MAX_DEVICES] is the caller's (one array per kernel instance), read and
 * written atomically. */
fp4_status fp4_cu_smem_opt_in(const void *kernel, size_t bytes, int *done);

/* Upload: n_rows rows of n_in values of llama.cpp type-40 blocks (36 bytes per 64 values, 4-aligned
 * at d_blocks) into canonical rows at d_payload / d_scales with the given strides (ggml_repack.cu);
 * bytes past n_in/2 and n_in/16 of each row are not written. A NaN scale byte sets *d_bad to 1. */
fp4_status fp4_cu_ggml_repack(const uint8_t *d_blocks, int64_t n_rows, int64_t n_in, uint8_t *d_payload,
                              int64_t payload_stride, uint8_t *d_scales, int64_t scale_stride, int *d_bad,
                              cudaStream_t stream);
/* *d_bad = 1 when a byte of the (n_rows, n_groups) scale plane at d_scales (rows stride bytes apart)
 * is an E4M3 NaN (ggml_repack.cu) */
fp4_status fp4_cu_scale_nan(const uint8_t *d_scales, int64_t n_rows, int64_t n_groups, int64_t stride,
                            int *d_bad, cudaStream_t stream);

/* The NVFP4 upload's staging (device.cu), for one thread at a time: two pinned host buffers the
 * host fills from the view's memory (a file mapping, say) in turn, each copied to the device on
 * `stream` while the host fills the other, one device buffer for type-40 blocks before their
 * repack, and the flag the device sets on a NaN scale byte. Opened once per engine (pinning memory
 * costs milliseconds), closed by fp4_cu_stager_close (idempotent; a zeroed stager is closed). */
typedef struct fp4_cu_stager {
    uint8_t *host[2];     /* pinned, bytes each                                   */
    uint8_t *dev;         /* device, bytes                                        */
    size_t bytes;         /* per buffer                                           */
    cudaStream_t stream;  /* non-blocking: every copy and kernel of an upload     */
    cudaEvent_t freed[2]; /* host[k]'s last copy to the device has completed      */
    int used[2];          /* freed[k] was recorded                                */
    int *d_bad, *h_bad;   /* the NaN flag on the device, and its pinned read-back */
    int threads;          /* host threads for a buffer's fill                     */
} fp4_cu_stager;
#define FP4_CU_STAGE_BYTES ((size_t)32 << 20)
fp4_status fp4_cu_stager_open(fp4_cu_stager *s, size_t bytes);
void fp4_cu_stager_close(fp4_cu_stager *s);
/* A view's rows into planes the caller allocated and zeroed (k_pad strides, as
 * fp4_cuda_tensor_upload_nvfp4 lays them out): the shape and scales checked on the host
 * (fp4_nvfp4_view_check_shape), every scale byte on the device; FP4_ERR_NAN_SCALE when one is a NaN
 * (the planes then hold it: the caller frees them). Returns when the device has written every
 * byte. */
fp4_status fp4_cu_upload_nvfp4_into(fp4_cu_stager *s, const fp4_nvfp4_view *w, uint8_t *d_payload,
                                    size_t payload_stride, uint8_t *d_scales, size_t scale_stride);
/* fp4_cuda_tensor_upload (F16/BF16/Q4_K/Q6_K) through an open stager (NULL: as the public one) */
fp4_status fp4_cu_tensor_upload_staged(fp4_cu_stager *s, int64_t type, const void *host_data, int64_t n_out,
                                       int64_t n_in, fp4_cuda_tensor *out);
/* fp4_cuda_tensor_upload_nvfp4 through an open stager */
fp4_status fp4_cu_tensor_upload_nvfp4_staged(fp4_cu_stager *s, const fp4_nvfp4_view *w, fp4_cuda_tensor *out);

/* Activation passes. Q8_K (SPEC §4 step 1) of n_cols columns of n_in values into int8 values
 * (n_cols, k_pad) at d_q (frag = 0: element order; 1: the integer-MMA fragment order) and steps
 * (n_cols, k_pad/256) at d_d, and/or ggml blocks at d_blocks; padding super-blocks give zeros. */
fp4_status fp4_cu_q8k_quantize(const float *d_x, int64_t n_in, int64_t k_pad, int64_t n_cols, int8_t *d_q,
                               float *d_d, fp4_block_q8_K *d_blocks, int frag, cudaStream_t stream);
/* W4A4 (SPEC §3 steps 3-5 per 16-group): packed codes / scale bytes (the public layout) and/or
 * int8 e2m1_q1 values (n_cols, k_pad) and e4m3fn_q9 ints at q9[col * q9_cs + group * q9_gs]. */
fp4_status fp4_cu_w4a4_act_quant(const float *d_x, int64_t n_in, int64_t k_pad, int64_t n_cols,
                                 float input_scale_inv, uint8_t *d_codes, uint8_t *d_scales, int8_t *d_q1,
                                 int32_t *d_q9, int64_t q9_cs, int64_t q9_gs, cudaStream_t stream);
/* input_scale = 1/input_scale_inv and 6*input_scale, rounded exactly as the CPU does. */
fp4_status fp4_cu_w4a4_scales(float input_scale_inv, float *input_scale, float *d6);

/* the frag layout's item (frag.cuh: 16 rows x 256 values, 2048 payload + 256 scale bytes) and the
 * bytes of the frag copy of an n_out x k_pad NVFP4 tensor */
#define FRAG_ITEM 2304
static inline __host__ __device__ size_t frag_bytes(int64_t n_out, int64_t k_pad) {
    return (size_t)((n_out + 15) / 16) * (size_t)(k_pad / 256) * FRAG_ITEM;
}

/* ---- the route launchers: what dispatch.cu's table names, nothing else calls them ---------- */
/* y (n_cols columns of n_out) = W x, any n_cols >= 1 (chunked inside); the scratch holds
 * FP4_CU_COUNTER_BYTES of counters, then the route's own bytes (its _scratch function). */
typedef fp4_status (*fp4_cu_route_fn)(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                                      const fp4_cuda_scratch *s, cudaStream_t stream);
typedef size_t (*fp4_cu_scratch_fn)(const fp4_cuda_tensor *w, int64_t n_cols);
/* one column from a given activation pass (exact: Q8_K int8 values in element order and their
 * steps, q8k.cu's layout; native: int16 values and steps, act16_kernel's): FP4_ERR_UNSUPPORTED
 * without launching anything when the route's 1-column kernel does not take w that way */
typedef fp4_status (*fp4_cu_pre_fn)(const fp4_cuda_tensor *w, const void *d_q, const float *d_d, float *d_y,
                                    cudaStream_t stream);

/* exact A16 (a16_exact.cu): the dp4a kernel at 1 column, the integer MMA from 2 (chunks of 16) */
fp4_status fp4_cu_a16_exact(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream);
size_t fp4_cu_a16_exact_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
fp4_status fp4_cu_a16_exact_pre(const fp4_cuda_tensor *w, const void *d_q, const float *d_d, float *d_y,
                                cudaStream_t stream);
/* exact A16 on the integer tensor cores, up to 128 columns a launch (a16_imma.cu); the table takes it
 * where fp4_cu_imma_takes: from FP4_CU_IMMA_MIN_COLS columns (below, a16_exact.cu's 16-column chunks
 * were faster on at least one llama3-8b shape: its few row blocks each walk the whole row; CLAIMS
 * imma-1), unless FP4LANE_CUDA_IMMA=0 */
#define FP4_CU_IMMA_MIN_COLS 256
fp4_status fp4_cu_a16_imma(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream);
size_t fp4_cu_a16_imma_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
int fp4_cu_imma_takes(const fp4_cuda_tensor *w, int64_t n_cols);
/* native A16 (a16_native.cu): the int16 dp2a kernel at 1 column, the shared-memory f16 MMA tiles above */
fp4_status fp4_cu_a16_native(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream);
size_t fp4_cu_a16_native_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
size_t fp4_cu_a16_frag_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
fp4_status fp4_cu_a16_native_pre(const fp4_cuda_tensor *w, const void *d_q, const float *d_d, float *d_y,
                                 cudaStream_t stream);
/* native A16 on the tensor cores from the frag copy (frag.cu), 1..8 columns; the table takes it where
 * the tensor has its frag copy (frag_bytes > 0) and n_cols columns fit one launch */
fp4_status fp4_cu_a16_frag(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream);
int fp4_cu_frag_takes(const fp4_cuda_tensor *w, int64_t n_cols);
/* dispatch.cu: 1 when the 1-column route of (w, mode) starts from a given activation pass */
int fp4_cu_project_has_pre(const fp4_cuda_tensor *w, fp4_mode mode);
/* dispatch.cu: the 1-column route of (w, mode) from a given activation pass (fp4_cu_pre_fn), where
 * the table's row has one; FP4_ERR_UNSUPPORTED (nothing launched) otherwise: then project the
 * f32 activations with fp4_cuda_project. Same bytes as fp4_cuda_project on the values the pass
 * was made from. */
fp4_status fp4_cu_project_pre(const fp4_cuda_tensor *w, fp4_mode mode, const void *d_q, const float *d_d,
                              float *d_y, cudaStream_t stream);
/* native A16 for many columns (a16_gemm.cu): weights and activations widened to f16, cuBLAS's
 * tensor-core GEMM (on unless FP4LANE_CUDA_GEMM=0, and loaded at run time; fp4_cu_gemm_available()
 * says whether it is on and loaded) */
fp4_status fp4_cu_a16_gemm(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                           const fp4_cuda_scratch *s, cudaStream_t stream);
size_t fp4_cu_a16_gemm_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
int fp4_cu_gemm_available(void);
/* load cuBLAS and make its handle now (the backend's create, native mode), not in the first prefill */
void fp4_cu_gemm_warm(void);
/* column-major C[i] = alpha * op(A[i]) * B[i] for i < batch (A, B f16; C f32; f32 accumulation), A
 * transposed when trans_a; FP4_ERR_UNSUPPORTED without cuBLAS or inside a graph capture */
fp4_status fp4_cu_gemm_f16_batched(int trans_a, int m, int n, int k, float alpha, const void *a, int lda,
                                   long long stride_a, const void *b, int ldb, long long stride_b, float *c,
                                   int ldc, long long stride_c, int batch, cudaStream_t stream);
/* exact W4A4 (w4a4.cu): the dp4a kernel at any width; the 8-warp integer MMA at exactly 16
 * columns (n_in % 64 == 0) */
fp4_status fp4_cu_w4a4_dp4a(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status fp4_cu_w4a4_mma16(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream);
size_t fp4_cu_w4a4_scratch(const fp4_cuda_tensor *w, int64_t n_cols);
/* F16/BF16 (dense.cu) and Q4_K/Q6_K (kquant.cu) weights: f32 accumulation, no scratch */
fp4_status fp4_cu_dense(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                        const fp4_cuda_scratch *s, cudaStream_t stream);
/* BF16 in native mode from 2 columns (dense_mma.cu): mma.sync bf16 on split f32 activations, chunks of
 * 16 columns, no scratch */
int fp4_cu_dense_mma_on(void); /* FP4LANE_CUDA_NO_DENSE_MMA unset or "0" */
/* the table's takes test: not for a tensor flagged FP4_CUDA_TENSOR_INVARIANT (the MMA sums round
 * otherwise than bf16.dense's 1-column FMA chain) */
int fp4_cu_dense_mma_takes(const fp4_cuda_tensor *w, int64_t n_cols);
fp4_status fp4_cu_dense_mma(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream);
/* F16/BF16 in exact mode (dense_pinned.cu): the CPU's dense.pinned bit for bit, no scratch */
fp4_status fp4_cu_dense_pinned(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                               const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status fp4_cu_kquant(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                         const fp4_cuda_scratch *s, cudaStream_t stream);
/* FP8 weights (fp8.cu): the bf16-widened rows through dense.pinned (exact) or dense (native), then
 * the f32 row scales, one __fmul_rn each; no scratch */
fp4_status fp4_cu_fp8_pinned(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                             const fp4_cuda_scratch *s, cudaStream_t stream);
fp4_status fp4_cu_fp8_dense(const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols, float *d_y,
                            const fp4_cuda_scratch *s, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FP4_CUDA_COMMON_CUH */
