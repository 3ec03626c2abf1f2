/* st_impl.h — internals shared by the safetensors reader, writer and the HF directory code:
 * dtype facts, size arithmetic, UTF-8 validation, a growable byte buffer for emitting JSON. */
#ifndef FP4_ST_IMPL_H
#define FP4_ST_IMPL_H

#include "fp4_impl.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FP4_ST_MAX_METADATA 65536 /* __metadata__ pairs in one file */

/* Reference writer's sort rank of a dtype (its enum order); -1 when out of range. */
int fp4_st_dtype_rank(fp4_st_dtype d);

/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). NUL bytes are valid here. */
bool fp4_st_utf8_valid(const uint8_t *s, size_t n);

/* Bytes of a tensor. On failure returns the status and sets *rule to "st.rank", "st.shape",
 * "st.dim_cap", "st.nbytes_overflow" or "st.subbyte". */
fp4_status fp4_st_nbytes(fp4_st_dtype dt, int rank, const int64_t *shape, uint64_t *nbytes,
                         const char **rule);

/* Growable byte buffer; a failed allocation sticks (oom) and later appends do nothing. */
typedef struct fp4_sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} fp4_sbuf;
void fp4_sbuf_put(fp4_sbuf *b, const void *s, size_t n);
void fp4_sbuf_putc(fp4_sbuf *b, char c);
void fp4_sbuf_puts(fp4_sbuf *b, const char *s);
void fp4_sbuf_u64(fp4_sbuf *b, uint64_t v);
void fp4_sbuf_free(fp4_sbuf *b);
/* A JSON string literal of n bytes of valid UTF-8. ascii = false: serde_json's escaping (", \,
 * \b \f \n \r \t, other controls \u00xx, everything else raw); ascii = true: Python json's
 * ensure_ascii (the same, plus \uxxxx / surrogate pairs for every non-ASCII code point). */
void fp4_sbuf_json_string(fp4_sbuf *b, const char *s, size_t n, bool ascii);

/* Internal access to a writer's declarations (hfdir.c's sharded writer). */
size_t fp4_stw_n_meta(const fp4_st_writer *w);
void fp4_stw_meta_at(const fp4_st_writer *w, size_t i, const char **key, const char **value);
fp4_status fp4_stw_check_dups(const fp4_st_writer *w, const char *file, fp4_error *err);

/* The header JSON of a safetensors file parsed without a JSON tree (st_header.c): tensors in
 * header order (name, dtype, rank, shape, offset, nbytes; data left NULL), __metadata__ pairs,
 * every string NUL-terminated in one arena. On failure the fields hold what was allocated (free
 * t, meta and arena). */
typedef struct fp4_st_hdr {
    fp4_st_tensor *t;
    size_t n_t;
    const char **meta; /* key0, value0, ... */
    size_t n_meta;
    char *arena;
} fp4_st_hdr;
fp4_status fp4_st_header_parse(const uint8_t *text, size_t n, const char *file, fp4_st_hdr *out,
                               fp4_error *err);

/* Whole small file into memory (at most cap bytes, else FP4_ERR_LIMIT with rule). */
fp4_status fp4_st_read_small_file(const char *path, size_t cap, char **out, size_t *len, const char *rule,
                                  fp4_error *err);

#endif
