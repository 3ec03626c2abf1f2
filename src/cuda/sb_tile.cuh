/* sb_tile.cuh — the 32-row super-block tile of the integer-MMA kernels (a16_exact.cu's exact A16
 * kernel, w4a4.cu's 16-column W4A4 kernel, the lab's exact.8/9): one warp stages one 256-value
 * super-block of 32 rows in shared memory, reads back the A fragments of mma.sync m16n8k16 s8,
 * and turns the rows' scale bytes into e4m3fn_q9 weights. Never installed.
 *
 * Tile layout: 32 rows x 128 payload bytes, the 16-byte chunk c of row r at chunk c ^ (r & 7)
 * (so the fragment reads below are conflict-free), then 32 rows x 16 scale bytes. */
#ifndef FP4_CUDA_SB_TILE_CUH
#define FP4_CUDA_SB_TILE_CUH

#include "common.cuh"

#define FP4_SBT_ROWS 32
#define FP4_SBT_PAYLOAD (FP4_SBT_ROWS * 128)
#define FP4_SBT_BYTES (FP4_SBT_PAYLOAD + FP4_SBT_ROWS * 16)

/* The warp copies super-block sb of rows rowbase..rowbase+31 into dst by cp.async (rows past
 * n_out read the last row; their results are discarded) and commits one group, empty when
 * sb >= nsb, so that every lane's wait counts stay uniform. A statement macro, not a function:
 * through a function nvcc computes the shared-memory addresses differently (64-bit base
 * arithmetic), and the production kernels are kept instruction-identical to the measured ones. */
#define FP4_SBT_LOAD(dst, payload, scales, pstride, sstride, n_out, rowbase, sb, nsb, lane)                  \
    do {                                                                                                     \
        if ((sb) < (nsb)) {                                                                                  \
            uint8_t *dst_ = (dst);                                                                           \
            _Pragma("unroll") for (int i_ = 0; i_ < 8; i_++) {                                               \
                const int idx_ = i_ * 32 + (lane), row_ = idx_ >> 3, c_ = idx_ & 7;                          \
                int64_t gr_ = (rowbase) + row_;                                                              \
                if (gr_ >= (n_out)) gr_ = (n_out)-1;                                                         \
                fp4_cp_async16(dst_ + row_ * 128 + ((c_ ^ (row_ & 7)) << 4),                                 \
                               (payload) + gr_ * (pstride) + (int64_t)(sb)*128 + c_ * 16);                   \
            }                                                                                                \
            int64_t gr_ = (rowbase) + (lane);                                                                \
            if (gr_ >= (n_out)) gr_ = (n_out)-1;                                                             \
            fp4_cp_async16(dst_ + FP4_SBT_PAYLOAD + (lane)*16,                                               \
                           (scales) + gr_ * (sstride) + (int64_t)(sb)*16);                                   \
        }                                                                                                    \
        fp4_cp_async_commit();                                                                               \
    } while (0)

/* The 16-bit unit (4 codes) of 16-group g that lane (r0 = lane / 4, qd = lane % 4) holds in the
 * A fragment of m-tile mt, row half h (rows mt*16 + h*8 + r0). */
static __device__ __forceinline__ uint32_t fp4_sbt_a_unit(const uint8_t *tile, int mt, int h, int r0, int qd,
                                                          int g) {
    const int off = ((((g >> 1) ^ r0) << 4) | ((g & 1) << 3) | (qd << 1));
    return *reinterpret_cast<const unsigned short *>(tile + (mt * 16 + h * 8 + r0) * 128 + off);
}

/* Row `lane`'s 16 scale bytes: sv = fp4_sbt_row_scales(tile, lane). (Loaded by the caller: with
 * the load inside this helper ptxas gives the exact A16 kernel 13 more registers and spills.) */
#define fp4_sbt_row_scales(tile, lane)                                                                       \
    (*reinterpret_cast<const uint4 *>((tile) + FP4_SBT_PAYLOAD + (lane)*16))
/* The 16 scale bytes sv -> q9[16] through lut (256 e4m3fn_q9 ints in shared memory); returns the
 * OR of their magnitudes (its lowest set bit is the row's common power of two); *neg gets the OR
 * of the q9 themselves (negative when a scale is). */
static __device__ __forceinline__ uint32_t fp4_sbt_row_q9(uint4 sv, const int *lut, int q9[16], int *neg) {
    const uint32_t sw[4] = {sv.x, sv.y, sv.z, sv.w};
    uint32_t o = 0;
    int n = 0;
#pragma unroll
    for (int g = 0; g < 16; g++) {
        q9[g] = lut[(sw[g >> 2] >> (8 * (g & 3))) & 0xFFu];
        o |= (uint32_t)abs(q9[g]);
        n |= q9[g];
    }
    *neg = n;
    return o;
}

/* The warp's q9 table in shared memory (16 groups x 32 rows, rows r, r+8, r+16, r+24 adjacent so
 * that one int4 load gives a lane its four rows), each row's weights shifted right by sh. */
