/* layout_write.c — emit a write plan: fp4lane GGUF / llama.cpp GGUF through the GGUF writer,
 * ModelOpt / compressed-tensors through the sharded safetensors writer. Data streams tensor by
 * tensor from the source (memory: one tensor at most, one row for ggml repacking). */
#include "layout_impl.h"
#include "io/outfile.h"
#include "fp4lane_runtime.h"
#include "fp4lane_text.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define CHUNK ((size_t)16 << 20) /* also how often a cancel request is looked at */

typedef fp4_status (*sink_fn)(void *w, int64_t i, const void *data, size_t n, fp4_error *err);

static fp4_status sink_gguf(void *w, int64_t i, const void *data, size_t n, fp4_error *err) {
    return fp4_gguf_writer_write_tensor_data(w, i, data, n, err);
}
static fp4_status sink_hf(void *w, int64_t i, const void *data, size_t n, fp4_error *err) {
    (void)i;
    return fp4_hfdir_writer_write(w, data, n, err);
}

typedef struct emit_ctx {
    const fp4_wsrc *src;
    const fp4_write_opts *opts;
    sink_fn sink;
    void *w;
    uint64_t done, total;
} emit_ctx;

static fp4_status interrupted(const fp4_write_opts *o, const char *name, fp4_error *err) {
    if (!o || !o->cancel || !*o->cancel) return FP4_OK;
    return fp4_fail(err, FP4_ERR_IO, NULL, name, "out.interrupted",
                    "interrupted: the partial output was removed");
}

static fp4_status put(emit_ctx *e, int64_t i, const uint8_t *data, uint64_t n, fp4_error *err) {
    while (n) {
        fp4_status st0 = interrupted(e->opts, NULL, err);
        if (st0) return st0;
        size_t k = n > CHUNK ? CHUNK : (size_t)n;
        fp4_status st = e->sink(e->w, i, data, k, err);
        if (st) return st;
        data += k, n -= k, e->done += k;
        if (e->opts && e->opts->progress) /* quantizing happens tensor by tensor as data is asked for */
            e->opts->progress(e->opts->progress_ctx, e->src->quantized_by_us ? "quantize" : "write", e->done,
                              e->total);
    }
    return FP4_OK;
}

static fp4_status emit_entry(emit_ctx *e, int64_t i, const plan_entry *pe, fp4_error *err);

/* llama.cpp's 3-D experts: each member's bytes in expert order, or the per-expert F32 vector of
 * their scales (ggml_moe.c) */
static fp4_status emit_stack(emit_ctx *e, int64_t i, const plan_entry *pe, fp4_error *err) {
    fp4_status st = FP4_OK;
    for (int64_t k = 0; pe->part == PART_SCALAR && k < pe->stack_n && !st; k++) {
        uint8_t b[4];
        fp4_wr_lef32(b, pe->stack_values[k]);
        st = put(e, i, b, 4, err);
    }
    if (pe->part == PART_SCALAR) return st;
    for (int64_t k = 0; k < pe->stack_n && !st; k++) {
        plan_entry m = *pe;
        m.stack_n = 0, m.src = pe->stack[k], m.n_dims = 2, m.ne[2] = 1,
        m.nbytes = pe->nbytes / (uint64_t)pe->stack_n;
        st = emit_entry(e, i, &m, err);
    }
    return st;
}

