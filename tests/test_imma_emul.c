/* test_imma_emul.c — a16_imma.cu's tile loop run on the host, so that the device run is not the
 * first check of its indices: the Q8_K values in q8k.cu's fragment order, the block's stage copies
 * (every byte of a stage written once, into sb_tile.cuh's XOR-swizzled tile), each lane's A units
 * read back and decoded by the byte-permute decoder (prmt emulated as PTX defines it), the B words,
 * mma.sync m16n8k16 s8 emulated from the PTX fragment layouts (A row-major: lane's register 0 row
 * lane/4, register 1 row lane/4 + 8, columns 4(lane%4) + byte; B column lane/4, rows 4(lane%4) +
 * byte; C rows lane/4 (+8), columns 2(lane%4) + i%2), the q9 table and per-row shifts of the int32
 * path (int64 otherwise), the pinned epilogue into one owner per (row, column), the F16 boundary and
 * the stores. Every (shape, column count) must equal fp4_nvfp4_matvec_a16_exact bit for bit: ragged
 * rows and columns, one and several blocks each way, both integer paths. */
#define FP4LANE_ORACLE_API
#include "check.h"
#include "cuda/a16_imma.h"
#include "fp4lane.h"
#include <math.h>
#include <stdlib.h>

typedef struct emu {
    const fp4_nvfp4_view *w;
    int64_t n_out, n_in, nsb;
    int ncols;
    int8_t *xf; /* (ncols, n_in) int8 in fragment order */
    float *xd;  /* (ncols, nsb) steps */
    int lut[256];
    int wc;       /* column groups a block (a16_imma.cu's launch choice) */
    int paths[2]; /* super-block tiles on the int64 / int32 path */
} emu;

static uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    const uint64_t src = (uint64_t)a | (uint64_t)b << 32;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t s = (sel >> (4 * i)) & 15u;
        uint32_t byte = (uint32_t)(src >> (8 * (s & 7))) & 0xFFu;
        if (s & 8) byte = byte & 0x80u ? 0xFFu : 0u; /* sign replicate */
        d |= byte << (8 * i);
    }
    return d;
}

static uint32_t dec(uint32_t nib) {
    const uint32_t p = prmt(0x03020100u, 0x0C080604u, nib);
    const uint32_t n = prmt(0x03020100u, 0x0C080604u, nib ^ 0x8888u);
    return p | ((0x80808080u - n) ^ 0x80808080u);
}

static int8_t byte_of(uint32_t w, int i) {
    return (int8_t)(uint8_t)(w >> (8 * i));
}

/* q8k.cu, frag = 1: value v of a super-block at byte (v%16/4)*64 + (v/16)*4 + v%4 */
static void emu_quantize(emu *e, const float *x) {
    fp4_block_q8_K *blk = malloc(sizeof *blk * (size_t)e->nsb);
    for (int c = 0; c < e->ncols; c++) {
        CHECK_OK(fp4_q8_K_quantize(x + c * e->n_in, e->n_in, blk));
        for (int64_t sb = 0; sb < e->nsb; sb++) {
            for (int v = 0; v < 256; v++)
                e->xf[c * e->n_in + sb * 256 + (v % 16 / 4) * 64 + (v / 16) * 4 + v % 4] = blk[sb].qs[v];
            e->xd[c * e->nsb + sb] = blk[sb].d;
        }
    }
    free(blk);
}

