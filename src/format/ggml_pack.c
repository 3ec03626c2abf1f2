/* ggml_pack.c — llama.cpp's NVFP4 block (type 40) ⇄ fp4lane's canonical rows (SPEC §7), and
 * row r of a view of either packing in canonical form.
 * A block holds 64 values: 4 UE4M3 scale bytes (one per 16 values), then 32 bytes where byte
 * 8s+j of sub-block s holds element 16s+j (low nibble) and 16s+j+8 (high nibble). Canonical
 * rows hold element 2j in the low nibble of byte j. Only nibbles move; nothing is computed. */
#include "fp4_impl.h"
#include <string.h>

void fp4_ggml_pack_row(const uint8_t *payload, const uint8_t *scales, int64_t n_in, uint8_t *blocks) {
    for (int64_t b = 0; b < n_in / 64; b++) {
        uint8_t *blk = blocks + b * 36;
        for (int s = 0; s < 4; s++) {
            const int64_t g = b * 4 + s;
            const uint8_t *src = payload + g * 8; /* 16 values, 2 per byte */
            blk[s] = scales[g];
            for (int j = 0; j < 8; j++) {
                uint8_t lo = (uint8_t)((src[j / 2] >> (4 * (j & 1))) & 15);           /* element j   */
                uint8_t hi = (uint8_t)((src[(j + 8) / 2] >> (4 * (j & 1))) & 15);     /* element j+8 */
                blk[4 + s * 8 + j] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
}

/* The eight bytes of a word, each < 16, paired: byte j of the result's low half is
 * b[2j] | b[2j+1] << 4 (j < 4). w | w >> 4 puts b[k+1] in the high nibble of byte k; the even
 * bytes are then gathered by two masked shifts. */
static uint32_t pair_nibbles(uint64_t w) {
    uint64_t t = (w | (w >> 4)) & 0x00FF00FF00FF00FFull;
    t = (t | (t >> 8)) & 0x0000FFFF0000FFFFull;
    return (uint32_t)(t | (t >> 16));
}

void fp4_ggml_unpack_row(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales) {
    /* a sub-block's 8 bytes as one little-endian word (fp4_rd_le64: the same on any host; one load
     * on x86): the low nibbles are elements 0..7, the high ones 8..15 */
    for (int64_t b = 0; b < n_in / 64; b++) {
        const uint8_t *blk = blocks + b * 36;
        memcpy(scales + b * 4, blk, 4);
        for (int s = 0; s < 4; s++) {
            const uint64_t x = fp4_rd_le64(blk + 4 + s * 8);
            const uint64_t lo = x & 0x0F0F0F0F0F0F0F0Full, hi = (x >> 4) & 0x0F0F0F0F0F0F0F0Full;
            const uint64_t out = (uint64_t)pair_nibbles(lo) | (uint64_t)pair_nibbles(hi) << 32;
            fp4_wr_le64(payload + (b * 4 + s) * 8, out);
        }
    }
}

void fp4_nvfp4_view_row(const fp4_nvfp4_view *v, int64_t r, uint8_t *payload, uint8_t *scales) {
    if (v->packing == FP4_PACK_GGML64) {
        fp4_ggml_unpack_row(v->payload + r * (v->n_in / 64) * 36, v->n_in, payload, scales);
        return;
    }
    memcpy(payload, v->payload + r * (v->n_in / 2), (size_t)(v->n_in / 2));
    memcpy(scales, v->scales + r * (v->n_in / 16), (size_t)(v->n_in / 16));
}
