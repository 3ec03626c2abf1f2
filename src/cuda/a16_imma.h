/* a16_imma.h — the geometry of a16_imma.cu's kernel, plain C so that tests/test_imma_emul.c runs
 * the same tile loop on the host: a block holds IMMA_TILES tiles of 32 rows (sb_tile.cuh's layout,
 * 32 x 128 payload bytes then 32 x 16 scale bytes) and IMMA_NW warps of IMMA_NT n-tiles (8 columns
 * each); IMMA_NS shared-memory stages of one super-block each. */
#ifndef FP4_CUDA_A16_IMMA_H
#define FP4_CUDA_A16_IMMA_H

#define IMMA_NW 8                               /* warps per block */
#define IMMA_NT 2                               /* n-tiles (8 columns) per warp */
#define IMMA_TILES 2                            /* 32-row tiles per block */
#define IMMA_TILE_ROWS 32                       /* = FP4_SBT_ROWS */
#define IMMA_TILE_BYTES (IMMA_TILE_ROWS * 144)  /* = FP4_SBT_BYTES */
#define IMMA_ROWS (IMMA_TILES * IMMA_TILE_ROWS) /* 64 */
#define IMMA_COLS (IMMA_NW * 8 * IMMA_NT)       /* 128 */
#define IMMA_NS 3                               /* shared-memory stages */
#define IMMA_STAGE (IMMA_TILES * IMMA_TILE_BYTES)
#define IMMA_QP (IMMA_TILES * 16 * 32) /* ints of one warp's q9 tables */
/* 16-byte copies a stage: per tile 32 rows x 8 payload chunks, then 32 scale chunks */
#define IMMA_CHUNKS (IMMA_TILES * (IMMA_TILE_ROWS * 8 + IMMA_TILE_ROWS))
#define IMMA_MAX_GRID_Y 65535

#endif /* FP4_CUDA_A16_IMMA_H */