static fp4_status emit_entry(emit_ctx *e, int64_t i, const plan_entry *pe, fp4_error *err) {
    fp4_status st0 = interrupted(e->opts, pe->name, err);
    if (st0) return st0;
    if (pe->stack_n) return emit_stack(e, i, pe, err);
    const fp4_tensor *t = pe->part == PART_GEN ? NULL : e->src->tensor(e->src->ctx, pe->src);
    if (pe->part == PART_RAW) {
        const uint8_t *d = t->data;
        if (!d && e->src->get_plain_part && !pe->widen_from && !pe->narrow_to && !pe->perm_heads) {
            fp4_status st = FP4_OK; /* made on demand: in pieces, never the whole tensor at once */
            for (uint64_t off = 0; off < pe->nbytes && !st; off += CHUNK) {
                const size_t k = pe->nbytes - off < CHUNK ? (size_t)(pe->nbytes - off) : CHUNK;
                st = e->src->get_plain_part(e->src->ctx, pe->src, off, k, &d, err);
                if (!st) st = put(e, i, d, k, err);
            }
            return st;
        }
        if (!d) {
            fp4_status st = e->src->get_plain(e->src->ctx, pe->src, &d, err);
            if (st) return st;
        }
        if (pe->widen_from) { /* F16/BF16 vector -> F32 (llama.cpp's 1-D tensors) */
            uint8_t buf[4096];
            fp4_status st = FP4_OK;
            for (uint64_t k = 0, n = pe->nbytes / 4; k < n && !st; k += 1024) {
                const int64_t m = (int64_t)(n - k < 1024 ? n - k : 1024);
                fp4_ggml_arch_widen(pe, d + k * 2, m, buf);
                st = put(e, i, buf, (uint64_t)m * 4, err);
            }
            return st;
        }
        if (pe->narrow_to) { /* F32 vector -> F16/BF16 (back from llama.cpp's 1-D tensors) */
            uint8_t buf[2048];
            fp4_status st = FP4_OK;
            for (uint64_t k = 0, n = pe->nbytes / 2; k < n && !st; k += 1024) {
                const int64_t m = (int64_t)(n - k < 1024 ? n - k : 1024);
                fp4_ggml_arch_narrow(pe, d + k * 4, m, buf);
                st = put(e, i, buf, (uint64_t)m * 2, err);
            }
            return st;
        }
        if (!pe->perm_heads) return put(e, i, d, pe->nbytes, err);
        const uint64_t rb = pe->nbytes / (uint64_t)pe->ne[1]; /* llama.cpp's q/k row order */
        fp4_status st = FP4_OK;
        for (int64_t r = 0; r < pe->ne[1] && !st; r++)
            st = put(e, i, d + fp4_ggml_arch_src_row(pe, r) * rb, rb, err);
        return st;
    }
    if (pe->part == PART_GEN) { /* made by ggml_arch.c */
        uint8_t *b = malloc((size_t)pe->nbytes);
        fp4_status st = b ? fp4_ggml_arch_gen(e->src, pe, b, err) : FP4_ERR_NOMEM;
        if (!st) st = put(e, i, b, pe->nbytes, err);
        free(b);
        return st;
    }
    if (pe->part == PART_SCALAR) {
        uint8_t b[4];
        fp4_wr_lef32(b, pe->value);
        return put(e, i, b, 4, err);
    }
    fp4_nvfp4_view v;
    fp4_status st = e->src->get_nvfp4(e->src->ctx, pe->src, &v, err);
    if (st) return st;
    if ((pe->part == PART_PAYLOAD || pe->part == PART_SCALES) && pe->perm_heads) { /* q/k rows back */
        const uint64_t rb = pe->nbytes / (uint64_t)v.n_out;
        const uint8_t *base = pe->part == PART_PAYLOAD ? v.payload : v.scales;
        for (int64_t r = 0; r < v.n_out && !st; r++)
            st = put(e, i, base + fp4_ggml_arch_src_row(pe, r) * rb, rb, err);
        return st;
    }
    if (pe->part == PART_PAYLOAD) return put(e, i, v.payload, pe->nbytes, err);
    if (pe->part == PART_SCALES) return put(e, i, v.scales, pe->nbytes, err);
    const int64_t row = v.n_in / 64 * 36; /* PART_GGML: repack row by row */
    uint8_t *buf = malloc((size_t)row);
    if (!buf) return fp4_fail(err, FP4_ERR_NOMEM, NULL, pe->name, "alloc", "out of memory");
    for (int64_t r = 0; r < v.n_out && !st; r++) {
        const int64_t s = fp4_ggml_arch_src_row(pe, r);
        fp4_ggml_pack_row(v.payload + s * (v.n_in / 2), v.scales + s * (v.n_in / 16), v.n_in, buf);
        st = put(e, i, buf, (uint64_t)row, err);
    }
    free(buf);
    return st;
}

/* ---- GGUF ---- */

