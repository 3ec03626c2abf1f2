/* kv.c — the KV cache's identity and its snapshots (a prompt cache).
 *
 * Identity: SHA-256 over a versioned, explicitly serialized record of the architecture, the
 * weights (every tensor's name, type, dims and bytes; NVFP4 payload, scales, scale2 and input
 * scale), lane, activation precision, mode, KV dtype and the RoPE configuration; native mode adds
 * the device, the native revision and a split engine's rank count (native kernels differ per
 * device and per revision, a split's sums per rank count; exact ones do not). Exact and native
 * state never alias.
 *
 * Snapshot file (little-endian):
 *   0  "FP4LKV02"                 8 bytes
 *   8  identity                   64 ASCII hex bytes
 *  72  n_layers u32, kv_dim u32   (fp4_arch_kv_dim: NKV * head_dim; latent attention: half the
 *                                 latent row, its first half in K and the rest in V)
 *  80  n_pos u64
 *  88  n_tok u64                  0 (no token history), n_pos, or n_pos + 1 (the last one pending:
 *                                 emitted, not cached; its continuation feeds it first)
 *  96  tokens i32 [n_tok]         the ids of the cached positions, then the pending one
 *  ..  K halves [n_layers][n_pos][kv_dim] u16, then V halves, same shape
 *  end SHA-256 of every byte before it (32 bytes)
 * Version 1 ("FP4LKV01", no n_tok, an identity of tensor names) is refused by its magic.
 * Written under a temporary name beside PATH, fsynced, renamed, directory fsynced (outfile.h). */
#include "runtime/rt_impl.h"
#include "io/infile.h"
#include "io/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KV_MAGIC "FP4LKV02"
#define KV_MAGIC_V1 "FP4LKV01"
/* bumped whenever a native kernel's order of operations changes (2: the CPU's native NVFP4 dot in
 * 64 lanes; 3: CUDA native prefill through cuBLAS, projections and attention), so a native snapshot
 * of an older build is refused rather than continued with other numerics; exact mode's bits never
 * change, so its identity does not carry this */
#define FP4_RT_NATIVE_REV "native-rev-3"
#define KV_HEAD 96
#define KV_MAX_FILE (64ull << 30)

