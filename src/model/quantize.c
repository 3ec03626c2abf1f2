/* quantize.c — `fp4lane quantize`: an unquantized checkpoint in, NVFP4 (ModelOpt recipe, SPEC §3)
 * or Q4_K out, in any layout. Pass 1 reads every weight once for its amax (fusion groups share
 * one: q/k/v and gate/up of a layer, as ModelOpt's export does); pass 2 quantizes a tensor when
 * the writer asks for it. Memory: one tensor (its f32 copy and its quantized bytes). */
#include "model_impl.h"
#include "io/outfile.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct qtensor {
    fp4_tensor t;
    fp4_scalars sc;
    const fp4_raw *raw;
    int64_t src_i;      /* raw's index in the source */
    int quantize;       /* 1: NVFP4 or Q4_K made here */
    int group;          /* fusion group id, or -1 */
    float amax;
} qtensor;

typedef struct qctx {
    const char *path;   /* the source, named in errors */
    int64_t n_src;
    const fp4_raw *t;
    const int64_t *by_name;
    const fp4_qsource *qs; /* a source that makes its tensors (read_rows), or NULL: t[i].data */
    const fp4_quantize_opts *o;
    uint64_t scanned, scan_total; /* the amax pass's progress over a made source */
    int64_t n;
    qtensor *q;
    int64_t cached;     /* index whose bytes are in buf */
    uint8_t *buf;       /* payload + scales, or Q4_K blocks */
    float *f32;         /* aligned f32 copy of the source tensor */
    size_t buf_cap, f32_cap;
    fp4_qpolicy pol;
} qctx;

/* ModelOpt's default exclusions (nvfp4-peers.md §2.3) and GGUF's names for the same modules. */
static int excluded(const char *name, int quantize_embeddings) {
    static const char *const emb[] = {"lm_head", "embed_tokens", "token_embd", "wte", "output.weight"};
    static const char *const never[] = {"router",
                                        "mlp.gate.",
                                        "block_sparse_moe.gate",
                                        "shared_expert_gate",
                                        "ffn_gate_inp",
                                        "visual",
                                        "vision",
                                        "multi_modal_projector",
                                        "mtp.",
                                        "norm"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(name, never[i])) return 1;
    if (!quantize_embeddings)
        for (size_t i = 0; i < sizeof emb / sizeof emb[0]; i++)
            if (strstr(name, emb[i]) && (strcmp(emb[i], "output.weight") || !strcmp(name, "output.weight")))
                return 1;
    return 0;
}

/* The fusion key: the name with its q/k/v (or gate/up) token replaced; equal keys share an amax. */
static int fusion_key(const char *name, char *key, size_t n) {
    static const char *const toks[][2] = {{"q_proj", "qkv"}, {"k_proj", "qkv"}, {"v_proj", "qkv"},
                                          {"gate_proj", "gu"}, {"up_proj", "gu"}, {"attn_q.", "qkv."},
                                          {"attn_k.", "qkv."}, {"attn_v.", "qkv."}, {"ffn_gate.", "gu."},
                                          {"ffn_up.", "gu."}};
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        const char *p = strstr(name, toks[i][0]);
        if (!p) continue;
        snprintf(key, n, "%.*s%s%s", (int)(p - name), name, toks[i][1], p + strlen(toks[i][0]));
        return 1;
    }
    return 0;
}

static int src_dt(int type) {
    return type == FP4_TYPE_F32    ? FP4_SRC_F32
           : type == FP4_TYPE_F16  ? FP4_SRC_F16
           : type == FP4_TYPE_BF16 ? FP4_SRC_BF16
                                   : -1;
}

static size_t elt_size(int type) { return type == FP4_TYPE_F32 ? 4 : 2; }

static fp4_status ensure(void **p, size_t *cap, size_t need);

/* rows [r0, r0 + n) of the source tensor into dst: copied, or made by the source */
static fp4_status read_rows(qctx *c, const qtensor *q, int64_t r0, int64_t n, void *dst, fp4_error *err) {
    const size_t rb = (size_t)q->raw->ne[0] * elt_size(q->raw->type);
    if (!c->qs) return memcpy(dst, q->raw->data + (size_t)r0 * rb, (size_t)n * rb), FP4_OK;
    return c->qs->read_rows(c->qs->ctx, q->src_i, r0, n, dst, err);
}

