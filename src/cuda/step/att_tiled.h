/* att_tiled.h — the geometry of att_tiled.cuh's kernel, plain C so that tests/test_att_tiled_emul.c
 * runs the same loops on the host. A block serves one (column, KV head, group of up to STK_GB = 4
 * query heads) with ATT_T_THREADS threads; the keys go through shared memory in tiles of ATT_T_KEYS
 * rows (two stages, rows ATT_T_ROW_BYTES(D) apart: the 16-byte padding puts the 8 rows a quarter-warp
 * reads at distinct banks). Shared memory: the group's q [4][D] floats, its scores (then the
 * exponentials) [4][att_t_npad(n_ctx)] floats, then the two stages. */
#ifndef FP4_RT_ATT_TILED_H
#define FP4_RT_ATT_TILED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ATT_T_HD __host__ __device__
#else
#define ATT_T_HD
#endif

#define ATT_T_THREADS 256 /* 8 warps: scores, warp w takes head w % 4 and half w / 4 of a tile */
#define ATT_T_KEYS 64     /* keys a tile (a multiple of 32: a tile's row r is pinned lane r % 32) */
#define ATT_T_HEADS 4     /* = STK_GB */
#define ATT_T_PV 64       /* threads a head in the P.V pass: ATT_T_HEADS * ATT_T_PV = ATT_T_THREADS */
#define ATT_T_ROW_BYTES(d) (2 * (d) + 16)
#define ATT_T_MAX_SMEM (200 * 1024) /* above: the two-launch kernels serve */
#define ATT_T_MIN_COLS 16           /* the step's narrowest width for this kernel */

static inline ATT_T_HD int64_t att_t_npad(int64_t n_ctx) {
    return (n_ctx + ATT_T_KEYS - 1) / ATT_T_KEYS * ATT_T_KEYS;
}
static inline size_t att_t_smem(int d, int64_t n_ctx) {
    return (size_t)ATT_T_HEADS * (size_t)d * 4 + (size_t)ATT_T_HEADS * (size_t)att_t_npad(n_ctx) * 4 +
           2 * (size_t)ATT_T_KEYS * (size_t)ATT_T_ROW_BYTES(d);
}
/* head dims 64 and 128 (one or two outputs a P.V thread), contexts whose scores fit */
static inline int att_t_fits(int d, int64_t n_ctx) {
    return (d == 64 || d == 128) && n_ctx > 0 && n_ctx <= (int64_t)1 << 20 &&
           att_t_smem(d, n_ctx) <= ATT_T_MAX_SMEM;
}

#endif /* FP4_RT_ATT_TILED_H */
