/* fuzz_tokenizer.c — libFuzzer target for the tokenizer loaders and the encoder/decoder.
 * Byte 0 picks the source (bit 0: tokenizer.json or GGUF metadata) and the encode flags (bits
 * 1-2); the rest is the file. When the file loads, the whole input is also encoded as text (a
 * refusal names the file and a tok.* rule), every id must be in range, decoding them must succeed
 * (or stop at the output cap), the streaming detokenizer must agree with decode, and ids out of
 * range must be refused with tok.decode-id. A refusal must fill err with the returned code, a tok.*
 * or gguf.* rule and a message.
 *   make fuzz-build && build-fuzz/fuzz_tokenizer -dict=fuzz/fuzz_tokenizer.dict fuzz/corpus/fuzz_tokenizer */
#include "fp4lane_text.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void exercise(const fp4_tokenizer *t, const uint8_t *data, size_t size, unsigned flags, int cleanup) {
    int32_t *ids = NULL;
    size_t n = 0;
    fp4_error ee;
    memset(&ee, 0, sizeof ee);
    fp4_status st = fp4_tokenizer_encode_err(t, (const char *)data, size, flags, &ids, &n, &ee);
    if (st != FP4_OK && st != FP4_ERR_LIMIT && st != FP4_ERR_NOMEM) __builtin_trap();
    if (st != FP4_OK && (ee.code != st || strncmp(ee.rule, "tok.", 4) || !ee.file[0] || !ee.msg[0]))
        __builtin_trap(); /* an encoding refusal names the file and a rule */
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= fp4_tokenizer_n_vocab(t)) __builtin_trap();
    char *text = NULL;
    size_t len = 0;
    fp4_error e;
    st = fp4_tokenizer_decode(t, ids, n, cleanup ? FP4_TOK_CLEANUP_SPACES : 0, &text, &len, &e);
    if (st != FP4_OK && st != FP4_ERR_NOMEM && st != FP4_ERR_LIMIT) __builtin_trap();
    if (st == FP4_OK && (!text || text[len] != 0)) __builtin_trap();
    if (!cleanup && st == FP4_OK) {
        fp4_detok_stream *s = NULL;
        if (fp4_detok_stream_create(t, 0, &s) == FP4_OK) {
            size_t at = 0;
            int ok = 1;
            for (size_t i = 0; i <= n && ok; i++) {
                const char *o;
                size_t ol;
                if ((i < n ? fp4_detok_stream_push(s, ids[i], &o, &ol, &e)
                           : fp4_detok_stream_flush(s, &o, &ol)) != FP4_OK)
                    ok = 0;
                else if (at + ol > len || memcmp(text + at, o, ol)) __builtin_trap();
                else at += ol;
            }
            if (ok && at != len) __builtin_trap();
            fp4_detok_stream_free(s);
        }
    }
    free(text);
    int32_t bad[2] = {-1, fp4_tokenizer_n_vocab(t)};
    for (int k = 0; k < 2; k++) {
        text = NULL;
        if (fp4_tokenizer_decode(t, &bad[k], 1, 0, &text, &len, &e) != FP4_ERR_INVALID_ARG || text ||
            strcmp(e.rule, "tok.decode-id"))
            __builtin_trap();
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned mode = data[0];
    fp4_tokenizer *t = NULL;
    fp4_error err;
    memset(&err, 0, sizeof err);
    fp4_status st;
    if (mode & 1) {
        fp4_gguf *g = NULL;
        st = fp4_gguf_open_buffer(data + 1, size - 1, &g, &err);
        if (st != FP4_OK) return 0;
        st = fp4_tokenizer_from_gguf(g, "fuzz.gguf", &t, &err);
        fp4_gguf_close(g);
    } else {
        st = fp4_tokenizer_from_json("fuzz.json", data + 1, size - 1, NULL, 0, &t, &err);
    }
    if (st == FP4_OK) {
        if (!t) __builtin_trap();
        exercise(t, data, size,
                 ((mode >> 1) & 1 ? FP4_TOK_PARSE_SPECIAL : 0) | ((mode >> 2) & 1 ? FP4_TOK_ADD_SPECIAL : 0),
                 (mode >> 3) & 1);
        fp4_tokenizer_free(t);
    } else if (t || err.code != st || strncmp(err.rule, "tok.", 4) || !err.msg[0]) {
        __builtin_trap();
    }
    return 0;
}
