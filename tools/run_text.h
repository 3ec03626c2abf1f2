/* run_text.h — text for the runtime verbs (run, chat): the default model's lookup, MODEL's
 * tokenizer and EOS ids, prompts from -p / -f / stdin, and the streamed text out (streaming
 * detokenizer, then stop strings). */
#ifndef FP4_RUN_TEXT_H
#define FP4_RUN_TEXT_H

#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include <stdio.h>

/* The model used when none is named: $FP4LANE_MODEL, <exe dir>/../models/tiny (the build tree),
 * <exe dir>/../share/fp4lane/tiny (make install: $(PREFIX)/share/fp4lane/tiny). 0 with the path
 * in buf, or -1 with an error naming the places looked at printed. */
int rt_text_default_model(const char *verb, char *buf, size_t n);

/* MODEL's tokenizer: a HF folder (tokenizer.json + tokenizer_config.json), the folder of a
 * .safetensors file, or a GGUF (tokenizer.ggml.*). Prints the typed error on failure (returns 1). */
int rt_text_tokenizer(const char *verb, const char *model, fp4_tokenizer **t);
/* 0 when MODEL is there; else the loader's own refusal (io.open, the path, the reason) is printed
 * and -1 returned: a missing model is said as such before its tokenizer or template is looked for */
int rt_text_model_present(const char *verb, const char *model);

/* The EOS set: generation_config.json's eos_token_id when present, else config.json's / the
 * GGUF's (the engine's arch), else the tokenizer's. Returns the count (<= max), -1 on error. */
int rt_text_eos(const char *verb, const char *model, const fp4_arch *ar, const fp4_tokenizer *t, int32_t *eos,
                int max);

/* The id an empty text prompt starts from, as transformers' generate() takes it: generation_config.json's
 * bos_token_id, else config.json's / the GGUF's (the engine's arch), else the tokenizer's. -1 when
 * none names one (nothing printed), -2 on error (printed). */
int32_t rt_text_bos(const char *verb, const char *model, const fp4_arch *ar, const fp4_tokenizer *t);

/* -p TEXT, -p - (stdin) or -f FILE into a malloc'd buffer (at most 16 MiB). 0 or -1 (printed). */
int rt_text_read_prompt(const char *verb, const char *p, const char *file, char **text, size_t *len);

/* Streamed text: ids in, text out to f as soon as it is complete and cannot be part of a stop
 * string. The whole printed text is kept (text, n_text) for --json. */
typedef struct rt_text_out {
    fp4_detok_stream *ds;
    fp4_stop_filter *sf;
    fp4_think_filter *tf; /* --think hide: reasoning spans kept out of the text (NULL: shown) */
    FILE *f;
    char *text;
    size_t n_text, cap;
    int stopped, failed;
} rt_text_out;
int rt_text_out_open(rt_text_out *o, const char *verb, const fp4_tokenizer *t, const char *const *stops,
                     size_t n_stops, FILE *f);
/* --think hide: <think> ... </think> spans are not printed (nor kept for --json), the generation
 * starting inside one when the prompt ends with "<think>"; hide 0: shown (the default). 0 or -1 */
int rt_text_out_think(rt_text_out *o, int hide, const char *prompt, size_t n);
/* 1 when a stop string ended the text (the token is consumed), 0 to go on, -1 on error */
int rt_text_out_push(rt_text_out *o, int32_t id);
int rt_text_out_finish(rt_text_out *o); /* flushes the held-back text; 0 or -1 */
/* ids that were printed before (a continued sequence's history) pushed through the detokenizer
 * and dropped, so that the next token decodes as it would after them; 0 or -1 */
int rt_text_out_prime(rt_text_out *o, const int32_t *ids, size_t n);
void rt_text_out_close(rt_text_out *o);

#endif
