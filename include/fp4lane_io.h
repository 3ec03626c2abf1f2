/*
 * fp4lane_io.h — fp4lane's container I/O: GGUF and safetensors files (readers and writers) and
 * Hugging Face checkpoint directories. The numbers, the fail-closed loader and the layouts are in
 * fp4lane.h (included here); every call follows its conventions (status returns, fp4_error with
 * file, tensor and rule, one _close/_free per _open/_create accepting NULL).
 */
#ifndef FP4LANE_IO_H
#define FP4LANE_IO_H

#include "fp4lane.h"

#ifdef __cplusplus
extern "C" {
#endif
/* GGUF v3 (v2 accepted: same layout), little-endian only. The reader maps the file read-only
 * and validates the whole container before it returns a handle (grammar and rules: the comment
 * at the top of src/io/gguf.c; every refusal names a stable err->rule "gguf.*"). Views returned
 * by the accessors point into the mapping or into the handle and live until fp4_gguf_close. */
typedef enum fp4_gguf_type {          /* metadata value types (GGUF ids, pinned)               */
    FP4_GGUF_TYPE_NONE = -1,          /* returned for an index out of range                    */
    FP4_GGUF_UINT8 = 0, FP4_GGUF_INT8 = 1, FP4_GGUF_UINT16 = 2, FP4_GGUF_INT16 = 3,
    FP4_GGUF_UINT32 = 4, FP4_GGUF_INT32 = 5, FP4_GGUF_FLOAT32 = 6, FP4_GGUF_BOOL = 7,
    FP4_GGUF_STRING = 8, FP4_GGUF_ARRAY = 9, FP4_GGUF_UINT64 = 10, FP4_GGUF_INT64 = 11,
    FP4_GGUF_FLOAT64 = 12,
    FP4_GGUF_TYPE_COUNT_ = 13
} fp4_gguf_type;

#define FP4_GGUF_DEFAULT_ALIGNMENT 32u
#define FP4_GGUF_MIN_ALIGNMENT 8u             /* general.alignment: a power of two in [8, 1 MiB] */
#define FP4_GGUF_MAX_ALIGNMENT (1u << 20)

/* "uint8", ..., "float64"; "?" for an unknown id. */
FP4_API const char *fp4_gguf_type_name(fp4_gguf_type t);
/* Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown ids. */
FP4_API size_t fp4_gguf_type_size(fp4_gguf_type t);

typedef struct fp4_gguf fp4_gguf;

typedef struct fp4_gguf_tensor {
    const char *name;             /* NUL-terminated copy owned by the handle                  */
    fp4_type type;                /* an id fp4_type_get() knows                               */
    int32_t n_dims;               /* 1..4                                                     */
    int64_t ne[FP4_MAX_DIMS];     /* ne[0] innermost (row length); dims past n_dims are 1     */
    int64_t n_elements;           /* product of ne, > 0                                       */
    uint64_t offset;              /* absolute byte offset of the data in the file             */
    uint64_t size;                /* data bytes, without padding                              */
    const uint8_t *data;          /* the data inside the mapping (size bytes)                 */
} fp4_gguf_tensor;

/* Open and validate. path goes into err->file. On failure *out is NULL and err (may be NULL)
 * holds code, rule, tensor and message. fp4_gguf_open_buffer does not copy: data must outlive
 * the handle. */
FP4_API fp4_status fp4_gguf_open(const char *path, fp4_gguf **out, fp4_error *err);
FP4_API fp4_status fp4_gguf_open_buffer(const void *data, size_t size, fp4_gguf **out, fp4_error *err);
FP4_API void fp4_gguf_close(fp4_gguf *g);    /* accepts NULL */

FP4_API uint32_t fp4_gguf_version(const fp4_gguf *g);
FP4_API uint32_t fp4_gguf_alignment(const fp4_gguf *g);
FP4_API uint64_t fp4_gguf_file_size(const fp4_gguf *g);
FP4_API uint64_t fp4_gguf_data_offset(const fp4_gguf *g);   /* aligned start of the data section */

/* Metadata. i is a key index in [0, n_kv). Getters: FP4_ERR_NOT_FOUND for i < 0 (so that
 * get(g, fp4_gguf_key_index(g, k), ...) reports a missing key), FP4_ERR_INVALID_ARG for
 * i >= n_kv or a NULL pointer, FP4_ERR_DTYPE when the stored type is not the one asked for. */
FP4_API int64_t fp4_gguf_n_kv(const fp4_gguf *g);
FP4_API const char *fp4_gguf_key(const fp4_gguf *g, int64_t i);          /* NULL out of range */
FP4_API fp4_gguf_type fp4_gguf_kv_type(const fp4_gguf *g, int64_t i);
FP4_API int64_t fp4_gguf_key_index(const fp4_gguf *g, const char *key);  /* -1 when absent */
FP4_API fp4_status fp4_gguf_get_u8(const fp4_gguf *g, int64_t i, uint8_t *v);
FP4_API fp4_status fp4_gguf_get_i8(const fp4_gguf *g, int64_t i, int8_t *v);
FP4_API fp4_status fp4_gguf_get_u16(const fp4_gguf *g, int64_t i, uint16_t *v);
FP4_API fp4_status fp4_gguf_get_i16(const fp4_gguf *g, int64_t i, int16_t *v);
FP4_API fp4_status fp4_gguf_get_u32(const fp4_gguf *g, int64_t i, uint32_t *v);
FP4_API fp4_status fp4_gguf_get_i32(const fp4_gguf *g, int64_t i, int32_t *v);
FP4_API fp4_status fp4_gguf_get_u64(const fp4_gguf *g, int64_t i, uint64_t *v);
FP4_API fp4_status fp4_gguf_get_i64(const fp4_gguf *g, int64_t i, int64_t *v);
FP4_API fp4_status fp4_gguf_get_f32(const fp4_gguf *g, int64_t i, float *v);
FP4_API fp4_status fp4_gguf_get_f64(const fp4_gguf *g, int64_t i, double *v);
FP4_API fp4_status fp4_gguf_get_bool(const fp4_gguf *g, int64_t i, int *v);   /* 0 or 1 */
/* s points into the file and is NOT NUL-terminated; *len bytes (may contain any byte). */
FP4_API fp4_status fp4_gguf_get_str(const fp4_gguf *g, int64_t i, const char **s, uint64_t *len);
/* Arrays. fp4_gguf_arr_type: the element type (FP4_GGUF_TYPE_NONE if i is not an array). */
FP4_API fp4_gguf_type fp4_gguf_arr_type(const fp4_gguf *g, int64_t i);
/* Fixed-size elements: elem must equal the stored element type (FP4_ERR_DTYPE otherwise, also
 * for string arrays); *data points at count little-endian elements in the file (unaligned). */
FP4_API fp4_status fp4_gguf_get_arr(const fp4_gguf *g, int64_t i, fp4_gguf_type elem, const void **data,
                                    int64_t *count);
/* String arrays: count, then element j in [0, count) (not NUL-terminated, like fp4_gguf_get_str). */
FP4_API fp4_status fp4_gguf_get_arr_str_count(const fp4_gguf *g, int64_t i, int64_t *count);
FP4_API fp4_status fp4_gguf_get_arr_str(const fp4_gguf *g, int64_t i, int64_t j, const char **s,
                                        uint64_t *len);

/* Tensors, in file order (which is data order). */
FP4_API int64_t fp4_gguf_n_tensors(const fp4_gguf *g);
FP4_API const fp4_gguf_tensor *fp4_gguf_tensor_at(const fp4_gguf *g, int64_t i);   /* NULL out of range */
FP4_API const fp4_gguf_tensor *fp4_gguf_find(const fp4_gguf *g, const char *name); /* NULL if absent */
FP4_API int64_t fp4_gguf_tensor_index(const fp4_gguf *g, const char *name);        /* -1 when absent */

/* Streaming writer: memory O(metadata), never O(model). Order of calls:
 *   create; add KVs / set_alignment (before any tensor); add_tensor ...; write_header(path);
 *   write_tensor_data for tensor 0, 1, ... in order (each in one or more chunks; padding is
 *   written when a tensor is complete); finish. The bytes go to a temporary name beside path
 *   (".fp4lane-tmp-*"); finish fsyncs it and renames it over path, so path holds its old bytes
 *   until then. free accepts NULL; freeing an unfinished writer (or a failed finish) removes the
 *   temporary file and leaves path untouched. write_header refuses a path that is a symbolic
 *   link or not a regular file (out.symlink, out.not-regular).
 * Keys and tensor names follow the reader's rules; a duplicate is FP4_ERR_DUPLICATE. Numeric
 * array data is given in host order and written little-endian. A refused call changes nothing,
 * except an I/O failure, which ends the writer and removes its file.
 * Errors: every fallible call takes the caller's fp4_error *err (may be NULL), like the readers
 * and the safetensors writers: rule is the reader's gguf.* id for the content, out.* for the
 * file (outfile.h), or writer.state / .order / .size / .incomplete / .arg / .nomem. */
typedef struct fp4_gguf_writer fp4_gguf_writer;
FP4_API fp4_status fp4_gguf_writer_create(fp4_gguf_writer **out, fp4_error *err);
FP4_API void fp4_gguf_writer_free(fp4_gguf_writer *w);
/* Writes general.alignment (UINT32); a power of two in [FP4_GGUF_MIN_ALIGNMENT, _MAX_]. Without
 * it the alignment is FP4_GGUF_DEFAULT_ALIGNMENT and no key is written. */
FP4_API fp4_status fp4_gguf_writer_set_alignment(fp4_gguf_writer *w, uint32_t alignment, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_u8(fp4_gguf_writer *w, const char *key, uint8_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_i8(fp4_gguf_writer *w, const char *key, int8_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_u16(fp4_gguf_writer *w, const char *key, uint16_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_i16(fp4_gguf_writer *w, const char *key, int16_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_u32(fp4_gguf_writer *w, const char *key, uint32_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_i32(fp4_gguf_writer *w, const char *key, int32_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_u64(fp4_gguf_writer *w, const char *key, uint64_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_i64(fp4_gguf_writer *w, const char *key, int64_t v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_f32(fp4_gguf_writer *w, const char *key, float v, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_add_f64(fp4_gguf_writer *w, const char *key, double v, fp4_error *err);
/* v is 0 or 1 */
FP4_API fp4_status fp4_gguf_writer_add_bool(fp4_gguf_writer *w, const char *key, int v, fp4_error *err);
/* len bytes of s (any bytes; pass strlen(s) for a C string). */
FP4_API fp4_status fp4_gguf_writer_add_str(fp4_gguf_writer *w, const char *key, const char *s, uint64_t len,
                                           fp4_error *err);
/* n elements of a fixed-size type (not STRING/ARRAY), host order, e.g. const float * for FLOAT32,
 * const uint8_t * holding 0/1 for BOOL. */
FP4_API fp4_status fp4_gguf_writer_add_arr(fp4_gguf_writer *w, const char *key, fp4_gguf_type elem,
                                           const void *data, uint64_t n, fp4_error *err);
/* n strings; lens may be NULL (then each s[j] is NUL-terminated). */
FP4_API fp4_status fp4_gguf_writer_add_arr_str(fp4_gguf_writer *w, const char *key, const char *const *s,
                                               const uint64_t *lens, uint64_t n, fp4_error *err);
/* Appends a tensor info; computes its size and offset. ne[0] must be a multiple of the type's
 * block size; every ne[j] > 0. */
FP4_API fp4_status fp4_gguf_writer_add_tensor(fp4_gguf_writer *w, const char *name, fp4_type type,
                                              int32_t n_dims, const int64_t *ne, fp4_error *err);
FP4_API int64_t fp4_gguf_writer_n_tensors(const fp4_gguf_writer *w);
FP4_API uint64_t fp4_gguf_writer_tensor_size(const fp4_gguf_writer *w, int64_t i);   /* 0 out of range */
FP4_API fp4_status fp4_gguf_writer_write_header(fp4_gguf_writer *w, const char *path, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_write_tensor_data(fp4_gguf_writer *w, int64_t i, const void *data,
                                                     size_t size, fp4_error *err);
FP4_API fp4_status fp4_gguf_writer_finish(fp4_gguf_writer *w, fp4_error *err);
/* end GGUF */
/* safetensors */
/* Reader, streaming writer, and Hugging Face checkpoint directories (single file or shards +
 * model.safetensors.index.json). Every file is hostile: each refusal gives an FP4_ERR_* code and
 * a stable err->rule ("st.*", "index.*", "hfdir.*"), naming the tensor where there is one. */

/* Element types of safetensors (values pinned: append only). Names are the file's strings. */
typedef enum fp4_st_dtype {
    FP4_ST_BOOL = 0, FP4_ST_U8 = 1, FP4_ST_I8 = 2, FP4_ST_U16 = 3, FP4_ST_I16 = 4,
    FP4_ST_U32 = 5, FP4_ST_I32 = 6, FP4_ST_U64 = 7, FP4_ST_I64 = 8, FP4_ST_F16 = 9,
    FP4_ST_BF16 = 10, FP4_ST_F32 = 11, FP4_ST_F64 = 12, FP4_ST_F8_E4M3 = 13, FP4_ST_F8_E5M2 = 14,
    FP4_ST_F8_E8M0 = 15, FP4_ST_F8_E4M3FNUZ = 16, FP4_ST_F8_E5M2FNUZ = 17, FP4_ST_C64 = 18,
    FP4_ST_F4 = 19, FP4_ST_F6_E2M3 = 20, FP4_ST_F6_E3M2 = 21, /* sub-byte: bits % 8 must be 0 */
    FP4_ST_DTYPE_COUNT_ = 22
} fp4_st_dtype;

FP4_API const char *fp4_st_dtype_name(fp4_st_dtype d);   /* "F16", ...; NULL when out of range   */
FP4_API int fp4_st_dtype_bits(fp4_st_dtype d);           /* bits per element; 0 when out of range */
/* Exact, case-sensitive match; FP4_ERR_DTYPE for an unknown string. */
FP4_API fp4_status fp4_st_dtype_from_name(const char *name, fp4_st_dtype *out);

#define FP4_ST_MAX_DIM ((int64_t)1 << 48)  /* largest accepted dimension (the format's schema) */

/* One tensor of an open file. data points into the mapping/buffer and is NOT aligned for its
 * type (the header length is arbitrary): read it with memcpy, never cast it to float*. */
typedef struct fp4_st_tensor {
    const char *name;          /* NUL-terminated, valid UTF-8, no NUL inside, 1..FP4_MAX_NAME   */
    fp4_st_dtype dtype;
    int rank;                  /* 0..FP4_MAX_DIMS; rank 0 is a scalar (one element)           */
    int64_t shape[FP4_MAX_DIMS];
    uint64_t offset;           /* data_offsets[0], relative to the data region                 */
    size_t nbytes;             /* data_offsets[1] - data_offsets[0]                            */
    const uint8_t *data;
} fp4_st_tensor;

typedef struct fp4_st fp4_st;

/* Opens and validates a whole file (mmap, read-only). The file must not change while open. */
FP4_API fp4_status fp4_st_open(const char *path, fp4_st **out, fp4_error *err);
/* Same over caller memory, not copied: data must outlive the handle. */
FP4_API fp4_status fp4_st_open_buffer(const void *data, size_t size, fp4_st **out, fp4_error *err);
FP4_API void fp4_st_close(fp4_st *st);
/* Tensors in header (JSON) order. NULL when i is out of range / the name is absent. */
FP4_API int64_t fp4_st_n_tensors(const fp4_st *st);
FP4_API const fp4_st_tensor *fp4_st_tensor_at(const fp4_st *st, int64_t i);
FP4_API const fp4_st_tensor *fp4_st_find(const fp4_st *st, const char *name);
/* __metadata__ string pairs in header order; values may not contain NUL. */
FP4_API int64_t fp4_st_n_metadata(const fp4_st *st);
FP4_API fp4_status fp4_st_metadata_at(const fp4_st *st, int64_t i, const char **key, const char **value);
FP4_API const char *fp4_st_metadata_get(const fp4_st *st, const char *key);   /* NULL if absent */
FP4_API uint64_t fp4_st_header_len(const fp4_st *st);                         /* N, padding included */

/* Streaming writer: memory O(header). Declare metadata and tensors, then fp4_st_writer_begin
 * writes the header (compact JSON: __metadata__ first when any pair was added, then the tensors
 * in declaration order, space-padded to 8 bytes: the byte layout of the reference writer), then
 * fp4_st_writer_write takes every tensor's bytes in declaration order, in chunks of any size.
 * The file appears under its name only at fp4_st_writer_finish (written under a temporary name
 * ".fp4lane-tmp-*" beside it, fsynced, renamed over it); fp4_st_writer_free of an unfinished
 * writer removes the temporary file and leaves PATH as it was. */
typedef struct fp4_st_writer fp4_st_writer;
FP4_API fp4_status fp4_st_writer_create(fp4_st_writer **out, fp4_error *err);
FP4_API fp4_status fp4_st_writer_add_metadata(fp4_st_writer *w, const char *key, const char *value,
                                              fp4_error *err);
FP4_API fp4_status fp4_st_writer_add_tensor(fp4_st_writer *w, const char *name, fp4_st_dtype dtype, int rank,
                                            const int64_t *shape, fp4_error *err);
/* Reorders the declared tensors as the reference writer does (larger dtype first, then name). */
FP4_API fp4_status fp4_st_writer_sort_canonical(fp4_st_writer *w);
FP4_API size_t fp4_st_writer_n_tensors(const fp4_st_writer *w);
FP4_API const char *fp4_st_writer_tensor_name(const fp4_st_writer *w, size_t i);  /* declared order */
FP4_API uint64_t fp4_st_writer_data_size(const fp4_st_writer *w);                 /* sum of nbytes  */
FP4_API fp4_status fp4_st_writer_begin(fp4_st_writer *w, const char *path, fp4_error *err);
FP4_API fp4_status fp4_st_writer_write(fp4_st_writer *w, const void *data, size_t n, fp4_error *err);
FP4_API fp4_status fp4_st_writer_finish(fp4_st_writer *w, fp4_error *err);
FP4_API void fp4_st_writer_free(fp4_st_writer *w);

/* A Hugging Face directory: model.safetensors, or the shards of model.safetensors.index.json
 * (both present is refused), plus config.json and hf_quant_config.json when present. */
typedef struct fp4_hfdir fp4_hfdir;
typedef enum fp4_hf_json { FP4_HF_CONFIG = 0, FP4_HF_QUANT_CONFIG = 1 } fp4_hf_json;
FP4_API fp4_status fp4_hfdir_open(const char *dir, fp4_hfdir **out, fp4_error *err);
FP4_API void fp4_hfdir_close(fp4_hfdir *d);
FP4_API int64_t fp4_hfdir_n_tensors(const fp4_hfdir *d);                          /* shard order */
FP4_API const fp4_st_tensor *fp4_hfdir_tensor_at(const fp4_hfdir *d, int64_t i);   /* NULL out of range */
FP4_API const fp4_st_tensor *fp4_hfdir_find(const fp4_hfdir *d, const char *name); /* NULL if absent */
FP4_API int64_t fp4_hfdir_n_shards(const fp4_hfdir *d);
FP4_API const fp4_st *fp4_hfdir_shard(const fp4_hfdir *d, int64_t i);             /* NULL out of range */
FP4_API int fp4_hfdir_has_json(const fp4_hfdir *d, fp4_hf_json which);
/* Values by dotted path ("quantization_config.quant_algo"; an all-digit segment indexes an
 * array). FP4_ERR_NOT_FOUND when absent (or no such file), FP4_ERR_DTYPE for the wrong JSON
 * type, FP4_ERR_LIMIT when buf is too small (*needed, may be NULL, gets the size with the NUL). */
FP4_API fp4_status fp4_hfdir_json_string(const fp4_hfdir *d, fp4_hf_json which, const char *path, char *buf,
                                         size_t n, size_t *needed);
FP4_API fp4_status fp4_hfdir_json_int(const fp4_hfdir *d, fp4_hf_json which, const char *path, int64_t *out);
/* Any value serialized as compact JSON ("" path: the whole file). */
FP4_API fp4_status fp4_hfdir_json_dump(const fp4_hfdir *d, fp4_hf_json which, const char *path, char *buf,
                                       size_t n, size_t *needed);

/* Sharded checkpoint writer into an existing directory: the same declare-then-stream protocol
 * as fp4_st_writer. Tensors go to shards in declaration order; a shard is closed before a
 * tensor that would take its data past max_shard_bytes (a bigger tensor gets a shard of its
 * own; 0 = no limit). One shard is written as model.safetensors; several as
 * model-00001-of-0000N.safetensors plus model.safetensors.index.json ({"metadata":
 * {"total_size": data bytes}, "weight_map": sorted}, 2-space indented). Metadata pairs go into
 * every shard. Each file is written atomically (as fp4_st_writer). Weights files already in the
 * directory that this write would not replace (other shard names, an index beside a single
 * file) are refused at the first write (hfw.stale): two checkpoints never mix. */
typedef struct fp4_hfdir_writer fp4_hfdir_writer;
FP4_API fp4_status fp4_hfdir_writer_create(const char *dir, uint64_t max_shard_bytes, fp4_hfdir_writer **out,
                                        fp4_error *err);
FP4_API fp4_status fp4_hfdir_writer_add_metadata(fp4_hfdir_writer *w, const char *key, const char *value,
                                              fp4_error *err);
FP4_API fp4_status fp4_hfdir_writer_add_tensor(fp4_hfdir_writer *w, const char *name, fp4_st_dtype dtype,
                                               int rank, const int64_t *shape, fp4_error *err);
FP4_API fp4_status fp4_hfdir_writer_write(fp4_hfdir_writer *w, const void *data, size_t n, fp4_error *err);
FP4_API fp4_status fp4_hfdir_writer_finish(fp4_hfdir_writer *w, size_t *n_shards, fp4_error *err);
FP4_API void fp4_hfdir_writer_free(fp4_hfdir_writer *w);
/* Writes JSON text (e.g. config.json, hf_quant_config.json) re-serialized the way Python's
 * json.dumps(obj, indent=indent, sort_keys=sort_keys) does (ASCII escapes, shortest float
 * repr), plus a final newline. indent 1..8; duplicate keys are refused. */
FP4_API fp4_status fp4_hfdir_write_json(const char *path, const char *json_text, int indent, int sort_keys,
                                     fp4_error *err);

#ifdef __cplusplus
}
#endif

#endif /* FP4LANE_IO_H */