/* imma_load for every thread of the block; cover counts the writes of each byte */
static void emu_load(const emu *e, uint8_t *dst, int64_t rowbase, int sb, int *cover) {
    const int64_t pstride = e->n_in / 2, sstride = e->n_in / 16;
    for (int tid = 0; tid < IMMA_NW * 32; tid++)
        for (int idx = tid; idx < IMMA_CHUNKS(e->wc); idx += IMMA_NW * 32) {
            const int t = idx / IMMA_TILE_CHUNKS, j = idx % IMMA_TILE_CHUNKS;
            const int tile = t * IMMA_TILE_BYTES;
            int off;
            const uint8_t *src;
            if (j < IMMA_TILE_ROWS * 8) {
                const int row = j >> 3, c = j & 7;
                int64_t gr = rowbase + t * IMMA_TILE_ROWS + row;
                if (gr >= e->n_out) gr = e->n_out - 1;
                off = tile + row * 128 + ((c ^ (row & 7)) << 4);
                src = e->w->payload + gr * pstride + (int64_t)sb * 128 + c * 16;
            } else {
                const int row = j - IMMA_TILE_ROWS * 8;
                int64_t gr = rowbase + t * IMMA_TILE_ROWS + row;
                if (gr >= e->n_out) gr = e->n_out - 1;
                off = tile + IMMA_TILE_ROWS * 128 + row * 16;
                src = e->w->scales + gr * sstride + (int64_t)sb * 16;
            }
            memcpy(dst + off, src, 16);
            for (int b = 0; b < 16; b++)
                cover[off + b]++;
        }
}

/* sb_tile.cuh's fp4_sbt_a_unit */
static uint32_t a_unit(const uint8_t *tile, int mt, int h, int r0, int qd, int g) {
    const int off = ((((g >> 1) ^ r0) << 4) | ((g & 1) << 3) | (qd << 1));
    const uint8_t *p = tile + (mt * 16 + h * 8 + r0) * 128 + off;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* mma.sync m16n8k16 s8: a[lane][2], b[lane] -> d[lane][4], from the PTX fragment layouts */
static void mma(const uint32_t a[32][2], const uint32_t b[32], int d[32][4]) {
    int A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 8; i++) {
            A[lane / 4 + (i >= 4 ? 8 : 0)][4 * (lane % 4) + (i & 3)] = byte_of(a[lane][i >> 2], i & 3);
            if (i < 4) B[4 * (lane % 4) + i][lane / 4] = byte_of(b[lane], i);
        }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            const int row = lane / 4 + (i >= 2 ? 8 : 0), col = 2 * (lane % 4) + (i & 1);
            int s = 0;
            for (int k = 0; k < 16; k++)
                s += A[row][k] * B[k][col];
            d[lane][i] = s;
        }
}

static float term(float total, float d, float scale2) { /* fp4_cu_a16_term */
    float c = fmaf(total, 0x1p-10f, 0.0f);
    c = fmaf(c, d, 0.0f);
    return fmaf(c, scale2, 0.0f);
}

/* one warp's tile t of super-block sb: the pinned terms of its 32 rows x 8*IMMA_NT columns into own */
/* imma_decode: warp w takes (tile, m-tile, row half) j = w, w + IMMA_NW, ...; each lane its 16 words
 * as four 16-byte chunks at chunk c ^ IMMA_DSWZ(lane); dcover counts the writes of each byte */
static void emu_decode(const emu *e, const uint8_t *stage, uint8_t *dbuf, int *dcover) {
    for (int warp = 0; warp < IMMA_NW; warp++)
        for (int j = warp; j < IMMA_TILES(e->wc) * 4; j += IMMA_NW)
            for (int lane = 0; lane < 32; lane++) {
                const int t = j >> 2, mt = (j >> 1) & 1, h = j & 1;
                for (int g = 0; g < 16; g++) {
                    const uint32_t v =
                        dec(a_unit(stage + t * IMMA_TILE_BYTES, mt, h, lane >> 2, lane & 3, g));
                    const int off = (j * 32 + lane) * 64 + (((g >> 2) ^ IMMA_DSWZ(lane)) << 4) + (g & 3) * 4;
                    memcpy(dbuf + off, &v, 4);
                    for (int b = 0; b < 4; b++)
                        dcover[off + b]++;
                }
            }
}

/* imma_groups' read of the A word of (m-tile, row half, group) for lane from a tile's decoded buffer */
static uint32_t dec_word(const uint8_t *dt, int mt, int h, int lane, int g) {
    uint32_t v;
    memcpy(&v, dt + ((mt * 2 + h) * 32 + lane) * 64 + (((g >> 2) ^ IMMA_DSWZ(lane)) << 4) + (g & 3) * 4, 4);
    return v;
}