int fp4_sha256_init(fp4_sha256 *h) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(c);
        h->ctx = NULL;
        return -1;
    }
    h->ctx = c;
    return 0;
}
void fp4_sha256_update(fp4_sha256 *h, const void *p, size_t n) {
    if (h->ctx && n) EVP_DigestUpdate(h->ctx, p, n);
}
void fp4_sha256_final(fp4_sha256 *h, uint8_t out[32]) {
    unsigned int n = 32;
    memset(out, 0, 32);
    if (h->ctx) EVP_DigestFinal_ex(h->ctx, out, &n);
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

static void put_u64(fp4_sha256 *h, uint64_t v) {
    uint8_t b[8];
    fp4_wr_le64(b, v);
    fp4_sha256_update(h, b, 8);
}
static void put_f64(fp4_sha256 *h, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    put_u64(h, u);
}
static void put_str(fp4_sha256 *h, const char *s) {
    put_u64(h, strlen(s));
    fp4_sha256_update(h, s, strlen(s));
}

/* A weight matrix as the step reads it: type and shape, then its values in the row order the
 * step's outputs take. NVFP4 as canonical planes (payload rows, then scale rows) whatever the
 * packing, with scale2 and the input scale; FP8 with its scales; other types as their bytes.
 * perm_d > 0: llama.cpp's q/k row permutation (qk_permuted, heads of perm_d rows), undone so
 * that the permuted file and its unpermuted twin (which compute the same bits: the step copies
 * the outputs back, backend.h 2d) hash alike. -1 when out of memory (no identity). */
static int64_t hf_row(int64_t r, int64_t perm_d) {
    if (perm_d <= 0) return r;
    const int64_t h = r / perm_d, k = r % perm_d, half = perm_d / 2; /* HF row k = j*half + i */
    return h * perm_d + 2 * (k % half) + k / half;                   /* <- stored row 2i + j   */
}
static int hash_matrix(fp4_sha256 *h, const fp4_tensor *t, int64_t perm_d) {
    put_u64(h, (uint64_t)t->type);
    put_u64(h, (uint64_t)t->n_dims);
    for (int d = 0; d < FP4_MAX_DIMS; d++)
        put_u64(h, (uint64_t)(d < t->n_dims ? t->ne[d] : 0));
    if (t->type == FP4_TYPE_NVFP4_E2M1) {
        const fp4_nvfp4_view *v = &t->nvfp4;
        if (v->packing == FP4_PACK_CANONICAL && perm_d <= 0) {
            fp4_sha256_update(h, v->payload, (size_t)(v->n_out * (v->n_in / 2)));
            fp4_sha256_update(h, v->scales, (size_t)(v->n_out * (v->n_in / 16)));
        } else {
            const size_t pb = (size_t)(v->n_in / 2), sb = (size_t)(v->n_in / 16);
            uint8_t *row = malloc(pb + sb);
            if (!row) return -1;
            for (int pass = 0; pass < 2; pass++)
                for (int64_t r = 0; r < v->n_out; r++) {
                    fp4_nvfp4_view_row(v, hf_row(r, perm_d), row, row + pb);
                    fp4_sha256_update(h, pass ? row + pb : row, pass ? sb : pb);
                }
            free(row);
        }
        put_u64(h, fp4_f32_bits(v->scale2));
        put_u64(h, fp4_f32_bits(v->input_scale_inv));
        return 0;
    }
    if (!t->data) return 0;
    const int64_t rows = fp4_rows_of(t->ne, t->n_dims);
    if (perm_d > 0 && rows > 0 && t->nbytes % (uint64_t)rows == 0) {
        const size_t rb = (size_t)(t->nbytes / (uint64_t)rows);
        for (int64_t r = 0; r < rows; r++)
            fp4_sha256_update(h, t->data + (size_t)hf_row(r, perm_d) * rb, rb);
    } else
        fp4_sha256_update(h, t->data, (size_t)t->nbytes);
    if (t->type == FP4_TYPE_F8_E4M3FN) { /* FP8 weights: their scales are part of the weights */
        const fp4_fp8_view *f = &t->fp8;
        put_u64(h, fp4_f32_bits(f->scale));
        for (int64_t r = 0; f->row_scale && r < f->n_out; r++)
            put_u64(h, fp4_f32_bits(f->row_scale[hf_row(r, perm_d)]));
        if (f->block_scale) { /* block-scaled: the block shape and every block's scale */
            const int64_t nb = ((f->n_out + f->block_rows - 1) / f->block_rows) *
                               ((f->n_in + f->block_cols - 1) / f->block_cols);
            put_u64(h, (uint64_t)f->block_rows), put_u64(h, (uint64_t)f->block_cols);
            for (int64_t i = 0; i < nb; i++) put_u64(h, fp4_f32_bits(f->block_scale[i]));
        }
    }
    return 0;
}

/* The identity of the computation, not of its container: the step's inputs by slot (backend.h),
 * never by tensor name, file format or tensor order. Norm weights and biases as the f32 values
 * the step uses (a bf16 vector and its exact f32 widening are one input); matrices by
 * hash_matrix; RoPE by its configuration and frequency factors' values. A checkpoint and its
 * conversion into another container that compute the same bits share the identity. */
void fp4_rt_identity_compute(fp4_rt *rt) {
    if (rt->identity[0]) return;
    fp4_sha256 h;
    if (fp4_sha256_init(&h)) return;
    const fp4_arch *a = &rt->arch;
    put_str(&h, "fp4lane-kv-identity-v2");
    put_str(&h, fp4_arch_family_name(a->family));
    const int64_t ints[] = {a->n_layers, a->hidden,       a->n_heads,       a->n_kv_heads,
                            a->head_dim, a->ffn,          a->vocab,         a->tied_head,
                            a->qkv_bias, a->qk_norm,      a->rope_scaling,  a->rope_orig_ctx,
                            a->rope_freq_factors};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        put_u64(&h, (uint64_t)ints[i]);
    put_f64(&h, a->rms_eps), put_f64(&h, a->rope_theta), put_f64(&h, a->rope_factor);
    put_f64(&h, a->rope_low_freq_factor), put_f64(&h, a->rope_high_freq_factor);
    if (a->n_experts) { /* the routing is part of the numbers (dense models: the record as before) */
        put_str(&h, "moe");
        const int64_t moe[] = {a->n_experts, a->n_experts_used, a->moe_ffn, a->moe_routing, a->moe_norm_topk};
        for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++)
            put_u64(&h, (uint64_t)moe[i]);
        for (size_t i = 0; i < sizeof a->moe_dense / sizeof a->moe_dense[0]; i++)
            put_u64(&h, a->moe_dense[i]);
    }
    if (a->family == FP4_ARCH_GEMMA3) { /* the window and Gemma's ops are part of the numbers */
        put_str(&h, "gemma3");
        const int64_t gi[] = {a->sliding_window, a->hidden_act, a->embed_scale};
        for (size_t i = 0; i < sizeof gi / sizeof gi[0]; i++)
            put_u64(&h, (uint64_t)gi[i]);
        for (size_t i = 0; i < sizeof a->swa_layers / sizeof a->swa_layers[0]; i++)
            put_u64(&h, a->swa_layers[i]);
        put_f64(&h, a->rope_local_theta), put_f64(&h, a->query_pre_attn_scalar),
            put_f64(&h, a->final_softcap);
    }
    if (a->kv_lora_rank) { /* DeepSeek-V3: the latent attention, yarn and the group routing */
        put_str(&h, "mla");
        const int64_t mla[] = {a->q_lora_rank, a->kv_lora_rank,  a->qk_nope_dim,      a->qk_rope_dim,
                               a->v_head_dim,  a->rope_interleave, a->moe_n_group,   a->moe_topk_group,
                               a->n_shared_experts};
        for (size_t i = 0; i < sizeof mla / sizeof mla[0]; i++)
            put_u64(&h, (uint64_t)mla[i]);
        put_f64(&h, a->rope_beta_fast), put_f64(&h, a->rope_beta_slow), put_f64(&h, a->rope_mscale);
        put_f64(&h, a->rope_mscale_all_dim), put_f64(&h, a->routed_scaling);
    }
    put_str(&h, fp4_rt_lane_name(fp4_rt_model_lane(rt->m)));
    put_str(&h, fp4_act_precision_name(fp4_model_act_precision(rt->m)));
    put_str(&h, rt->opts.mode == FP4_MODE_EXACT ? "exact" : "native");
    put_str(&h, "kv:f16");
    if (rt->opts.mode == FP4_MODE_NATIVE) { /* native numerics are the backend's, and its revision's */
        put_str(&h, rt->be->name);
        put_str(&h, FP4_RT_NATIVE_REV);
        if (rt->opts.tp > 1) put_u64(&h, (uint64_t)rt->opts.tp);
    }
    const fp4_rt_bound *b = &rt->b;
    int bad = hash_matrix(&h, b->tok_embd, 0);
    put_u64(&h, b->head == b->tok_embd);
    if (b->head != b->tok_embd) bad |= hash_matrix(&h, b->head, 0);
    fp4_sha256_update(&h, rt->vec, sizeof(float) * (size_t)a->hidden); /* output_norm, widened */
    for (int64_t i = 0; i < a->n_layers * FP4_LW_COUNT_ && !bad; i++) {
        const fp4_tensor *t = b->layer[i];
        const int slot = (int)(i % FP4_LW_COUNT_);
        put_u64(&h, (uint64_t)(t != NULL));
        if (!t) continue;
        put_u64(&h, (uint64_t)slot);
        if (rt->lvec[i]) { /* a norm weight or bias: its values as the step reads them */
            int64_t n = 1;
            for (int d = 0; d < t->n_dims; d++)
                n *= t->ne[d];
            put_u64(&h, (uint64_t)n);
            fp4_sha256_update(&h, rt->lvec[i], sizeof(float) * (size_t)n);
        } else
            bad |= hash_matrix(&h, t, a->qk_permuted && (slot == FP4_LW_Q || slot == FP4_LW_K) ? a->head_dim
                                                                                               : 0);
    }
    if (b->moe) { /* the routers and experts by layer, then position in the layer's run (backend.h) */
        const int64_t n = a->n_layers * FP4_MOE_STRIDE(a->n_experts);
        for (int64_t i = 0; i < n && !bad; i++) {
            put_u64(&h, (uint64_t)(b->moe[i] != NULL));
            if (b->moe[i]) bad |= hash_matrix(&h, b->moe[i], 0);
        }
    }
    if (b->rope_freqs) {
        float ff[FP4_ARCH_MAX_HEAD_DIM / 2];
        if (fp4_tensor_dequant_rows(b->rope_freqs, 0, 1, ff)) bad = 1;
        fp4_sha256_update(&h, ff, sizeof(float) * (size_t)(a->head_dim / 2));
    }
    uint8_t dg[32];
    fp4_sha256_final(&h, dg);
    if (bad) return; /* out of memory: no identity, no snapshot matches */
    for (int i = 0; i < 32; i++)
        snprintf(rt->identity + 2 * i, 3, "%02x", dg[i]);
}