/* a made source's amax, a piece of rows at a time (the max does not depend on the pieces) */
static fp4_status made_amax(qctx *c, qtensor *q, fp4_error *err) {
    const int64_t rows = q->raw->n_dims >= 2 ? q->raw->ne[1] : 1;
    const size_t rb = (size_t)q->raw->ne[0] * elt_size(q->raw->type);
    const int64_t per = rb >= (4u << 20) ? 1 : (int64_t)((4u << 20) / rb);
    if (ensure((void **)&c->f32, &c->f32_cap, (size_t)(per < rows ? per : rows) * rb))
        return fp4_fail(err, FP4_ERR_NOMEM, c->path, q->raw->name, "alloc", "out of memory");
    q->amax = 0.0f;
    for (int64_t r = 0; r < rows; r += per) {
        const int64_t n = rows - r < per ? rows - r : per;
        fp4_status st = read_rows(c, q, r, n, c->f32, err);
        if (st) return st;
        if (fp4_amax_update(c->f32, (fp4_src_dtype)src_dt(q->raw->type), n * q->raw->ne[0], &q->amax))
            return fp4_fail(err, FP4_ERR_FORMAT, c->path, q->raw->name, "quantize.nonfinite",
                            "the weight holds NaN or Inf");
        c->scanned += (uint64_t)n * rb;
        if (c->o->progress) c->o->progress(c->o->progress_ctx, "amax", c->scanned, c->scan_total);
    }
    return FP4_OK;
}

static fp4_status tensor_amax(qctx *c, qtensor *q, fp4_error *err) {
    if (c->qs) return made_amax(c, q, err);
    const size_t es = elt_size(q->raw->type), chunk = 1 << 16;
    float tmp[1 << 14]; /* aligned scratch: file data is not aligned */
    q->amax = 0.0f;
    for (int64_t i = 0; i < q->raw->n_elements; i += (int64_t)(chunk / es)) {
        int64_t cnt =
            q->raw->n_elements - i < (int64_t)(chunk / es) ? q->raw->n_elements - i : (int64_t)(chunk / es);
        memcpy(tmp, q->raw->data + (size_t)i * es, (size_t)cnt * es);
        fp4_status st = fp4_amax_update(tmp, (fp4_src_dtype)src_dt(q->raw->type), cnt, &q->amax);
        if (st)
            return fp4_fail(err, st, c->path, q->raw->name, "quantize.nonfinite",
                            "the weight holds NaN or Inf");
    }
    return FP4_OK;
}

static int will_quantize(const fp4_raw *r, const fp4_quantize_opts *o, const fp4_qpolicy *pol) {
    const int64_t mult = o->to_q4_k ? 256 : 16;
    return r->n_dims == 2 && src_dt(r->type) >= 0 && fp4_ends_with(r->name, ".weight") &&
           !excluded(r->name, o->quantize_embeddings) && !fp4_qpolicy_keep(pol, r->name) &&
           r->ne[0] % mult == 0 && r->ne[0] <= FP4_MAX_N_IN;
}

