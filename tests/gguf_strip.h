/* gguf_strip.h — a copy of a GGUF without its fp4lane.* keys: what remains of a `fp4lane convert
 * --layout gguf-ggml` file is what llama.cpp's own converter writes (llama.cpp's names and keys), the
 * input llama.cpp's quantizer is given in test_llama_quant and dev/bench_llama_cpu. Test and dev
 * support code (links libfp4lane). */
#ifndef FP4_GGUF_STRIP_H
#define FP4_GGUF_STRIP_H
#include <stddef.h>

/* Copies in to out (keys of type u32, f32, bool, string and arrays — a tokenizer's tokens, types and
 * merges; any other type is refused) without the fp4lane.* keys and general.alignment. 0 on success
 * with the number of keys dropped in *dropped; else -1 with a message in err. */
int gguf_strip_fp4lane(const char *in, const char *out, long *dropped, char *err, size_t err_len);
#endif