static void emu_tile(emu *e, const uint8_t *st, const uint8_t *dt, int colbase, int sb,
                     float own[32][2][IMMA_NT][4]) {
    int q9[32][16], sh[32], qp[16 * 32];
    int fast = 1;
    for (int lane = 0; lane < 32; lane++) {
        uint32_t o = 0;
        for (int g = 0; g < 16; g++) {
            q9[lane][g] = e->lut[st[IMMA_TILE_ROWS * 128 + lane * 16 + g]];
            o |= (uint32_t)abs(q9[lane][g]);
        }
        sh[lane] = o ? __builtin_ctz(o) : 0;
        fast &= (o >> sh[lane]) < 4096u;
    }
    for (int lane = 0; lane < 32; lane++) {
        if (!fast) sh[lane] = 0;
        for (int g = 0; g < 16; g++)
            qp[g * 32 + (lane & 7) * 4 + (lane >> 3)] = q9[lane][g] >> sh[lane];
    }
    e->paths[fast]++;
    long long acc[32][2][IMMA_NT][4];
    memset(acc, 0, sizeof acc);
    int over = 0; /* int32 path: a partial sum past int32 (the bound the kernel relies on) */
    for (int g = 0; g < 16; g++)
        for (int mt = 0; mt < 2; mt++)
            for (int nt = 0; nt < IMMA_NT; nt++) {
                uint32_t a[32][2], b[32];
                int d[32][4];
                for (int lane = 0; lane < 32; lane++) {
                    const int r0 = lane >> 2, qd = lane & 3, col = colbase + nt * 8 + r0;
                    for (int h = 0; h < 2; h++)
                        a[lane][h] = dec_word(dt, mt, h, lane, g);
                    b[lane] = 0;
                    if (col < e->ncols)
                        memcpy(&b[lane], e->xf + (int64_t)col * e->n_in + (int64_t)sb * 256 + qd * 64 + g * 4,
                               4);
                }
                mma(a, b, d);
                for (int lane = 0; lane < 32; lane++)
                    for (int i = 0; i < 4; i++) {
                        const int w = qp[g * 32 + (lane >> 2) * 4 + mt * 2 + (i >> 1)];
                        acc[lane][mt][nt][i] += (long long)d[lane][i] * w;
                        over |=
                            fast && (acc[lane][mt][nt][i] < INT32_MIN || acc[lane][mt][nt][i] > INT32_MAX);
                    }
            }
    CHECK(!over);
    for (int lane = 0; lane < 32; lane++) {
        const int r0 = lane >> 2, qd = lane & 3;
        for (int mt = 0; mt < 2; mt++)
            for (int nt = 0; nt < IMMA_NT; nt++)
                for (int i = 0; i < 4; i++) {
                    const int c2 = colbase + nt * 8 + qd * 2 + (i & 1);
                    const float dcol = c2 < e->ncols ? e->xd[c2 * e->nsb + sb] : 0.0f;
                    const long long v = acc[lane][mt][nt][i];
                    const float tot =
                        fast ? ldexpf((float)(int)v, sh[r0 + 8 * (mt * 2 + (i >> 1))]) : (float)v;
                    const float c = dcol != 0.0f ? term(tot, dcol, e->w->scale2) : 0.0f;
                    own[lane][mt][nt][i] = fmaf(1.0f, c, own[lane][mt][nt][i]);
                }
    }
}