/* The tokenizer a GGUF written from a HF directory carries: its tokenizer.json (+
 * tokenizer_config.json beside it), read by fp4_tokenizer_load. *out stays NULL when the source is
 * not a directory or has no tokenizer.json (then ggml_arch.c's "none" vocabulary stands); one the
 * loader refuses refuses the write with its tok.* rule. ids[0]: the model's vocabulary (embedding
 * rows) that the token list is padded to, as llama.cpp's converter pads it (gguf-ggml refuses a
 * tokenizer with more ids than that, which llama.cpp could not load); ids[1..2]: config.json's
 * BOS / EOS, written where the tokenizer names none (-1: none). */
static fp4_status source_tokenizer(const fp4_wsrc *src, const plan *p, fp4_tokenizer **out, int32_t ids[3],
                                   fp4_error *err) {
    const fp4_ckpt *c = src->src_ck;
    *out = NULL;
    ids[0] = 0, ids[1] = ids[2] = -1;
    char path[sizeof c->path + 32];
    struct stat sb;
    if (!c || !c->hf || snprintf(path, sizeof path, "%s/tokenizer.json", c->path) >= (int)sizeof path ||
        stat(path, &sb) != 0)
        return FP4_OK;
    fp4_status st = fp4_tokenizer_load(path, out, err);
    if (st) return st;
    fp4_arch a;
    fp4_error ae;
    const int32_t have = fp4_tokenizer_n_vocab(*out);
    if (!src->config_json || fp4_arch_from_hf_config(src->config_json, &a, &ae) || a.vocab <= 0 ||
        a.vocab > FP4_TOK_MAX_VOCAB)
        return FP4_OK;
    ids[0] = (int32_t)a.vocab, ids[1] = a.bos, ids[2] = a.n_eos > 0 ? a.eos[0] : -1;
    if (have > a.vocab && p->layout == FP4_LAYOUT_GGUF_GGML) {
        fp4_tokenizer_free(*out);
        *out = NULL;
        return fp4_fail(err, FP4_ERR_SHAPE, path, NULL, "ggml.vocab",
                        "the tokenizer has %d ids, the model's vocabulary %lld: llama.cpp cannot load them",
                        (int)have, (long long)a.vocab);
    }
    return FP4_OK;
}

static fp4_status gguf_kvs(fp4_gguf_writer *w, const fp4_wsrc *src, const plan *p, const fp4_tokenizer *tok,
                           const int32_t ids[3], fp4_error *err) {
    fp4_status st = FP4_OK;
    const fp4_ckpt *c = src->src_ck;
    if (c && c->is_gguf && fp4_gguf_alignment(c->gguf) != FP4_GGUF_DEFAULT_ALIGNMENT)
        st = fp4_gguf_writer_set_alignment(w, fp4_gguf_alignment(c->gguf), err);
    if (!st) st = fp4_gguf_writer_add_str(w, "fp4lane.weight_precision", fp4_weight_precision_name(src->wp),
                                          strlen(fp4_weight_precision_name(src->wp)), err);
    if (!st) st = fp4_gguf_writer_add_str(w, "fp4lane.activation_precision", fp4_act_precision_name(src->ap),
                                          strlen(fp4_act_precision_name(src->ap)), err);
    if (!st && c && c->is_gguf) st = fp4_gguf_copy_kvs(w, c->gguf, err);
    if (!st && c && !c->is_gguf && !src->quantized_by_us)
        for (int64_t i = 0; i < c->n_meta && !st; i++) {
            if (fp4_meta_regenerated(c->meta[i].key)) continue;
            char key[FP4_MAX_NAME + 64];
            snprintf(key, sizeof key, "fp4lane.st.%s", c->meta[i].key);
            st = fp4_gguf_writer_add_str(w, key, c->meta[i].value, strlen(c->meta[i].value), err);
        }
    if (!st && src->config_json && !(c && c->is_gguf))
        st = fp4_gguf_writer_add_str(w, "fp4lane.hf.config", src->config_json, strlen(src->config_json), err);
    if (!st && src->quant_config_json && !(c && c->is_gguf))
        st = fp4_gguf_writer_add_str(w, "fp4lane.hf.quant_config", src->quant_config_json,
                                     strlen(src->quant_config_json), err);
    if (!st && tok) st = fp4_tokenizer_write_gguf_n(tok, w, ids[0], ids[1], ids[2], err);
    if (!st && tok && c && c->hf) { /* tokenizer_config.json's chat_template: chat reads it back */
        char *tmpl = NULL;
        st = fp4_chat_template_read(c->path, &tmpl, err);
        if (!st && tmpl) st = fp4_gguf_writer_add_str(w, "tokenizer.chat_template", tmpl, strlen(tmpl), err);
        free(tmpl);
    }
    for (int64_t i = 0; i < p->n_kv && !st; i++) {
        const plan_kv *k = &p->kv[i];
        if (tok && !strncmp(k->key, "tokenizer.ggml.", 15)) continue; /* the "none" stand-in */
        st = k->is_f32    ? fp4_gguf_writer_add_f32(w, k->key, k->f, err)
             : k->is_u32  ? fp4_gguf_writer_add_u32(w, k->key, k->u, err)
             : k->is_bool ? fp4_gguf_writer_add_bool(w, k->key, 1, err)
                          : fp4_gguf_writer_add_str(w, k->key, k->s, strlen(k->s), err);
    }
    return st;
}