static fp4_status plan_tensors(qctx *c, fp4_error *err) {
    const fp4_quantize_opts *o = c->o;
    c->q = calloc((size_t)c->n_src + 1, sizeof *c->q);
    if (!c->q) return fp4_fail(err, FP4_ERR_NOMEM, c->path, NULL, "alloc", "out of memory");
    c->n = c->n_src;
    for (int64_t k = 0; k < c->n; k++) { /* name order, so output order does not depend on the container */
        qtensor *q = &c->q[k];
        const fp4_raw *r = &c->t[c->by_name[k]];
        q->raw = r;
        q->src_i = c->by_name[k];
        q->group = -1;
        q->t = (fp4_tensor){.name = r->name, .type = (fp4_type)r->type, .n_dims = r->n_dims, .data = r->data,
                            .nbytes = r->nbytes, .st_dtype = r->st_dtype};
        memcpy(q->t.ne, r->ne, sizeof r->ne);
        if (r->type == FP4_TYPE_NVFP4_E2M1 || r->type == FP4_TYPE_GGML_NVFP4 || r->st_dtype == FP4_ST_F8_E4M3)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, c->path, r->name, "quantize.already",
                            "the input is already quantized (use fp4lane convert)");
        q->quantize = will_quantize(r, o, &c->pol);
        if (!q->quantize) continue;
        if (o->cancel && *o->cancel)
            return fp4_fail(err, FP4_ERR_IO, c->path, NULL, "out.interrupted",
                            "interrupted before anything was written");
        fp4_status st = tensor_amax(c, q, err);
        if (st) return st;
    }
    for (int64_t i = 0; i < c->n; i++) { /* fusion groups: the max amax of equal keys */
        char ki[FP4_MAX_NAME + 8], kj[FP4_MAX_NAME + 8];
        if (!c->q[i].quantize || o->no_fusion || c->q[i].group >= 0 ||
            !fusion_key(c->q[i].t.name, ki, sizeof ki))
            continue;
        float a = c->q[i].amax;
        for (int64_t j = i; j < c->n; j++)
            if (c->q[j].quantize && fusion_key(c->q[j].t.name, kj, sizeof kj) && !strcmp(ki, kj)) {
                c->q[j].group = (int)i;
                if (c->q[j].amax > a) a = c->q[j].amax;
            }
        for (int64_t j = i; j < c->n; j++)
            if (c->q[j].group == (int)i) c->q[j].amax = a;
    }
    for (int64_t i = 0; i < c->n; i++) {
        qtensor *q = &c->q[i];
        if (!q->quantize) continue;
        const int64_t n_in = q->t.ne[0], n_out = q->t.ne[1];
        q->t.data = NULL;
        if (o->to_q4_k) {
            q->t.type = FP4_TYPE_Q4_K;
            q->t.nbytes = (uint64_t)(n_out * (n_in / 256) * 144);
            q->t.st_dtype = -1;
            continue;
        }
        float s2;
        fp4_status st = fp4_scale2_from_amax(q->amax, o->rule, &s2);
        if (st)
            return fp4_fail(err, st, c->path, q->t.name, "quantize.scale2",
                            "no usable scale2 for amax %g", (double)q->amax);
        q->t.type = FP4_TYPE_NVFP4_E2M1;
        q->t.nvfp4 = (fp4_nvfp4_view){NULL, NULL, s2, 0.0f, n_out, n_in, FP4_PACK_CANONICAL};
        q->sc = (fp4_scalars){.s2_mul = s2, .s2_div = 1.0f / s2, .s2_mul_exact = 1};
    }
    return FP4_OK;
}

static fp4_status ensure(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return FP4_OK;
    void *n = realloc(*p, need);
    if (!n) return FP4_ERR_NOMEM;
    *p = n;
    *cap = need;
    return FP4_OK;
}

/* rows of one tensor quantized by several threads (each row's bytes do not depend on others) */
typedef struct qrows {
    const void *src;
    fp4_src_dtype dt;
    int64_t n_in;
    float scale2;
    uint8_t *payload, *scales;
    size_t es;
    fp4_status st[FP4_MAX_THREADS];
    int64_t n_out;
} qrows;

static void quant_rows(void *p, int64_t r0, int64_t r1) {
    qrows *q = p;
    fp4_status st =
        fp4_nvfp4_quantize((const uint8_t *)q->src + (size_t)(r0 * q->n_in) * q->es, q->dt, r1 - r0, q->n_in,
                           q->scale2, q->payload + r0 * (q->n_in / 2), q->scales + r0 * (q->n_in / 16));
    if (st) __atomic_store_n(&q->st[0], st, __ATOMIC_RELAXED); /* any failure refuses the input */
}

static int n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

/* Q4_K rows: widen rows [r0, r1) to f32, then (n_in a multiple of 256) quantize them in place */
typedef struct q4rows {
    const fp4_raw *raw;
    float *f32;
    fp4_block_q4_K *out;
    int64_t n_in;
    fp4_status st[1];
} q4rows;

static void q4_rows(void *p, int64_t r0, int64_t r1) {
    q4rows *q = p;
    const size_t es = elt_size(q->raw->type);
    for (int64_t k = r0 * q->n_in; k < r1 * q->n_in; k++) {
        uint16_t h;
        if (es == 4) memcpy(&q->f32[k], q->raw->data + k * 4, 4);
        else {
            memcpy(&h, q->raw->data + k * 2, 2);
            q->f32[k] = q->raw->type == FP4_TYPE_F16 ? fp4_f16_to_f32(h) : fp4_bf16_to_f32(h);
        }
    }
    if (q->n_in % 256) return;
    const fp4_status st =
        fp4_q4_K_quantize(q->f32 + r0 * q->n_in, (r1 - r0) * q->n_in, q->out + r0 * (q->n_in / 256));
    if (st) __atomic_store_n(&q->st[0], st, __ATOMIC_RELAXED);
}

