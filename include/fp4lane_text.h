/*
 * fp4lane_text.h — tokenizers: text in, token ids out, and back.
 *
 * Two model families, read from a Hugging Face tokenizer.json (+ tokenizer_config.json) or from
 * GGUF metadata (tokenizer.ggml.*), and written back into a GGUF:
 *   - byte-level BPE with regex pre-tokenization (GPT-2/NeoX, Llama 3/3.1, Qwen2/3, gpt-oss):
 *     tokenizer.ggml.model "gpt2";
 *   - SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma): "llama".
 * encode/decode follow Hugging Face's tokenizers (checked against @huggingface/tokenizers on a
 * corpus: tests/test_text_oracle.c). Pre-tokenizer regexes run on PCRE2 (JIT), normalization on
 * utf8proc.
 *
 * Input text may hold any bytes: invalid UTF-8 is first replaced by U+FFFD, one per maximal
 * invalid subpart (the WHATWG/Unicode rule that the reference's string conversion uses).
 * Special tokens are matched in text only with FP4_TOK_PARSE_SPECIAL; added tokens that are not
 * special are always matched (as the reference does).
 * Encode and decode may run on one handle from many threads. The handle's only mutable state is a
 * cache of encoded words that one encode call at a time uses (a concurrent call runs without it);
 * the ids never depend on it.
 */
#ifndef FP4LANE_TEXT_H
#define FP4LANE_TEXT_H

#include "fp4lane_io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FP4_TOK_MAX_VOCAB (1 << 22)       /* token ids in [0, FP4_TOK_MAX_VOCAB)                 */
#define FP4_TOK_MAX_TOKEN_BYTES 4096      /* bytes of one token string                            */
#define FP4_TOK_MAX_ADDED 65536           /* added (special or user) tokens                       */
#define FP4_TOK_MAX_FILE (128u << 20)     /* tokenizer.json bytes (the largest known are ~35 MB)   */

typedef struct fp4_tokenizer fp4_tokenizer;

typedef enum fp4_tok_kind {
    FP4_TOK_BYTE_BPE = 0, /* byte-level BPE ("gpt2")                                              */
    FP4_TOK_SPM_BPE = 1,  /* SentencePiece-style BPE on code points, byte fallback ("llama")       */
    FP4_TOK_WORDPIECE = 2, /* WordPiece with BERT's normalizer and pre-tokenizer ("bert")          */
    FP4_TOK_UNIGRAM = 3    /* Unigram (SentencePiece's scored pieces, Viterbi), tokenizer.json only  */
} fp4_tok_kind;

/* Load from path: a HF directory (tokenizer.json, optional tokenizer_config.json beside it), a
 * tokenizer.json file (tokenizer_config.json beside it is read when present) or a GGUF file
 * (recognised by its magic).
 * Refusals fill err (rule "tok.*"; file names the file, tensor names the JSON field or GGUF key). */
FP4_API fp4_status fp4_tokenizer_load(const char *path, fp4_tokenizer **out, fp4_error *err);
/* From memory: tokenizer.json bytes and optional tokenizer_config.json bytes (config may be NULL).
 * name goes into err->file. */
FP4_API fp4_status fp4_tokenizer_from_json(const char *name, const void *json, size_t json_len,
                                           const void *config, size_t config_len, fp4_tokenizer **out,
                                           fp4_error *err);
/* From an open GGUF's tokenizer.ggml.* keys. */
FP4_API fp4_status fp4_tokenizer_from_gguf(const fp4_gguf *g, const char *name, fp4_tokenizer **out,
                                           fp4_error *err);
FP4_API void fp4_tokenizer_free(fp4_tokenizer *t); /* accepts NULL */

FP4_API fp4_tok_kind fp4_tokenizer_kind(const fp4_tokenizer *t);
FP4_API int32_t fp4_tokenizer_n_vocab(const fp4_tokenizer *t);     /* max id + 1                    */
FP4_API int32_t fp4_tokenizer_bos(const fp4_tokenizer *t);         /* -1 when none                  */
FP4_API int32_t fp4_tokenizer_eos(const fp4_tokenizer *t);
FP4_API int32_t fp4_tokenizer_pad(const fp4_tokenizer *t);
/* The token's string as the vocabulary spells it (byte-level tokens in their Ġ form); *s is not
 * NUL-terminated. FP4_ERR_INVALID_ARG for an id out of range or without a token. */