const char *fp4_rt_identity(const fp4_rt *rt) {
    if (!rt) return "";
    fp4_rt_identity_compute((fp4_rt *)rt);
    return rt->identity;
}

void fp4_rt_seq_set_pos(fp4_rt *rt, int32_t seq, int64_t pos);

fp4_status fp4_rt_kv_save_tokens(const fp4_rt *crt, int32_t seq, const char *path, const int32_t *tokens,
                                 int64_t n_tok, fp4_error *err) {
    fp4_error_clear(err);
    fp4_rt *rt = (fp4_rt *)crt;
    if (!rt || !path || (n_tok && !tokens)) return FP4_ERR_INVALID_ARG;
    const int64_t n_pos = fp4_rt_seq_pos(rt, seq);
    if (n_pos < 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "kv.seq", "sequence %d is not open", seq);
    if (n_tok != 0 && n_tok != n_pos && n_tok != n_pos + 1)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "kv.tokens",
                        "%lld tokens for %lld cached positions (0, the positions, or one more pending)",
                        (long long)n_tok, (long long)n_pos);
    for (int64_t i = 0; i < n_tok; i++)
        if (tokens[i] < 0 || tokens[i] >= rt->arch.vocab)
            return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "kv.tokens",
                            "token %lld: id %d outside [0, %lld)", (long long)i, tokens[i],
                            (long long)rt->arch.vocab);
    const uint64_t nl = (uint64_t)rt->arch.n_layers,
                   kvd = (uint64_t)fp4_arch_kv_dim(&rt->arch);
    const size_t nh = (size_t)(nl * (uint64_t)n_pos * kvd), kv0 = KV_HEAD + 4 * (size_t)n_tok;
    uint16_t *k = malloc(nh * 2 + 2), *v = malloc(nh * 2 + 2);
    uint8_t *buf = malloc(nh * 4 + kv0 + 4);
    fp4_status st = FP4_OK;
    if (!k || !v || !buf) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "out of memory");
        goto out;
    }
    if ((st = fp4_rt_kv_window_held(rt, seq, n_pos, path, err))) goto out;
    if ((st = rt->be->kv_read(rt->be_state, seq, n_pos, k, v))) {
        st = fp4_fail(err, st, path, NULL, "kv.read", "cannot read the cache from the %s backend",
                      rt->be->name);
        goto out;
    }
    fp4_rt_identity_compute(rt);
    memcpy(buf, KV_MAGIC, 8);
    memcpy(buf + 8, rt->identity, 64);
    fp4_wr_le32(buf + 72, (uint32_t)nl);
    fp4_wr_le32(buf + 76, (uint32_t)kvd);
    fp4_wr_le64(buf + 80, (uint64_t)n_pos);
    fp4_wr_le64(buf + 88, (uint64_t)n_tok);
    for (int64_t i = 0; i < n_tok; i++)
        fp4_wr_le32(buf + KV_HEAD + 4 * i, (uint32_t)tokens[i]);
    for (size_t i = 0; i < nh; i++)
        fp4_wr_le16(buf + kv0 + 2 * i, k[i]), fp4_wr_le16(buf + kv0 + 2 * (nh + i), v[i]);
    const size_t body = kv0 + 4 * nh;
    uint8_t dg[32];
    fp4_sha256 h;
    if (fp4_sha256_init(&h)) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "kv.sha", "SHA-256 unavailable");
        goto out;
    }
    fp4_sha256_update(&h, buf, body);
    fp4_sha256_final(&h, dg);
    /* a temporary name beside path, fsynced, renamed, the directory fsynced (io/outfile.h) */
    fp4_outfile *of = NULL;
    if ((st = fp4_outfile_open(path, &of, err))) goto out;
    if ((st = fp4_outfile_write(of, buf, body, err)) || (st = fp4_outfile_write(of, dg, 32, err))) {
        fp4_outfile_abort(of);
        goto out;
    }
    st = fp4_outfile_commit(of, err);