static fp4_status make_bytes(qctx *c, int64_t i, fp4_error *err) {
    if (c->cached == i) return FP4_OK;
    qtensor *q = &c->q[i];
    const int64_t n_in = q->t.ne[0], n_out = q->t.ne[1];
    const size_t src_bytes = (size_t)q->raw->nbytes;
    fp4_status st;
    if (!q->quantize) { /* a made source's plain tensor asked for whole (get_plain) */
        c->cached = -1;
        st = ensure((void **)&c->buf, &c->buf_cap, src_bytes + 1)
                 ? fp4_fail(err, FP4_ERR_NOMEM, c->path, q->t.name, "alloc", "out of memory")
                 : read_rows(c, q, 0, q->raw->n_dims >= 2 ? q->raw->ne[1] : 1, c->buf, err);
        if (!st) c->cached = i;
        return st;
    }
    const size_t out_bytes =
        c->o->to_q4_k ? (size_t)q->t.nbytes : (size_t)(n_out * n_in / 2 + n_out * n_in / 16);
    const size_t f32_bytes = c->o->to_q4_k ? (size_t)(n_out * n_in) * 4 : src_bytes;
    if (ensure((void **)&c->f32, &c->f32_cap, f32_bytes) ||
        ensure((void **)&c->buf, &c->buf_cap, out_bytes + 1))
        return fp4_fail(err, FP4_ERR_NOMEM, c->path, q->t.name, "alloc", "out of memory");
    c->cached = -1;
    if (!c->o->to_q4_k) {
        st = read_rows(c, q, 0, n_out, c->f32, err); /* aligned copy in the source dtype */
        if (st) return st;
        qrows qr = {c->f32,
                    (fp4_src_dtype)src_dt(q->raw->type),
                    n_in,
                    q->t.nvfp4.scale2,
                    c->buf,
                    c->buf + n_out * n_in / 2,
                    elt_size(q->raw->type),
                    {FP4_OK},
                    n_out};
        st = fp4_parallel_rows(n_out, n_cpus(), quant_rows, &qr);
        if (!st) st = qr.st[0];
        q->t.nvfp4.payload = c->buf;
        q->t.nvfp4.scales = c->buf + n_out * n_in / 2;
        /* the loader's own checks on what is about to be written (scale2, every scale byte) */
        if (!st && (st = fp4_nvfp4_view_check(&q->t.nvfp4, NULL, NULL)))
            return fp4_fail(err, st, c->path, q->t.name, "quantize.unloadable",
                            "the quantized tensor would not load (%s): not written", fp4_status_str(st));
    } else {
        q4rows qr = {q->raw, c->f32, (fp4_block_q4_K *)(void *)c->buf, n_in, {FP4_OK}};
        /* rows of whole 256-value blocks are independent: the same bytes from any thread count */
        st = n_in % 256 ? FP4_OK : fp4_parallel_rows(n_out, n_cpus(), q4_rows, &qr);
        if (!st && n_in % 256) {
            q4_rows(&qr, 0, n_out); /* widen only; the blocks straddle rows */
            st = fp4_q4_K_quantize(c->f32, n_out * n_in, (fp4_block_q4_K *)(void *)c->buf);
        }
        if (!st) st = qr.st[0];
    }
    if (st)
        return fp4_fail(err, st, c->path, q->t.name, "quantize", "cannot quantize: %s",
                        fp4_status_str(st));
    c->cached = i;
    return FP4_OK;
}

static const fp4_tensor *q_tensor(void *ctx, int64_t i) { return &((qctx *)ctx)->q[i].t; }
static const fp4_scalars *q_scalars(void *ctx, int64_t i) { return &((qctx *)ctx)->q[i].sc; }
static fp4_status q_nvfp4(void *ctx, int64_t i, fp4_nvfp4_view *v, fp4_error *err) {
    qctx *c = ctx;
    fp4_status st = make_bytes(c, i, err);
    if (!st) *v = c->q[i].t.nvfp4;
    return st;
}
static fp4_status q_plain(void *ctx, int64_t i, const uint8_t **data, fp4_error *err) {
    qctx *c = ctx;
    fp4_status st = make_bytes(c, i, err);
    if (!st) *data = c->buf;
    return st;
}