FP4_API fp4_status fp4_tokenizer_token(const fp4_tokenizer *t, int32_t id, const char **s, size_t *len);
FP4_API int fp4_tokenizer_is_special(const fp4_tokenizer *t, int32_t id);  /* 0/1 */
/* id of a token string (exact vocabulary or added-token spelling), -1 when absent. */
FP4_API int32_t fp4_tokenizer_find(const fp4_tokenizer *t, const char *s, size_t len);

#define FP4_TOK_ADD_SPECIAL 1u   /* encode: add the template's BOS/EOS (post-processor)          */
#define FP4_TOK_PARSE_SPECIAL 2u /* encode: match special tokens written in the text              */
/* Encode len bytes of text. *ids is malloc'd (free() it); *n_ids may be 0 (then *ids may be NULL). */
FP4_API fp4_status fp4_tokenizer_encode(const fp4_tokenizer *t, const char *text, size_t len, unsigned flags,
                                        int32_t **ids, size_t *n_ids);
/* The same; a refusal fills err with the tokenizer's file and a rule: tok.regex-limit (a pre-tokenizer
 * regex passed its match limits, FP4_ERR_LIMIT), tok.normalize-limit (the normalizer's output passed
 * its cap), tok.nomem, tok.regex, tok.normalize. */
FP4_API fp4_status fp4_tokenizer_encode_err(const fp4_tokenizer *t, const char *text, size_t len,
                                            unsigned flags, int32_t **ids, size_t *n_ids, fp4_error *err);

#define FP4_TOK_SKIP_SPECIAL 1u   /* decode: drop special tokens                                  */
#define FP4_TOK_CLEANUP_SPACES 2u /* decode: transformers' clean_up_tokenization (" ." -> "." ...) */
/* Decode n ids to UTF-8 (*text malloc'd, NUL-terminated, *len bytes without the NUL). An id out
 * of range or without a token is FP4_ERR_INVALID_ARG, err->rule "tok.decode-id" naming it. */
FP4_API fp4_status fp4_tokenizer_decode(const fp4_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                                        char **text, size_t *len, fp4_error *err);
/* Whether tokenizer_config.json asked for clean_up_tokenization_spaces (for callers that want
 * transformers' decode exactly: pass FP4_TOK_CLEANUP_SPACES then). */
FP4_API int fp4_tokenizer_cleanup_default(const fp4_tokenizer *t);

/* Streaming detokenizer: push ids one at a time, get back the text that is complete. Output never
 * splits a UTF-8 character; bytes that cannot start or continue a valid character come out as
 * U+FFFD as in fp4_tokenizer_decode. The concatenation of every push and the final flush equals
 * fp4_tokenizer_decode of the same ids (without FP4_TOK_CLEANUP_SPACES). *out stays valid until
 * the next call on the stream. */
typedef struct fp4_detok_stream fp4_detok_stream;
FP4_API fp4_status fp4_detok_stream_create(const fp4_tokenizer *t, unsigned flags, fp4_detok_stream **out);
FP4_API fp4_status fp4_detok_stream_push(fp4_detok_stream *s, int32_t id, const char **out, size_t *len,
                                         fp4_error *err);
FP4_API fp4_status fp4_detok_stream_flush(fp4_detok_stream *s, const char **out, size_t *len);
FP4_API void fp4_detok_stream_free(fp4_detok_stream *s); /* accepts NULL */

/* Adds the tokenizer.ggml.* keys that describe t to a GGUF writer (before its header is written):
 * model, pre, tokens, token_type, merges, scores (llama), bos/eos/pad/unk ids, add_bos_token,
 * add_eos_token, add_space_prefix (llama). Reading the file back gives the same encoding.
 * FP4_ERR_UNSUPPORTED for a tokenizer GGUF cannot describe (an unknown pre-tokenizer regex). */
FP4_API fp4_status fp4_tokenizer_write_gguf(const fp4_tokenizer *t, fp4_gguf_writer *w, fp4_error *err);
/* The same, with at least n_vocab tokens (ids from fp4_tokenizer_n_vocab(t) up are "[PAD<id>]"
 * placeholders of type unused) and bos_dflt / eos_dflt (-1: none) as the BOS / EOS ids where t has
 * none, as llama.cpp's converter pads a vocabulary to the embedding's rows and falls back to
 * config.json's ids. */
