/* fuzz_charsmap.c — libFuzzer target for the Precompiled normalizer's blob (SentencePiece's
 * precompiled_charsmap, tok_precompiled.c) and the Unigram model behind it. Bytes 0-1: the length of
 * the text (little-endian, cut to what is there); then the text; the rest is the raw blob, which the
 * harness writes as base64 into a tokenizer.json with a small Unigram vocabulary (bit 0 of byte 0:
 * byte_fallback). A blob that loads must normalize and encode any text without a crash, every id in
 * range and decodable; a refusal must fill err with the code, a tok.* rule and a message.
 *   make fuzz-build && build-fuzz/fuzz_charsmap fuzz/corpus/fuzz_charsmap */
#include "fp4lane_text.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t b64(const uint8_t *s, size_t n, char *o) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w =
            (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        o[k++] = a[w >> 18 & 63];
        o[k++] = a[w >> 12 & 63];
        o[k++] = i + 1 < n ? a[w >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? a[w & 63] : '=';
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t tn = (size_t)data[0] | (size_t)data[1] << 8;
    if (tn > size - 2) tn = size - 2;
    const uint8_t *text = data + 2, *blob = text + tn;
    size_t bn = size - 2 - tn;
    static const char head[] = "{\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"special\":true}],"
                               "\"normalizer\":{\"type\":\"Sequence\","
                               "\"normalizers\":[{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"";
    static const char tail[] =
        "\"},{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},\"content\":\" \"}]},"
        "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\"}"
        ","
        "\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\"},"
        "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":%s,\"vocab\":[[\"<unk>\",0],[\"<s>\","
        "0],"
        "[\"\\u2581\",-2],[\"a\",-3],[\"\\u2581a\",-1.5],[\"b\",-3],[\"ab\",-2.5],[\"<0x41>\",-9],[\"<0xC3>"
        "\",-9]]}}";
    size_t cap = sizeof head + bn / 3 * 4 + 8 + sizeof tail + 8;
    char *j = malloc(cap);
    if (!j) return 0;
    size_t k = sizeof head - 1;
    memcpy(j, head, k);
    k += b64(blob, bn, j + k);
    k += (size_t)snprintf(j + k, cap - k, tail, (data[0] & 1) ? "true" : "false");
    fp4_tokenizer *t = NULL;
    fp4_error err;
    memset(&err, 0, sizeof err);
    fp4_status st = fp4_tokenizer_from_json("fuzz.json", j, k, NULL, 0, &t, &err);
    free(j);
    if (st != FP4_OK) {
        if (t || err.code != st || strncmp(err.rule, "tok.", 4) || !err.msg[0]) __builtin_trap();
        return 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    st = fp4_tokenizer_encode_err(t, (const char *)text, tn, FP4_TOK_PARSE_SPECIAL, &ids, &n, &err);
    if (st != FP4_OK && st != FP4_ERR_LIMIT && st != FP4_ERR_NOMEM) __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= fp4_tokenizer_n_vocab(t)) __builtin_trap();
    char *out = NULL;
    size_t len = 0;
    st = fp4_tokenizer_decode(t, ids, n, 0, &out, &len, &err);
    if (st != FP4_OK && st != FP4_ERR_LIMIT && st != FP4_ERR_NOMEM) __builtin_trap();
    free(out);
    free(ids);
    fp4_tokenizer_free(t);
    return 0;
}