static void emu_block(emu *e, int bx, int64_t by, float *y) {
    const int wc = e->wc, stage_bytes = IMMA_STAGE(wc);
    const int64_t rowbase = by * IMMA_ROWS(wc);
    static uint8_t stage[IMMA_STAGE(2)]; /* the largest */
    static uint8_t dbuf[IMMA_DEC(2)];
    static int dcover[IMMA_DEC(2)];
    static int cover[IMMA_STAGE(2)];
    static float own[IMMA_NW][IMMA_WT][32][2][IMMA_NT][4];
    memset(own, 0, sizeof own);
    for (int sb = 0; sb < e->nsb; sb++) {
        memset(stage, 0xCD, sizeof stage);
        memset(cover, 0, sizeof cover);
        emu_load(e, stage, rowbase, sb, cover);
        int once = 1;
        for (int i = 0; i < stage_bytes; i++)
            once &= cover[i] == 1;
        CHECK_MSG(once, "a stage byte written other than once (sb %d)", sb);
        memset(dbuf, 0xCD, sizeof dbuf);
        memset(dcover, 0, sizeof dcover);
        emu_decode(e, stage, dbuf, dcover);
        for (int i = 0; i < IMMA_DEC(wc); i++)
            once &= dcover[i] == 1;
        CHECK_MSG(once, "a decoded byte written other than once (sb %d)", sb);
        for (int warp = 0; warp < IMMA_NW; warp++) {
            const int rg = warp / wc, colbase = bx * IMMA_COLS(wc) + (warp % wc) * 8 * IMMA_NT;
            if (colbase >= e->ncols) continue;
            for (int t = 0; t < IMMA_WT; t++)
                emu_tile(e, stage + (rg * IMMA_WT + t) * IMMA_TILE_BYTES,
                         dbuf + (rg * IMMA_WT + t) * IMMA_DEC_TILE, colbase, sb, own[warp][t]);
        }
    }
    for (int warp = 0; warp < IMMA_NW; warp++)
        for (int t = 0; t < IMMA_WT; t++)
            for (int lane = 0; lane < 32; lane++)
                for (int mt = 0; mt < 2; mt++)
                    for (int nt = 0; nt < IMMA_NT; nt++)
                        for (int i = 0; i < 4; i++) {
                            const int64_t row = rowbase + ((warp / wc) * IMMA_WT + t) * 32 + mt * 16 +
                                                (i >> 1) * 8 + (lane >> 2);
                            const int col = bx * IMMA_COLS(wc) + (warp % wc) * 8 * IMMA_NT + nt * 8 +
                                            (lane & 3) * 2 + (i & 1);
                            if (row < e->n_out && col < e->ncols)
                                y[(int64_t)col * e->n_out + row] =
                                    fp4_round_f16(own[warp][t][lane][mt][nt][i]);
                        }
}

static void emu_project(emu *e, const float *x, float *y) {
    emu_quantize(e, x);
    for (int i = 0; i < 256; i++)
        e->lut[i] = fp4_e4m3fn_q9((uint8_t)i);
    const int wc = e->wc, rows = IMMA_ROWS(wc), cols = IMMA_COLS(wc);
    const int64_t row_blocks = (e->n_out + rows - 1) / rows;
    const int col_blocks = (e->ncols + cols - 1) / cols;
    for (int64_t by = 0; by < row_blocks; by++)
        for (int bx = 0; bx < col_blocks; bx++)
            emu_block(e, bx, by, y);
}

/* kind 0: scales near 1 (int32 path); 1: every scale byte, zero groups and rows (int64 path too) */
static void make_w(fp4_nvfp4_view *v, uint8_t *pay, uint8_t *sc, int64_t n_out, int64_t n_in, int kind,
                   test_rng *r) {
    for (int64_t i = 0; i < n_out * n_in / 2; i++)
        pay[i] = (uint8_t)rng_u64(r);
    for (int64_t i = 0; i < n_out * n_in / 16; i++) {
        uint8_t b = kind ? (uint8_t)rng_u64(r) : (uint8_t)(0x30 + rng_u64(r) % 0x20);
        if ((b & 0x7F) == 0x7F) b ^= 1; /* not a NaN byte: the view would be refused */
        sc[i] = b;
    }
    if (kind)
        for (int64_t row = 3; row < n_out; row += 7)
            memset(pay + row * (n_in / 2), 0, (size_t)(n_in / 2));
    memset(v, 0, sizeof *v);
    v->payload = pay, v->scales = sc, v->n_out = n_out, v->n_in = n_in, v->scale2 = kind ? 3.0e-3f : 0.7f;
}