/* bytes [off, off + n) of a made source's plain tensor: the rows that hold them, made into buf */
static fp4_status q_plain_part(void *ctx, int64_t i, uint64_t off, size_t n, const uint8_t **data,
                               fp4_error *err) {
    qctx *c = ctx;
    const qtensor *q = &c->q[i];
    const uint64_t rb = (uint64_t)q->raw->ne[0] * elt_size(q->raw->type);
    const int64_t r0 = (int64_t)(off / rb), r1 = (int64_t)((off + n + rb - 1) / rb);
    c->cached = -1;
    if (ensure((void **)&c->buf, &c->buf_cap, (size_t)((uint64_t)(r1 - r0) * rb)))
        return fp4_fail(err, FP4_ERR_NOMEM, c->path, q->t.name, "alloc", "out of memory");
    fp4_status st = read_rows(c, q, r0, r1 - r0, c->buf, err);
    if (!st) *data = c->buf + (off - (uint64_t)r0 * rb);
    return st;
}

static fp4_status quantize_run(qctx *c, const fp4_ckpt *ck, const char *out, fp4_error *err) {
    const fp4_quantize_opts *o = c->o;
    fp4_status st = plan_tensors(c, err);
    if (st) return st;
    fp4_wsrc src = {c->n,
                    q_tensor,
                    q_nvfp4,
                    q_scalars,
                    q_plain,
                    c,
                    o->to_q4_k ? FP4_WP_Q4_K : FP4_WP_NVFP4,
                    FP4_AP_A16,
                    ck ? ck->config_json : c->qs->config_json,
                    ck ? ck->quant_config_json : NULL,
                    ck,
                    1,
                    c->qs ? q_plain_part : NULL,
                    c->qs ? c->qs->companions : NULL,
                    c->qs ? c->qs->ctx : NULL};
    int any = 0;
    for (int64_t i = 0; i < c->n; i++) any |= c->q[i].quantize;
    if (!any)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, c->path, NULL, "quantize.nothing", "no weight to quantize");
    fp4_write_opts wo = {o->to_q4_k && !o->layout ? FP4_LAYOUT_GGUF : o->layout,
                         o->max_shard_bytes,
                         o->st_metadata,
                         o->progress,
                         o->progress_ctx,
                         o->force,
                         o->cancel};
    return fp4_write_layout(&src, out, &wo, err);
}

static fp4_status layout_ok(const fp4_quantize_opts *o, const char *out, fp4_error *err) {
    if (o->to_q4_k && o->layout != FP4_LAYOUT_GGUF && o->layout != FP4_LAYOUT_GGUF_GGML &&
        o->layout != FP4_LAYOUT_NONE)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, out, NULL, "quantize.layout",
                        "Q4_K is written as GGUF only");
    return FP4_OK;
}

fp4_status fp4_quantize_checkpoint(const char *in, const char *out, const fp4_quantize_opts *o,
                                   fp4_error *err) {
    fp4_error_clear(err);
    if (!in || !out || !o) return FP4_ERR_INVALID_ARG;
    fp4_status st = layout_ok(o, out, err);
    if (st) return st;
    qctx c = {.o = o, .cached = -1};
    fp4_ckpt *ck = NULL;
    const int dir_out =
        !o->to_q4_k && (o->layout == FP4_LAYOUT_MODELOPT || o->layout == FP4_LAYOUT_CT);
    st = fp4_out_preflight(in, out, dir_out, o->force, err); /* before the read pass */
    if (!st) st = fp4_ckpt_open(in, 0, &ck, err);
    if (!st) {
        c.path = ck->path, c.n_src = ck->n, c.t = ck->t, c.by_name = ck->by_name;
        fp4_qpolicy_init(ck->config_json, &c.pol);
        st = quantize_run(&c, ck, out, err);
    }
    free(c.q);
    free(c.buf);
    free(c.f32);
    fp4_ckpt_close(ck);
    return st;
}

fp4_status fp4_quantize_source(const fp4_qsource *s, const char *out, const fp4_quantize_opts *o,
                               fp4_error *err) {
    fp4_error_clear(err);
    if (!s || !s->read_rows || !out || !o) return FP4_ERR_INVALID_ARG;
    if (o->to_q4_k) /* Q4_K widens from the mapped bytes */
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, out, NULL, "quantize.layout",
                        "a made source is quantized to NVFP4 only");
    qctx c = {.o = o, .cached = -1, .path = s->path, .n_src = s->n, .t = s->t, .by_name = s->by_name};
    c.qs = s;
    fp4_qpolicy_init(s->config_json, &c.pol);
    for (int64_t i = 0; i < s->n; i++)
        c.scan_total += will_quantize(&s->t[i], o, &c.pol) ? s->t[i].nbytes : 0;
    fp4_status st = quantize_run(&c, NULL, out, err);
    free(c.q);
    free(c.buf);
    free(c.f32);
    return st;
}