/* The fail-closed loader on the complete temporary output, before it replaces the target: no run
 * leaves behind a checkpoint that its own loader refuses. Opened deferred (FP4_LOAD_DEFER_REPACK:
 * every check of the default open, a type-40 file's scale bytes read in its blocks) so that a
 * gguf-ggml output is not repacked into a host copy just to be checked. */
static fp4_status loads_back(void *ctx, const char *tmp, const char *final_path, fp4_error *err) {
    (void)ctx;
    fp4_model *m = NULL;
    fp4_load_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.flags = FP4_LOAD_DEFER_REPACK;
    fp4_status st = fp4_model_open(tmp, &lo, &m, err);
    fp4_model_close(m);
    if (st && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "the written output does not load back, so it was not kept: %.440s",
                 err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
        snprintf(err->file, sizeof err->file, "%s", final_path);
    }
    return st;
}

static fp4_status write_gguf(const fp4_wsrc *src, const plan *p, const char *out, const fp4_write_opts *opts,
                             fp4_error *err) {
    fp4_gguf_writer *w = NULL;
    fp4_tokenizer *tok = NULL;
    int32_t ids[3];
    fp4_status st = source_tokenizer(src, p, &tok, ids, err);
    if (st) return st;
    st = fp4_gguf_writer_create(&w, err);
    if (st) {
        fp4_tokenizer_free(tok);
        return fp4_fail(err, st, out, NULL, "alloc", "cannot create a GGUF writer");
    }
    fp4_gguf_writer_set_check(w, loads_back, NULL);
    if (!(opts && opts->force)) fp4_gguf_writer_set_noreplace(w); /* a file that appears meanwhile stays */
    st = gguf_kvs(w, src, p, tok, ids, err);
    fp4_tokenizer_free(tok);
    for (int64_t i = 0; i < p->n && !st; i++)
        st = fp4_gguf_writer_add_tensor(w, p->e[i].name, (fp4_type)p->e[i].gguf_type, p->e[i].n_dims,
                                        p->e[i].ne, err);
    if (!st) st = fp4_gguf_writer_write_header(w, out, err);
    if (st) {
        fp4_gguf_writer_free(w);
        return st;
    }
    emit_ctx e = {src, opts, sink_gguf, w, 0, p->total};
    for (int64_t i = 0; i < p->n && !st; i++) st = emit_entry(&e, i, &p->e[i], err);
    if (!st) st = fp4_gguf_writer_finish(w, err);
    fp4_gguf_writer_free(w);
    return st;
}

/* ---- safetensors (HF directory) ---- */

