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
#endif
