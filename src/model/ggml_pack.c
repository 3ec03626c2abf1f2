/* ggml_pack.c — llama.cpp's NVFP4 block (type 40) ⇄ fp4lane's canonical rows (SPEC §7).
 * A block holds 64 values: 4 UE4M3 scale bytes (one per 16 values), then 32 bytes where byte
 * 8s+j of sub-block s holds element 16s+j (low nibble) and 16s+j+8 (high nibble). Canonical
 * rows hold element 2j in the low nibble of byte j. Only nibbles move; nothing is computed. */
#include "model_impl.h"

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

void fp4_ggml_unpack_row(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales) {
    for (int64_t b = 0; b < n_in / 64; b++) {
        const uint8_t *blk = blocks + b * 36;
        for (int s = 0; s < 4; s++) {
            const int64_t g = b * 4 + s;
            uint8_t *dst = payload + g * 8;
            uint8_t v[16];
            scales[g] = blk[s];
            for (int j = 0; j < 8; j++) {
                v[j] = blk[4 + s * 8 + j] & 15;
                v[j + 8] = blk[4 + s * 8 + j] >> 4;
            }
            for (int j = 0; j < 8; j++) dst[j] = (uint8_t)(v[2 * j] | (v[2 * j + 1] << 4));
        }
    }
}