static fp4_status hf_metadata(fp4_hfdir_writer *w, const fp4_wsrc *src, const plan *p,
                              const fp4_write_opts *opts,
                              const char *stash, fp4_error *err) {
    fp4_status st = FP4_OK;
    if (stash) st = fp4_hfdir_writer_add_metadata(w, FP4_META_QCFG_STASH, stash, err);
    const fp4_ckpt *c = src->src_ck;
    if (opts && opts->st_metadata)
        for (const char *const *kv = opts->st_metadata; kv[0] && kv[1] && !st; kv += 2)
            st = fp4_hfdir_writer_add_metadata(w, kv[0], kv[1], err);
    if (!st && c && c->is_gguf && !src->quantized_by_us) { /* fp4lane.st.* KVs carry safetensors metadata */
        for (int64_t i = 0; i < fp4_gguf_n_kv(c->gguf) && !st; i++) {
            const char *k = fp4_gguf_key(c->gguf, i), *s;
            uint64_t len;
            if (strncmp(k, "fp4lane.st.", 11) || fp4_meta_regenerated(k + 11) || fp4_gguf_get_str(c->gguf, i,
                                                                                                  &s, &len))
                continue;
            char *v = strndup(s, (size_t)len);
            if (!v) return FP4_ERR_NOMEM;
            st = fp4_hfdir_writer_add_metadata(w, k + 11, v, err);
            free(v);
        }
    } else if (!st && c && !src->quantized_by_us) {
        for (int64_t i = 0; i < c->n_meta && !st; i++)
            if (!fp4_meta_regenerated(c->meta[i].key))
                st = fp4_hfdir_writer_add_metadata(w, c->meta[i].key, c->meta[i].value, err);
    }
    if (!st && p->layout == FP4_LAYOUT_CT && src->quant_config_json)
        st = fp4_hfdir_writer_add_metadata(w, FP4_META_QUANT_CONFIG, src->quant_config_json, err);
    for (int64_t i = 0; i < p->n_kv && !st; i++)
        st = fp4_hfdir_writer_add_metadata(w, p->kv[i].key, p->kv[i].s, err);
    return st;
}

static fp4_status write_hf(const fp4_wsrc *src, const plan *p, const char *out, const fp4_write_opts *opts,
                           fp4_error *err) {
    fp4_outdir *od = NULL;
    fp4_status st = fp4_outdir_open(out, opts && opts->force, &od, err); /* built beside, swapped in */
    if (st) return st;
    const char *dir = fp4_outdir_tmp(od);
    fp4_hfdir_writer *w = NULL;
    char *cfg = NULL, *stash = NULL;
    st = fp4_config_plan(src, p->layout, &cfg, &stash, err);
    if (!st) st = fp4_hfdir_writer_create(dir, opts ? opts->max_shard_bytes : 0, &w, err);
    if (!st) st = hf_metadata(w, src, p, opts, stash, err);
    for (int64_t i = 0; i < p->n && !st; i++) {
        int64_t shape[FP4_MAX_DIMS];
        const plan_entry *e = &p->e[i];
        for (int d = 0; d < e->n_dims; d++) shape[d] = e->ne[e->n_dims - 1 - d];
        st = fp4_hfdir_writer_add_tensor(w, e->name, (fp4_st_dtype)e->st_dtype, e->n_dims, shape, err);
    }
    emit_ctx e = {src, opts, sink_hf, w, 0, p->total};
    for (int64_t i = 0; i < p->n && !st; i++) st = emit_entry(&e, i, &p->e[i], err);
    size_t n_shards = 0;
    if (!st) st = fp4_hfdir_writer_finish(w, &n_shards, err);
    fp4_hfdir_writer_free(w);
    if (!st) st = fp4_write_hf_configs(src, p->layout, dir, cfg, err);
    /* tokenizer files, generation_config.json, the chat template: transformers and vLLM load the
     * output on its own (the input's weight files and index are never copied) */
    if (!st && src->src_ck) st = fp4_out_copy_companions(src->src_ck->path, dir, err);
    else if (!st && src->companions) st = src->companions(src->companions_ctx, dir, err);
    if (!st) st = interrupted(opts, NULL, err);
    free(cfg);
    free(stash);
    if (st) {
        fp4_outdir_abort(od);
        return st;
    }
    fp4_outdir_set_check(od, loads_back, NULL);
    return fp4_outdir_commit(od, err);
}