/* wc: the block's column groups; 0: a16_imma.cu's launch choice for ncols */
static void check_shape(int64_t n_out, int64_t n_in, int ncols, int kind, int wc, uint64_t seed) {
    test_rng r = {seed};
    uint8_t *pay = malloc((size_t)(n_out * n_in / 2)), *sc = malloc((size_t)(n_out * n_in / 16));
    fp4_nvfp4_view v;
    make_w(&v, pay, sc, n_out, n_in, kind, &r);
    float *x = malloc(sizeof(float) * (size_t)(n_in * ncols));
    for (int64_t i = 0; i < n_in * ncols; i++)
        x[i] = rng_normal(&r);
    for (int64_t i = 0; i < n_in; i++)
        x[i] = 0.0f; /* column 0: every super-block zero (d = 0) */
    if (ncols > 3)
        for (int64_t i = 0; i < 256; i++)
            x[3 * n_in + i] = (i % 2) ? 5.0f : -5.0f; /* every value ±127 */
    float *want = malloc(sizeof(float) * (size_t)(n_out * ncols)),
          *got = malloc(sizeof(float) * (size_t)(n_out * ncols));
    CHECK_OK(fp4_nvfp4_matvec_a16_exact(&v, x, ncols, want, 1));
    memset(got, 0xFF, sizeof(float) * (size_t)(n_out * ncols));
    if (!wc) wc = ncols <= IMMA_COLS(2) ? 2 : ncols <= IMMA_COLS(4) ? 4 : 8;
    emu e = {.w = &v, .n_out = n_out, .n_in = n_in, .nsb = n_in / 256, .ncols = ncols, .wc = wc};
    e.xf = malloc((size_t)(n_in * ncols));
    e.xd = malloc(sizeof(float) * (size_t)(e.nsb * ncols));
    emu_project(&e, x, got);
    int64_t bad = 0;
    for (int64_t i = 0; i < n_out * ncols; i++)
        bad += memcmp(&want[i], &got[i], 4) != 0;
    CHECK_MSG(bad == 0, "imma emulation %lldx%lld, %d cols, wc %d, kind %d: %lld of %lld outputs differ",
              (long long)n_out, (long long)n_in, ncols, wc, kind, (long long)bad, (long long)(n_out * ncols));
    CHECK_MSG(e.paths[kind ? 0 : 1] > 0, "kind %d: int64 %d, int32 %d tiles", kind, e.paths[0], e.paths[1]);
    free(e.xf), free(e.xd), free(want), free(got), free(x), free(pay), free(sc);
}

/* the decoded buffer's 16-byte accesses (imma_decode's stores, imma_groups' loads: lane's chunk c of
 * one (m-tile, row half)) fall in 8 distinct bank groups in every quarter-warp: no bank conflict */
static void check_banks(void) {
    int ok = 1;
    for (int c = 0; c < 4; c++)
        for (int q = 0; q < 4; q++) {
            int seen = 0;
            for (int lane = 8 * q; lane < 8 * q + 8; lane++)
                seen |= 1 << (((lane * 64 + ((c ^ IMMA_DSWZ(lane)) << 4)) >> 4) & 7);
            ok &= seen == 0xFF;
        }
    CHECK_MSG(ok, "the decoded buffer's swizzle leaves a bank conflict");
}

int main(void) {
    check_banks();
    check_shape(37, 512, 2, 0, 0, 1); /* one block of 256 rows, ragged */
    check_shape(37, 512, 2, 1, 0, 2);
    check_shape(300, 256, 17, 1, 0, 3);  /* two blocks of 256 rows, the second column group ragged */
    check_shape(200, 512, 33, 0, 0, 4);  /* blocks of 128 rows x 64 columns */
    check_shape(70, 512, 130, 0, 0, 5);  /* 64 x 128: two row blocks, two column blocks, both ragged */
    check_shape(130, 768, 129, 1, 0, 6); /* three row blocks, one column past a block */
    check_shape(5, 256, 128, 1, 0, 7);   /* a full column block, five rows */
    for (int wc = 2; wc <= 8; wc *= 2)   /* every geometry past its columns: warps with none */
        check_shape(40, 256, 3, 1, wc, 8 + (uint64_t)wc);
    return check_report();
}
