/* a16_imma.h — the geometry of a16_imma.cu's kernel, plain C so that tests/test_imma_emul.c runs
 * the same tile loop on the host. A block has IMMA_NW warps in a grid of IMMA_NW / WC row groups by
 * WC column groups; a warp computes IMMA_WT tiles of 32 rows (sb_tile.cuh's layout: 32 x 128
 * payload bytes, then 32 x 16 scale bytes) by IMMA_NT n-tiles of 8 columns, so a block covers
 * IMMA_ROWS(WC) rows by IMMA_COLS(WC) columns; IMMA_NS shared-memory stages of one super-block of
 * the block's rows each, and one buffer of the current super-block's weights decoded to int8 in the
 * order of the MMA's A fragments. WC is 2, 4 or 8 (the launch picks the narrowest that holds the columns). */
#ifndef FP4_CUDA_A16_IMMA_H
#define FP4_CUDA_A16_IMMA_H

#define IMMA_NW 8                                   /* warps per block */
#define IMMA_NT 2                                   /* n-tiles (8 columns) per warp */
#define IMMA_WT 2                                   /* 32-row tiles per warp */
#define IMMA_TILE_ROWS 32                           /* = FP4_SBT_ROWS */
#define IMMA_TILE_BYTES (IMMA_TILE_ROWS * 144)      /* = FP4_SBT_BYTES */
#define IMMA_NS 3                                   /* shared-memory stages */
#define IMMA_NS_PIPE 4 /* stages of the one-barrier schedule (a16_imma.cu's PIPE) */
#define IMMA_TILES(wc) (IMMA_WT * (IMMA_NW / (wc))) /* tiles per block */
#define IMMA_ROWS(wc) (IMMA_TILES(wc) * IMMA_TILE_ROWS)
#define IMMA_COLS(wc) ((wc)*8 * IMMA_NT)
#define IMMA_STAGE(wc) (IMMA_TILES(wc) * IMMA_TILE_BYTES)
#define IMMA_QP (IMMA_WT * 16 * 32) /* ints of one warp's q9 tables */
/* 16-byte copies a stage: per tile 32 rows x 8 payload chunks, then 32 scale chunks */
#define IMMA_TILE_CHUNKS (IMMA_TILE_ROWS * 8 + IMMA_TILE_ROWS)
#define IMMA_CHUNKS(wc) (IMMA_TILES(wc) * IMMA_TILE_CHUNKS)
/* the decoded A fragments of a stage: per tile, m-tile and row half, per lane 16 words (one per
 * 16-group: four int8 e2m1_q1), the lane's four 16-byte chunks at chunk c ^ IMMA_DSWZ(lane) */
#define IMMA_DEC_TILE (4 * 32 * 64)
#define IMMA_DEC(wc) (IMMA_TILES(wc) * IMMA_DEC_TILE)
#define IMMA_DSWZ(lane) (((lane) >> 1) & 3)
#define IMMA_MAX_GRID_Y 65535

#endif /* FP4_CUDA_A16_IMMA_H */