fp4_status fp4_write_layout(const fp4_wsrc *src, const char *out, const fp4_write_opts *opts,
                            fp4_error *err) {
    fp4_layout layout = opts ? opts->layout : FP4_LAYOUT_GGUF;
    if ((unsigned)layout >= FP4_LAYOUT_COUNT_) return FP4_ERR_INVALID_ARG;
    { /* never write over what is being read, under any name; the target's kind, before any work */
        int dir = layout == FP4_LAYOUT_MODELOPT || layout == FP4_LAYOUT_CT;
        fp4_status st0 = fp4_out_preflight(src->src_ck ? src->src_ck->path : NULL, out, dir,
                                           opts && opts->force, err);
        if (st0) return st0;
        if (!dir && opts && opts->st_metadata && opts->st_metadata[0])
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, out, NULL, "out.metadata",
                            "safetensors metadata (--metadata) has no place in a GGUF file: nothing was "
                            "written (write an HF layout to carry it)");
    }
    plan p;
    fp4_status st = fp4_plan_build(src, layout, &p, err);
    if (!st) st = p.is_gguf ? write_gguf(src, &p, out, opts, err) : write_hf(src, &p, out, opts, err);
    if (st && err && !err->file[0]) snprintf(err->file, sizeof err->file, "%s", out);
    fp4_plan_free(&p);
    return st;
}

/* ---- a loaded model as a write source ---- */

static const fp4_tensor *m_tensor(void *ctx, int64_t i) { return &((const fp4_model *)ctx)->t[i].t; }
static const fp4_scalars *m_scalars(void *ctx, int64_t i) { return &((const fp4_model *)ctx)->t[i].sc; }
static fp4_status m_nvfp4(void *ctx, int64_t i, fp4_nvfp4_view *v, fp4_error *err) {
    (void)err;
    *v = ((const fp4_model *)ctx)->t[i].t.nvfp4;
    return FP4_OK;
}

fp4_status fp4_model_write(const fp4_model *m, const char *out, const fp4_write_opts *opts, fp4_error *err) {
    fp4_error_clear(err);
    if (!m || !out) return FP4_ERR_INVALID_ARG;
    for (int64_t i = 0; i < m->n; i++) /* no layout writer carries an FP8 weight's scales yet */
        if (m->t[i].t.type == FP4_TYPE_F8_E4M3FN)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, m->ck->path, m->t[i].t.name, "write.fp8",
                            "FP8 weights cannot be re-laid out by convert (their weight_scale would be "
                            "lost); run the checkpoint as it is (fp4lane run / validate / inspect)");
    for (int64_t i = 0; i < m->n; i++) /* the writers read canonical rows */
        if (m->t[i].t.type == FP4_TYPE_NVFP4_E2M1 && m->t[i].t.nvfp4.packing != FP4_PACK_CANONICAL)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, m->ck->path, m->t[i].t.name, "write.deferred",
                            "this model was opened with FP4_LOAD_DEFER_REPACK (llama.cpp blocks not "
                            "repacked): open it without the flag to write it");
    const fp4_ckpt *c = m->ck;
    char *cfg = NULL, *qcfg = NULL;
    if (c->is_gguf) { /* HF configs carried through a GGUF come back out */
        const char *s;
        uint64_t len;
        if (!fp4_gguf_get_str(c->gguf, fp4_gguf_key_index(c->gguf, "fp4lane.hf.config"), &s, &len))
            cfg = strndup(s, (size_t)len);
        if (!fp4_gguf_get_str(c->gguf, fp4_gguf_key_index(c->gguf, "fp4lane.hf.quant_config"), &s, &len))
            qcfg = strndup(s, (size_t)len);
    }
    fp4_wsrc src = {m->n,
                    m_tensor,
                    m_nvfp4,
                    m_scalars,
                    NULL,
                    (void *)m,
                    m->wp,
                    m->ap,
                    c->is_gguf ? cfg : c->config_json,
                    c->is_gguf ? qcfg : c->quant_config_json,
                    c,
                    0,
                    NULL,
                    NULL,
                    NULL};
    fp4_status st = fp4_write_layout(&src, out, opts, err);
    free(cfg);
    free(qcfg);
    return st;
}