out:
    free(k), free(v), free(buf);
    return st;
}

fp4_status fp4_rt_kv_save(const fp4_rt *rt, int32_t seq, const char *path, fp4_error *err) {
    return fp4_rt_kv_save_tokens(rt, seq, path, NULL, 0, err);
}

/* The bytes of the largest snapshot this engine could load: every layer's K and V at n_ctx
 * positions, n_ctx + 1 tokens, the header and the checksum. */
static uint64_t kv_engine_cap(const fp4_rt *rt) {
    const uint64_t per =
        (uint64_t)rt->arch.n_layers * (uint64_t)fp4_arch_kv_dim(&rt->arch) * 4;
    uint64_t cap;
    if (__builtin_mul_overflow(per, (uint64_t)fp4_rt_n_ctx(rt), &cap) ||
        __builtin_add_overflow(cap, (uint64_t)KV_HEAD + 32 + 4 * ((uint64_t)fp4_rt_n_ctx(rt) + 1), &cap))
        return UINT64_MAX;
    return cap;
}

static fp4_status kv_magic(const uint8_t *b, const char *path, fp4_error *err) {
    if (!memcmp(b, KV_MAGIC_V1, 8))
        return fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.version",
                        "a snapshot of an older fp4lane (FP4LKV01: no token history, an identity of "
                        "tensor names): make it again with this build");
    if (memcmp(b, KV_MAGIC, 8))
        return fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.magic", "not an fp4lane KV snapshot");
    return FP4_OK;
}

