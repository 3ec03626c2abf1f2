/* outfile.h — atomic outputs (internal to src/). Every file fp4lane writes goes through here:
 *
 *   - a file is written under a temporary name in its own directory (".fp4lane-tmp-<name>-XXXXXX",
 *     created with O_EXCL: the run owns it), flushed, fsynced, optionally checked, and renamed
 *     over the target; the directory is fsynced after the rename. A reader of the target sees the
 *     old file or the complete new one, never a mix, whatever happens to the process;
 *   - a directory is built beside its target (".fp4lane-tmp-<name>-XXXXXX/") and swapped in whole;
 *     a non-empty target is refused unless force (then its checkpoint files are replaced and any
 *     other regular file in it is carried into the new directory by hard link);
 *   - an existing target file is replaced only when the caller asks (force; fp4_out_preflight
 *     refuses it before any work, fp4_outfile_set_noreplace at the rename);
 *   - nothing that existed before the run is deleted or truncated: a failure or an abort removes
 *     only the temporary names this run created. A target that is not a regular file (a device,
 *     a FIFO, a socket) or a directory where a file is wanted, or a symbolic link, is refused
 *     before anything is created.
 * Rules: out.* (out.not-regular, out.symlink, out.exists, out.same-file, out.io, out.interrupted). */
#ifndef FP4_OUTFILE_H
#define FP4_OUTFILE_H

#include "fp4_impl.h"
#include <stdio.h>

#define FP4_TMP_PREFIX ".fp4lane-tmp-"

/* Runs on the complete temporary output (a file or a directory) before it replaces the target;
 * a failure aborts the commit. */
typedef fp4_status (*fp4_out_check_fn)(void *ctx, const char *tmp_path, const char *final_path,
                                       fp4_error *err);

typedef struct fp4_outfile fp4_outfile;
fp4_status fp4_outfile_open(const char *path, fp4_outfile **out, fp4_error *err);
fp4_status fp4_outfile_write(fp4_outfile *o, const void *data, size_t n, fp4_error *err);
/* overwrites n bytes at offset off of what was written so far (a header known only at the end) */
fp4_status fp4_outfile_write_at(fp4_outfile *o, uint64_t off, const void *data, size_t n, fp4_error *err);
void fp4_outfile_set_check(fp4_outfile *o, fp4_out_check_fn fn, void *ctx);
/* the commit never replaces: a target that exists by then (created by someone else while this run
 * wrote) is refused with out.exists and keeps its bytes (RENAME_NOREPLACE, or a hard link) */
void fp4_outfile_set_noreplace(fp4_outfile *o);
/* tests only: the no-replace rename's fallbacks, as on a filesystem without RENAME_NOREPLACE (1) or
 * without hard links too (2); 0 restores the normal path. Not thread-safe. */
void fp4_outfile_test_fallback(int level);
/* flush, fsync, check, rename, fsync the directory; frees o whatever the result */
fp4_status fp4_outfile_commit(fp4_outfile *o, fp4_error *err);
/* closes and removes the temporary file; frees o (NULL is fine) */
void fp4_outfile_abort(fp4_outfile *o);
const char *fp4_outfile_path(const fp4_outfile *o);

typedef struct fp4_outdir fp4_outdir;
fp4_status fp4_outdir_open(const char *path, int force, fp4_outdir **out, fp4_error *err);
const char *fp4_outdir_tmp(const fp4_outdir *d);          /* where the caller writes the files */
void fp4_outdir_set_check(fp4_outdir *d, fp4_out_check_fn fn, void *ctx);
fp4_status fp4_outdir_commit(fp4_outdir *d, fp4_error *err);  /* frees d */
void fp4_outdir_abort(fp4_outdir *d);                         /* removes the temp dir; frees d */

/* Refuses (out.same-file) when out, or for a directory out any entry of it, is the same file
 * (st_dev, st_ino) as in, or as any entry of the directory in: the same file reached through
 * another name, a hard link or a symbolic link included. Absent paths are fine. */
fp4_status fp4_out_same_file_check(const char *in, const char *out, fp4_error *err);

/* The file writers' hook: fn runs on the complete temporary file before finish renames it. */
void fp4_gguf_writer_set_check(fp4_gguf_writer *w, fp4_out_check_fn fn, void *ctx);
/* finish never replaces an existing target (fp4_outfile_set_noreplace); before write_header */
void fp4_gguf_writer_set_noreplace(fp4_gguf_writer *w);

/* Everything a write to out would refuse about its target, checked before any work is done:
 * out.same-file (against in, may be NULL), out.path, out.symlink, out.not-regular, and
 * out.exists unless force: a non-empty directory (want_dir) or an existing regular file; for a
 * file, out.io when its temporary name cannot be created (an unwritable directory): the probe
 * file (and any directory made for it) is removed at once. */
fp4_status fp4_out_preflight(const char *in, const char *out, int want_dir, int force, fp4_error *err);

/* A checkpoint file name an HF directory writer owns: model.safetensors, its index, shards
 * model-NNNNN-of-NNNNN.safetensors, config.json, hf_quant_config.json, and temporaries. */
int fp4_out_checkpoint_name(const char *name);

/* A file of an HF directory that is neither a checkpoint file, nor a weight file (*.safetensors,
 * *.bin, *.pt, *.pth, *.gguf, *.ckpt, *.h5, *.msgpack, *.onnx, *.index.json), nor hidden: the
 * tokenizer, generation_config.json, the chat template, the README. */
int fp4_out_companion_name(const char *name);
/* Copies every companion regular file of src_dir (symbolic links followed; subdirectories not
 * entered) into dst_dir, a directory this run owns (fp4_outdir_tmp). A src that is not a
 * directory: nothing to do. */
fp4_status fp4_out_copy_companions(const char *src_dir, const char *dst_dir, fp4_error *err);

#endif