static __device__ __forceinline__ void fp4_sbt_put_q9(int *qp, const int q9[16], int sh, int lane) {
#pragma unroll
    for (int g = 0; g < 16; g++) qp[g * 32 + (lane & 7) * 4 + (lane >> 3)] = q9[g] >> sh;
}

/* four e2m1 codes (bits 0..15) -> four int8 e2m1_q1 in 5 ops; L0/L1 = 0x03020100 / 0x0C080604,
 * pinned in registers: P = prmt(L0, L1, nib) (0 in the bytes of negative codes by the permute's sign
 * replicate), N = prmt(L0, L1, nib ^ 0x8888), q = P | (byte-wise -N without borrows, N <= 12) */
struct fp4_sbt_dec5 {
    uint32_t L0, L1;
    __device__ __forceinline__ uint32_t operator()(uint32_t nib) const {
        const uint32_t p = fp4_prmt(L0, L1, nib);
        const uint32_t n = fp4_prmt(L0, L1, nib ^ 0x8888u);
        return p | ((0x80808080u - n) ^ 0x80808080u);
    }
};

/* ---- the exact A16 group dots of one super-block ------------------------------------------------ */
/* For the warp's 32 rows x 8*NT columns: per 16-group g, the A fragments from the tile decoded by
 * dec (four e2m1 codes -> four int8 e2m1_q1), the B operands b[nt][g] (the Q8_K int8 values in
 * fragment order), one mma.sync per m-tile and n-tile gives the exact int32 group dots, weighted by
 * the q9 table (fp4_sbt_put_q9) into acc (W = int on the fast path, long long otherwise). */
template <int NT, typename W, typename DEC>
static __device__ __forceinline__ void fp4_sbt_a16_groups(const uint8_t *st, const int *qp,
                                                          const uint32_t (&b)[NT][16], int r0, int qd,
                                                          const DEC &dec, W (&acc)[2][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0;
#pragma unroll
    for (int g = 0; g < 16; g++) {
        uint32_t a[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) a[mt][h] = dec(fp4_sbt_a_unit(st, mt, h, r0, qd, g));
        const int4 qv = *reinterpret_cast<const int4 *>(qp + g * 32 + r0 * 4); /* rows r0, +8, +16, +24 */
        const int qs[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                int d[4];
                fp4_mma_s8(d, a[mt][0], a[mt][1], b[nt][g]);
#pragma unroll
                for (int i = 0; i < 4; i++) acc[mt][nt][i] += (W)d[i] * (W)qs[mt * 2 + (i >> 1)];
            }
    }
}

/* ---- the exact A16 epilogue of one super-block (SPEC §4 step 4) --------------------------------- */
/* A group-weighted total as f32: int32 totals were computed at weights q9 >> sh (times 2^sh,
 * exact: (float)total == (float)acc * 2^sh), int64 totals at the full weights. */
static __device__ __forceinline__ float fp4_sbt_total(int acc, int sh) {
    return __fmul_rn(__int2float_rn(acc), fp4_pow2f(sh));
}
static __device__ __forceinline__ float fp4_sbt_total(long long acc, int) { return __ll2float_rn(acc); }

/* The group-weighted totals of the warp as f32 (see fp4_sbt_total). */
template <int NT, typename W>
static __device__ __forceinline__ void fp4_sbt_totals(const W (&acc)[2][NT][4], const int (&shr)[4],
                                                      float (&tot)[2][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                tot[mt][nt][i] = fp4_sbt_total(acc[mt][nt][i], shr[mt * 2 + (i >> 1)]);
}

/* cv = the pinned term of each (row, column) of the warp's 32 rows x 8*NT columns (C layout of
 * m16n8k16: i=0 (row r0, column 2qd), 1 (r0, 2qd+1), 2 (r0+8, 2qd), 3 (r0+8, 2qd+1)); dv: the
 * steps of columns nt*8 + 2qd + e; a column whose step is 0 contributes +0. */
template <int NT>
static __device__ __forceinline__ void fp4_sbt_a16_terms(const float (&tot)[2][NT][4],
                                                         const float (&dv)[NT][2], float scale2,
                                                         float (&cv)[2][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float dcol = dv[nt][i & 1];
                float c = 0.0f;
                if (dcol != 0.0f) c = fp4_cu_a16_term(tot[mt][nt][i], dcol, scale2);
                cv[mt][nt][i] = c;
            }
}

/* A super-block past the end: every term +0. */
template <int NT> static __device__ __forceinline__ void fp4_sbt_zero_terms(float (&cv)[2][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) cv[mt][nt][i] = 0.0f;
}

/* The warp's terms into its (32 rows x NCP columns) f32 slot in shared memory. */
template <int NT, int NCP>
static __device__ __forceinline__ void fp4_sbt_put_terms(float *cb, const float (&cv)[2][NT][4], int r0,
                                                         int qd) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                *reinterpret_cast<float2 *>(cb + (mt * 16 + h * 8 + r0) * NCP + nt * 8 + qd * 2) =
                    make_float2(cv[mt][nt][2 * h], cv[mt][nt][2 * h + 1]);
}

#endif /* FP4_CUDA_SB_TILE_CUH */
