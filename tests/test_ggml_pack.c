/* test_ggml_pack.c — llama.cpp's NVFP4 block (type 40) ⇄ canonical rows (src/format/ggml_pack.c).
 * The unpack at load is a word-at-a-time nibble shuffle; here it is held to the element-by-element
 * definition of the layout (byte 8s+j of sub-block s: element 16s+j in the low nibble, 16s+j+8 in
 * the high one; canonical byte j: element 2j low, 2j+1 high) on random and patterned bytes and
 * several row lengths, and pack ∘ unpack is the identity both ways. */
#include "check.h"
#include "model/model_impl.h"
#include <stdlib.h>
#include <string.h>

/* the layout's definition, one element at a time */
static void ref_unpack(const uint8_t *blocks, int64_t n_in, uint8_t *payload, uint8_t *scales) {
    memset(payload, 0, (size_t)(n_in / 2));
    for (int64_t b = 0; b < n_in / 64; b++) {
        const uint8_t *blk = blocks + b * 36;
        for (int s = 0; s < 4; s++) {
            scales[b * 4 + s] = blk[s];
            for (int j = 0; j < 16; j++) {
                const uint8_t byte = blk[4 + s * 8 + (j & 7)];
                const uint8_t code = j < 8 ? (uint8_t)(byte & 15) : (uint8_t)(byte >> 4);
                const int64_t e = b * 64 + s * 16 + j; /* element index in the row */
                payload[e / 2] |= (uint8_t)(e & 1 ? code << 4 : code);
            }
        }
    }
}

static void one_case(test_rng *r, int64_t n_in, int pattern) {
    const size_t nb = (size_t)(n_in / 64 * 36), np = (size_t)(n_in / 2), ns = (size_t)(n_in / 16);
    uint8_t *blk = malloc(nb), *blk2 = malloc(nb), *p = malloc(np + 1), *s = malloc(ns + 1), *rp = malloc(np),
            *rs = malloc(ns);
    for (size_t i = 0; i < nb; i++)
        blk[i] = pattern == 0   ? (uint8_t)rng_u64(r)
                 : pattern == 1 ? (uint8_t)i
                                : (uint8_t)(i % 3 ? 0xFF : 0x0F);
    p[np] = s[ns] = 0xA5; /* no write past the row */
    fp4_ggml_unpack_row(blk, n_in, p, s);
    ref_unpack(blk, n_in, rp, rs);
    CHECK_MSG(!memcmp(p, rp, np), "payload of a %lld-value row (pattern %d) differs from the definition",
              (long long)n_in, pattern);
    CHECK_MSG(!memcmp(s, rs, ns), "scales of a %lld-value row (pattern %d) differ", (long long)n_in, pattern);
    CHECK(p[np] == 0xA5 && s[ns] == 0xA5);
    fp4_ggml_pack_row(p, s, n_in, blk2);
    CHECK_MSG(!memcmp(blk, blk2, nb), "pack(unpack(row)) != row (%lld values, pattern %d)", (long long)n_in,
              pattern);
    free(blk), free(blk2), free(p), free(s), free(rp), free(rs);
}

int main(void) {
    test_rng r = {20261202};
    static const int64_t lens[] = {64, 128, 192, 4096, 14336, 64 * 37};
    for (int pattern = 0; pattern < 3; pattern++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
            for (int rep = 0; rep < (pattern ? 1 : 20); rep++)
                one_case(&r, lens[i], pattern);
    return check_report();
}
