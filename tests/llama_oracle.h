/* llama_oracle.h — llama.cpp's own libllama (npm @node-llama-cpp/linux-x64, pinned in the
 * Makefile; llama.cpp release v0.5.0 of node-llama-cpp 3.22.1) opened with dlopen, to run a GGUF
 * the way llama.cpp runs it. Self-contained test support code (libc and libdl only).
 *
 * The few llama.h entry points used are declared here by hand from that release's llama.h:
 * llama_model_params and llama_context_params are passed as opaque over-sized byte blocks (the
 * System V x86-64 ABI returns and passes a struct of more than 16 bytes through memory, so only
 * the prefix the library knows is read or written); the context fields set (n_ctx, n_batch,
 * n_ubatch, n_outputs_max_per_seq, n_threads, n_threads_batch) are at fixed offsets, and their
 * defaults are checked before use so a layout change is caught, not run.
 *
 * Directory: $FP4_GGML_DIR, else third_party/npm/node_modules/@node-llama-cpp/linux-x64/bins/
 * linux-x64. ggml's CPU backends are loaded with ggml_backend_load_all_from_path (the best
 * libggml-cpu-<variant>.so for this CPU). llama.cpp's log goes to a buffer, not to stderr. */
#ifndef FP4_LLAMA_ORACLE_H
#define FP4_LLAMA_ORACLE_H
#include <stddef.h>
#include <stdint.h>

typedef struct llama_oracle llama_oracle;

/* 0 on success; else -1 with a message in err. */
int llama_oracle_open(llama_oracle **out, char *err, size_t err_len);
void llama_oracle_close(llama_oracle *o);

/* Loads gguf, decodes ids[0..n) as one sequence from position 0 in one batch with logits for
 * every position, and returns them: *logits = malloc'd n × *n_vocab floats (row per position).
 * 0 on success; else -1 with llama.cpp's last log lines in err. */
int llama_oracle_logits(llama_oracle *o, const char *gguf, const int32_t *ids, int n, int n_threads,
                        float **logits, int *n_vocab, char *err, size_t err_len);

/* Loads gguf and tokenizes len bytes of text with its vocabulary (llama_tokenize; add_special:
 * the vocabulary's BOS/EOS; special tokens in the text are not parsed): *ids = malloc'd *n ids.
 * 0 on success; else -1 with a message in err. */
int llama_oracle_tokenize(llama_oracle *o, const char *gguf, const char *text, int len, int add_special,
                          int32_t **ids, int *n, char *err, size_t err_len);

/* llama.cpp's own quantizer (llama_model_quantize, the code behind llama-quantize): reads the
 * F32/F16/BF16 GGUF in and writes out with llama.cpp's per-tensor type choice for ftype
 * (llama.h's enum llama_ftype: LLAMA_ORACLE_Q4_K_M, LLAMA_ORACLE_Q6_K, ...), n_threads workers.
 * 0 on success; else -1 with llama.cpp's last log lines in err. */
enum { LLAMA_ORACLE_Q8_0 = 7, LLAMA_ORACLE_Q4_K_S = 14, LLAMA_ORACLE_Q4_K_M = 15, LLAMA_ORACLE_Q6_K = 18 };
int llama_oracle_quantize(llama_oracle *o, const char *in, const char *out, int ftype, int n_threads,
                          char *err, size_t err_len);

/* A model and a context kept open to decode one token at a time (the benchmark's way in): open
 * loads gguf with a context of n_ctx positions and n_threads; decode runs token at position pos of
 * sequence 0 and points *logits at llama.cpp's vocab-sized row (valid until the next call); clear
 * empties the KV cache. 0 on success; else -1 with a message in err. */
typedef struct llama_oracle_session llama_oracle_session;
int llama_oracle_session_open(llama_oracle *o, const char *gguf, int n_ctx, int n_threads,
                              llama_oracle_session **out, int *n_vocab, char *err, size_t err_len);
int llama_oracle_session_decode(llama_oracle_session *s, int32_t token, int32_t pos, const float **logits,
                                char *err, size_t err_len);
/* prefill: ids[0..n) at positions 0..n-1 of sequence 0 in one llama_decode (n <= the session's
 * n_ctx, its batch size), logits of the last position only */
int llama_oracle_session_prefill(llama_oracle_session *s, const int32_t *ids, int n, const float **logits,
                                 char *err, size_t err_len);
void llama_oracle_session_clear(llama_oracle_session *s);
void llama_oracle_session_close(llama_oracle_session *s);
#endif