/* Before the body is read: a file of size bytes larger than kv_engine_cap can only be refused; its
 * header says why (kv.magic, kv.size, kv.shape, rt.context) without a pass over the rest. Files
 * within the cap go on to the whole-file checks in their usual order (checksum before identity). */
static fp4_status kv_header_precheck(const fp4_rt *rt, int fd, uint64_t size, uint8_t *hd, const char *path,
                                     fp4_error *err) {
    if (size <= kv_engine_cap(rt)) return FP4_OK;
    ssize_t r;
    do r = pread(fd, hd, KV_HEAD, 0);
    while (r < 0 && errno == EINTR);
    if (r != KV_HEAD) return fp4_fail(err, FP4_ERR_IO, path, NULL, "io.read", "short read");
    fp4_status sm = kv_magic(hd, path, err);
    if (sm) return sm;
    const uint64_t nl = fp4_rd_le32(hd + 72), kvd = fp4_rd_le32(hd + 76), n_pos = fp4_rd_le64(hd + 80);
    if (nl != (uint64_t)rt->arch.n_layers || kvd != (uint64_t)fp4_arch_kv_dim(&rt->arch))
        return fp4_fail(err, FP4_ERR_SHAPE, path, NULL, "kv.shape",
                        "layers/kv_dim %llu/%llu do not match the model (and the file, %llu bytes, is larger "
                        "than any snapshot this engine can load: not read)",
                        (unsigned long long)nl, (unsigned long long)kvd, (unsigned long long)size);
    if (n_pos > (uint64_t)fp4_rt_n_ctx(rt))
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "rt.context",
                        "the snapshot holds %llu positions, past the context length %lld",
                        (unsigned long long)n_pos, (long long)fp4_rt_n_ctx(rt));
    /* the header fits the engine, so it declares at most kv_engine_cap bytes: the rest trails */
    return fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.trailing",
                    "%llu bytes, more than the %llu positions the header declares can take (not read)",
                    (unsigned long long)size, (unsigned long long)n_pos);
}