FP4_API fp4_status fp4_tokenizer_write_gguf_n(const fp4_tokenizer *t, fp4_gguf_writer *w, int32_t n_vocab,
                                              int32_t bos_dflt, int32_t eos_dflt, fp4_error *err);

/* Generation helpers                                                                         */

/* Stop strings over streamed text (UTF-8). push returns the text that is safe to print now: a
 * tail that may still become a stop string is held back (at most the longest stop string - 1
 * bytes) until later text decides it; *stopped = 1 once a stop string appeared, and out then ends
 * just before it (the stop string and everything after it are never returned). flush returns the
 * held-back text at the end of generation. Pushing whole UTF-8 characters gives back whole
 * characters (stop strings must be valid UTF-8). *out stays valid until the next call. */
#define FP4_STOP_MAX 64          /* stop strings                                                */
#define FP4_STOP_MAX_BYTES 1024  /* bytes of one stop string                                    */
typedef struct fp4_stop_filter fp4_stop_filter;
FP4_API fp4_status fp4_stop_filter_create(const char *const *stops, size_t n, fp4_stop_filter **out,
                                          fp4_error *err); /* rule "stop.*": empty, not UTF-8, limits */
FP4_API fp4_status fp4_stop_filter_push(fp4_stop_filter *f, const char *text, size_t len, const char **out,
                                        size_t *out_len, int *stopped);
FP4_API fp4_status fp4_stop_filter_flush(fp4_stop_filter *f, const char **out, size_t *out_len);
FP4_API int fp4_stop_filter_stopped(const fp4_stop_filter *f);
FP4_API void fp4_stop_filter_free(fp4_stop_filter *f); /* accepts NULL */

/* Reasoning spans over streamed text (UTF-8): with hide, the text from "<think>" to "</think>"
 * (both tags included) and the whitespace right after "</think>" are not returned; without hide
 * every byte passes. The generation starts inside a span when the prompt ends with "<think>" and
 * whitespace (templates of reasoning models open it for the model). A tag cut across pushes is
 * held back (at most 7 bytes) until the next text decides it; flush returns what is held at the end.
 * *out stays valid until the next call. */
typedef struct fp4_think_filter fp4_think_filter;
FP4_API fp4_status fp4_think_filter_create(int hide, const char *prompt, size_t prompt_len,
                                           fp4_think_filter **out);
FP4_API fp4_status fp4_think_filter_push(fp4_think_filter *f, const char *text, size_t len, const char **out,
                                         size_t *out_len);
FP4_API fp4_status fp4_think_filter_flush(fp4_think_filter *f, const char **out, size_t *out_len);
FP4_API int fp4_think_filter_inside(const fp4_think_filter *f); /* 1 inside a span now */
FP4_API void fp4_think_filter_free(fp4_think_filter *f);         /* accepts NULL */

/* The EOS ids of generation_config.json beside model_path (a HF folder or a file in one):
 * eos_token_id as an integer or a list; at most max are stored, *n = 0 when the file or the key is
 * absent (and for a GGUF: its EOS is in its metadata). A malformed file: FP4_ERR_FORMAT. */
FP4_API fp4_status fp4_generation_eos(const char *model_path, int32_t *ids, int max, int *n, fp4_error *err);
/* generation_config.json's bos_token_id beside model_path, the id transformers' generate() starts an
 * empty prompt with; *bos = -1 when the file or the key is absent (a GGUF: its metadata). Not an
 * integer id: FP4_ERR_FORMAT (rule text.bos). */
FP4_API fp4_status fp4_generation_bos(const char *model_path, int32_t *bos, fp4_error *err);

/* Chat templates: the families' Jinja templates as a table (src/text/chat.c)                */

typedef struct fp4_chat_msg {
    const char *role; /* "system", "user" or "assistant"                                          */
    const char *content;
} fp4_chat_msg;

/* The chat template beside model_path: chat_template.jinja (transformers reads it first), else the
 * chat_template of tokenizer_config.json (a string, or the "default" entry of a list); a GGUF's
 * tokenizer.chat_template; *tmpl = NULL (FP4_OK) when there is none.
 * *tmpl is malloc'd. */