fp4_status fp4_rt_kv_load_tokens(fp4_rt *rt, int32_t seq, const char *path, int32_t *tokens, int64_t cap,
                                 int64_t *n_tokens, fp4_error *err) {
    fp4_error_clear(err);
    if (n_tokens) *n_tokens = 0;
    if (!rt || !path || cap < 0 || (cap && !tokens)) return FP4_ERR_INVALID_ARG;
    if (fp4_rt_seq_pos(rt, seq) != 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "kv.seq",
                        "sequence %d must be open and empty to load a snapshot", seq);
    int fd;
    uint64_t size;
    fp4_status so = fp4_infile_open(path, "io.open", false, &fd, &size, err);
    if (so) return so;
    if (size < KV_HEAD + 32) {
        close(fd);
        return fp4_fail(err, FP4_ERR_TRUNCATED, path, NULL, "kv.truncated",
                        "%llu bytes: shorter than a snapshot header", (unsigned long long)size);
    }
    if (size > KV_MAX_FILE) {
        close(fd);
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "kv.size", "%llu bytes is above the snapshot cap",
                        (unsigned long long)size);
    }
    { /* the header alone first: a file larger than this engine's largest snapshot whose header
       * does not fit the engine is refused before its body is read (a hostile size costs nothing) */
        uint8_t hd[KV_HEAD];
        fp4_status sh = kv_header_precheck(rt, fd, size, hd, path, err);
        if (sh) {
            close(fd);
            return sh;
        }
    }
    uint8_t *buf = malloc((size_t)size);
    uint16_t *k = NULL, *v = NULL;
    fp4_status st = FP4_OK;
    if (!buf) {
        close(fd);
        return fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "out of memory");
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, (size_t)(size - got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        st = fp4_fail(err, FP4_ERR_IO, path, NULL, "io.read", "short read");
        goto out;
    }
    if ((st = kv_magic(buf, path, err))) goto out;
    const uint64_t nl = fp4_rd_le32(buf + 72), kvd = fp4_rd_le32(buf + 76), n_pos = fp4_rd_le64(buf + 80),
                   n_tok = fp4_rd_le64(buf + 88);
    if (n_pos > (uint64_t)INT64_MAX - 1 || (n_tok != 0 && n_tok != n_pos && n_tok != n_pos + 1)) {
        st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.tokens",
                      "%llu tokens for %llu positions (0, the positions, or one more pending)",
                      (unsigned long long)n_tok, (unsigned long long)n_pos);
        goto out;
    }
    uint64_t nh, want;
    if (__builtin_mul_overflow(nl * kvd, n_pos, &nh) || __builtin_mul_overflow(nh, 4, &want) ||
        __builtin_add_overflow(want, KV_HEAD + 32, &want) || __builtin_add_overflow(want, 4 * n_tok, &want)) {
        st = fp4_fail(err, FP4_ERR_OVERFLOW, path, NULL, "kv.size", "header sizes overflow");
        goto out;
    }
    if (size < want) {
        st = fp4_fail(err, FP4_ERR_TRUNCATED, path, NULL, "kv.truncated",
                      "%llu bytes, the header declares %llu", (unsigned long long)size,
                      (unsigned long long)want);
        goto out;
    }
    if (size > want) {
        st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.trailing", "%llu bytes after the checksum",
                      (unsigned long long)(size - want));
        goto out;
    }
    uint8_t dg[32];
    fp4_sha256 h;
    if (fp4_sha256_init(&h)) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "kv.sha", "SHA-256 unavailable");
        goto out;
    }
    fp4_sha256_update(&h, buf, (size_t)(size - 32));
    fp4_sha256_final(&h, dg);
    if (memcmp(dg, buf + size - 32, 32)) {
        st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.checksum",
                      "the snapshot's checksum does not match its bytes (corrupted)");
        goto out;
    }
    fp4_rt_identity_compute(rt);
    if (memcmp(buf + 8, rt->identity, 64)) {
        st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.identity",
                      "the snapshot was made by another computation: weights, architecture, lane, mode, KV "
                      "dtype or rope configuration differ (identity %.16s..., this engine %.16s...)",
                      (const char *)buf + 8, rt->identity);
        goto out;
    }
    if (nl != (uint64_t)rt->arch.n_layers || kvd != (uint64_t)fp4_arch_kv_dim(&rt->arch)) {
        st = fp4_fail(err, FP4_ERR_SHAPE, path, NULL, "kv.shape",
                      "layers/kv_dim %llu/%llu do not match the model", (unsigned long long)nl,
                      (unsigned long long)kvd);
        goto out;
    }
    if (n_pos > (uint64_t)fp4_rt_n_ctx(rt)) {
        st = fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "rt.context",
                      "the snapshot holds %llu positions, past the context length %lld",
                      (unsigned long long)n_pos, (long long)fp4_rt_n_ctx(rt));
        goto out;
    }
    for (uint64_t i = 0; i < n_tok; i++) {
        const uint32_t t = fp4_rd_le32(buf + KV_HEAD + 4 * i);
        if (t >= (uint64_t)rt->arch.vocab) {
            st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.tokens", "token %llu: id %u outside [0, %lld)",
                          (unsigned long long)i, t, (long long)rt->arch.vocab);
            goto out;
        }
    }
    if (tokens && n_tok > (uint64_t)cap) {
        st = fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "kv.tokens", "%llu tokens, room for %lld",
                      (unsigned long long)n_tok, (long long)cap);
        goto out;
    }
    k = malloc((size_t)nh * 2 + 2), v = malloc((size_t)nh * 2 + 2);
    if (!k || !v) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "out of memory");
        goto out;
    }
    const size_t kv0 = KV_HEAD + 4 * (size_t)n_tok;
    for (size_t i = 0; i < nh; i++)
        k[i] = fp4_rd_le16(buf + kv0 + 2 * i), v[i] = fp4_rd_le16(buf + kv0 + 2 * (nh + i));
    if ((st = rt->be->kv_write(rt->be_state, seq, (int64_t)n_pos, k, v))) {
        st = fp4_fail(err, st, path, NULL, "kv.write", "cannot write the cache into the %s backend",
                      rt->be->name);
        goto out;
    }
    fp4_rt_seq_set_pos(rt, seq, (int64_t)n_pos);
    for (uint64_t i = 0; tokens && i < n_tok; i++)
        tokens[i] = (int32_t)fp4_rd_le32(buf + KV_HEAD + 4 * i);
    if (n_tokens) *n_tokens = (int64_t)n_tok;
out:
    free(buf), free(k), free(v);
    return st;
}

fp4_status fp4_rt_kv_load(fp4_rt *rt, int32_t seq, const char *path, fp4_error *err) {
    return fp4_rt_kv_load_tokens(rt, seq, path, NULL, 0, NULL, err);
}