FP4_API fp4_status fp4_chat_template_read(const char *model_path, char **tmpl, fp4_error *err);
/* Template ids: 0 .. fp4_chat_n_templates()-1. */
FP4_API int fp4_chat_n_templates(void);
FP4_API const char *fp4_chat_template_name(int id); /* "llama3", "llama2", "mistral", "chatml", ... */
FP4_API int fp4_chat_template_by_name(const char *name); /* -1 when unknown                     */
/* The family of a Jinja chat_template: the one whose known template has exactly this text (leading
 * and trailing whitespace aside); -1 when none does (nothing is guessed from fragments). */
FP4_API int fp4_chat_template_detect(const char *jinja);
/* The same as a refusal: FP4_ERR_UNSUPPORTED, rule "chat.template-unknown" (naming file and the
 * template's SHA-256) when the text is no known template; "chat.template-missing" for NULL. */
FP4_API fp4_status fp4_chat_template_identify(const char *jinja, const char *file, int *id, fp4_error *err);
/* Renders messages as the family's template does, with bos_token = bos and eos_token = eos (NULL:
 * "") and, when add_generation_prompt, the opening of the assistant's answer. *text malloc'd,
 * NUL-terminated. Refusals (FP4_ERR_INVALID_ARG, rule "chat.*") where the template raises an
 * exception (roles that do not alternate for Llama 2 / Mistral, an unknown role). */
FP4_API fp4_status fp4_chat_render(int id, const fp4_chat_msg *msgs, size_t n, const char *bos,
                                   const char *eos, int add_generation_prompt, char **text, size_t *len,
                                   fp4_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Jinja chat templates: a checkpoint's own chat_template, rendered by a sandboxed engine       */
/* (src/text/jinja_*.c) whose output is @huggingface/jinja's byte for byte (tests/test_jinja.c; */
/* what is supported and refused: docs/TEXT.md). The template sees only the JSON it is given:   */
/* no file, environment or clock access beyond strftime_now.                                    */

#define FP4_TEMPLATE_MAX_BYTES (256u << 10)     /* template text                                  */
#define FP4_TEMPLATE_MAX_DEPTH 128u             /* syntax nesting, and macro calls / loops nested  */
#define FP4_TEMPLATE_MAX_STEPS 20000000ull      /* expression evaluations + loop iterations        */
#define FP4_TEMPLATE_MAX_OUTPUT (16ull << 20)   /* rendered bytes                                  */
#define FP4_TEMPLATE_MAX_MEMORY (256ull << 20)  /* bytes of values one render may allocate        */

typedef struct fp4_template fp4_template;

/* Per-render options; a zeroed struct (or NULL) means the defaults above and the real clock. */
typedef struct fp4_template_opts {
    int fixed_clock;     /* 1: strftime_now reads `now` (Unix seconds, as UTC) instead of the clock  */
    int64_t now;
    uint64_t max_steps;  /* 0: FP4_TEMPLATE_MAX_STEPS                                             */
    uint64_t max_output; /* 0: FP4_TEMPLATE_MAX_OUTPUT                                            */
    uint64_t max_memory; /* 0: FP4_TEMPLATE_MAX_MEMORY                                            */
} fp4_template_opts;

/* Compiles len bytes of template text (UTF-8). Refusals: rule "jinja.syntax" (the message names
 * the line and the token), "jinja.utf8", "jinja.cap.size", "jinja.cap.depth". */
FP4_API fp4_status fp4_template_compile(const char *text, size_t len, fp4_template **out, fp4_error *err);
/* Renders with `messages` = messages_json (a JSON array; NULL: undefined), add_generation_prompt,
 * and every member of extra_json (a JSON object, or NULL) as a variable (tools, bos_token,
 * eos_token, enable_thinking, ...). *out is malloc'd, NUL-terminated, *len bytes (it may hold
 * NUL bytes). Errors: "jinja.raise" where the template calls raise_exception (err->msg is its
 * message, err->tensor its line), "jinja.eval" where the reference raises too (type errors,
 * unknown filters ...: the message names the line), "jinja.unsupported" for what the engine
 * refuses, "jinja.cap.*" (FP4_ERR_LIMIT) past a cap, "jinja.context" for bad JSON. */
FP4_API fp4_status fp4_template_render(const fp4_template *t, const char *messages_json,
                                       int add_generation_prompt, const char *extra_json,
                                       const fp4_template_opts *opts, char **out, size_t *len,
                                       fp4_error *err);
FP4_API void fp4_template_free(fp4_template *t); /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif
