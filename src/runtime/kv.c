/* kv.c — the KV cache's identity and its snapshots (a prompt cache).
 *
 * Identity: SHA-256 over a versioned, explicitly serialized record of the architecture, the
 * weights (every tensor's name, type, dims and bytes; NVFP4 payload, scales, scale2 and input
 * scale), lane, activation precision, mode, KV dtype and the RoPE configuration; native mode adds
 * the device and the native revision (native kernels differ per device and per revision; exact ones
 * do not). Exact and native state never alias.
 *
 * Snapshot file (little-endian):
 *   0  "FP4LKV01"                 8 bytes
 *   8  identity                   64 ASCII hex bytes
 *  72  n_layers u32, kv_dim u32   (NKV * head_dim)
 *  80  n_pos u64
 *  88  K halves [n_layers][n_pos][kv_dim] u16, then V halves, same shape
 *  end SHA-256 of every byte before it (32 bytes)
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

#define KV_MAGIC "FP4LKV01"
/* bumped whenever a native kernel's order of operations changes (2: the CPU's native NVFP4 dot in
 * 64 lanes; 3: CUDA native prefill through cuBLAS, projections and attention), so a native snapshot
 * of an older build is refused rather than continued with other numerics; exact mode's bits never
 * change, so its identity does not carry this */
#define FP4_RT_NATIVE_REV "native-rev-3"
#define KV_HEAD 88
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

/* An NVFP4 view of another packing (FP4_LOAD_DEFER_REPACK: llama.cpp's blocks as the file holds
 * them) hashed as its canonical bytes, the payload plane then the scale plane, one row at a time:
 * the identity of the weights, not of their packing. -1 when out of memory (no identity). */
static int hash_nvfp4_rows(fp4_sha256 *h, const fp4_nvfp4_view *v) {
    const size_t pb = (size_t)(v->n_in / 2), sb = (size_t)(v->n_in / 16);
    uint8_t *row = malloc(pb + sb);
    if (!row) return -1;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t r = 0; r < v->n_out; r++) {
            fp4_nvfp4_view_row(v, r, row, row + pb);
            fp4_sha256_update(h, pass ? row + pb : row, pass ? sb : pb);
        }
    free(row);
    return 0;
}

void fp4_rt_identity_compute(fp4_rt *rt) {
    if (rt->identity[0]) return;
    fp4_sha256 h;
    if (fp4_sha256_init(&h)) return;
    const fp4_arch *a = &rt->arch;
    put_str(&h, "fp4lane-kv-identity-v1");
    put_str(&h, fp4_arch_family_name(a->family));
    const int64_t ints[] = {
        a->source,   a->n_layers,    a->hidden,       a->n_heads,       a->n_kv_heads,
        a->head_dim, a->ffn,         a->vocab,        a->tied_head,     a->qkv_bias,
        a->qk_norm,  a->qk_permuted, a->rope_scaling, a->rope_orig_ctx, a->rope_freq_factors};
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
    put_str(&h, fp4_rt_lane_name(fp4_rt_model_lane(rt->m)));
    put_str(&h, fp4_act_precision_name(fp4_model_act_precision(rt->m)));
    put_str(&h, rt->opts.mode == FP4_MODE_EXACT ? "exact" : "native");
    put_str(&h, "kv:f16");
    if (rt->opts.mode == FP4_MODE_NATIVE) { /* native numerics are the backend's, and its revision's */
        put_str(&h, rt->be->name);
        put_str(&h, FP4_RT_NATIVE_REV);
    }
    for (int64_t i = 0; i < fp4_model_n_tensors(rt->m); i++) {
        const fp4_tensor *t = fp4_model_tensor(rt->m, i);
        put_str(&h, t->name);
        put_u64(&h, (uint64_t)t->type);
        put_u64(&h, (uint64_t)t->n_dims);
        for (int d = 0; d < FP4_MAX_DIMS; d++)
            put_u64(&h, (uint64_t)t->ne[d]);
        if (t->type == FP4_TYPE_NVFP4_E2M1 && t->nvfp4.packing != FP4_PACK_CANONICAL) {
            if (hash_nvfp4_rows(&h, &t->nvfp4)) { /* out of memory: no identity, no snapshot matches */
                uint8_t dg[32];
                fp4_sha256_final(&h, dg);
                return;
            }
            put_u64(&h, fp4_f32_bits(t->nvfp4.scale2));
            put_u64(&h, fp4_f32_bits(t->nvfp4.input_scale_inv));
        } else if (t->type == FP4_TYPE_NVFP4_E2M1) {
            const fp4_nvfp4_view *v = &t->nvfp4;
            fp4_sha256_update(&h, v->payload, (size_t)(v->n_out * (v->n_in / 2)));
            fp4_sha256_update(&h, v->scales, (size_t)(v->n_out * (v->n_in / 16)));
            put_u64(&h, fp4_f32_bits(v->scale2));
            put_u64(&h, fp4_f32_bits(v->input_scale_inv));
        } else if (t->data) {
            fp4_sha256_update(&h, t->data, (size_t)t->nbytes);
        }
        if (t->type == FP4_TYPE_F8_E4M3FN) { /* FP8 weights: their scales are part of the weights */
            const fp4_fp8_view *f = &t->fp8;
            put_u64(&h, fp4_f32_bits(f->scale));
            for (int64_t r = 0; f->row_scale && r < f->n_out; r++)
                put_u64(&h, fp4_f32_bits(f->row_scale[r]));
        }
    }
    uint8_t dg[32];
    fp4_sha256_final(&h, dg);
    for (int i = 0; i < 32; i++)
        snprintf(rt->identity + 2 * i, 3, "%02x", dg[i]);
}

const char *fp4_rt_identity(const fp4_rt *rt) {
    if (!rt) return "";
    fp4_rt_identity_compute((fp4_rt *)rt);
    return rt->identity;
}

void fp4_rt_seq_set_pos(fp4_rt *rt, int32_t seq, int64_t pos);

fp4_status fp4_rt_kv_save(const fp4_rt *crt, int32_t seq, const char *path, fp4_error *err) {
    fp4_error_clear(err);
    fp4_rt *rt = (fp4_rt *)crt;
    if (!rt || !path) return FP4_ERR_INVALID_ARG;
    const int64_t n_pos = fp4_rt_seq_pos(rt, seq);
    if (n_pos < 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "kv.seq", "sequence %d is not open", seq);
    const uint64_t nl = (uint64_t)rt->arch.n_layers,
                   kvd = (uint64_t)(rt->arch.n_kv_heads * rt->arch.head_dim);
    const size_t nh = (size_t)(nl * (uint64_t)n_pos * kvd);
    uint16_t *k = malloc(nh * 2 + 2), *v = malloc(nh * 2 + 2);
    uint8_t *buf = malloc(nh * 4 + KV_HEAD + 4);
    fp4_status st = FP4_OK;
    if (!k || !v || !buf) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "out of memory");
        goto out;
    }
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
    for (size_t i = 0; i < nh; i++)
        fp4_wr_le16(buf + KV_HEAD + 2 * i, k[i]), fp4_wr_le16(buf + KV_HEAD + 2 * (nh + i), v[i]);
    const size_t body = KV_HEAD + 4 * nh;
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

/* The bytes of the largest snapshot this engine could load: every layer's K and V at n_ctx
 * positions, the header and the checksum. */
static uint64_t kv_engine_cap(const fp4_rt *rt) {
    const uint64_t per =
        (uint64_t)rt->arch.n_layers * (uint64_t)(rt->arch.n_kv_heads * rt->arch.head_dim) * 4;
    uint64_t cap;
    if (__builtin_mul_overflow(per, (uint64_t)fp4_rt_n_ctx(rt), &cap) ||
        __builtin_add_overflow(cap, (uint64_t)KV_HEAD + 32, &cap))
        return UINT64_MAX;
    return cap;
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
    if (memcmp(hd, KV_MAGIC, 8))
        return fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.magic", "not an fp4lane KV snapshot");
    const uint64_t nl = fp4_rd_le32(hd + 72), kvd = fp4_rd_le32(hd + 76), n_pos = fp4_rd_le64(hd + 80);
    if (nl != (uint64_t)rt->arch.n_layers || kvd != (uint64_t)(rt->arch.n_kv_heads * rt->arch.head_dim))
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

fp4_status fp4_rt_kv_load(fp4_rt *rt, int32_t seq, const char *path, fp4_error *err) {
    fp4_error_clear(err);
    if (!rt || !path) return FP4_ERR_INVALID_ARG;
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
    if (memcmp(buf, KV_MAGIC, 8)) {
        st = fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "kv.magic", "not an fp4lane KV snapshot");
        goto out;
    }
    const uint64_t nl = fp4_rd_le32(buf + 72), kvd = fp4_rd_le32(buf + 76), n_pos = fp4_rd_le64(buf + 80);
    uint64_t nh, want;
    if (n_pos > (uint64_t)INT64_MAX || __builtin_mul_overflow(nl * kvd, n_pos, &nh) ||
        __builtin_mul_overflow(nh, 4, &want) || __builtin_add_overflow(want, KV_HEAD + 32, &want)) {
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
                      "the snapshot was made by another model/lane/mode/KV dtype/rope configuration "
                      "(identity %.16s..., this engine %.16s...)",
                      (const char *)buf + 8, rt->identity);
        goto out;
    }
    if (nl != (uint64_t)rt->arch.n_layers || kvd != (uint64_t)(rt->arch.n_kv_heads * rt->arch.head_dim)) {
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
    k = malloc((size_t)nh * 2 + 2), v = malloc((size_t)nh * 2 + 2);
    if (!k || !v) {
        st = fp4_fail(err, FP4_ERR_NOMEM, path, NULL, "alloc", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nh; i++)
        k[i] = fp4_rd_le16(buf + KV_HEAD + 2 * i), v[i] = fp4_rd_le16(buf + KV_HEAD + 2 * (nh + i));
    if ((st = rt->be->kv_write(rt->be_state, seq, (int64_t)n_pos, k, v))) {
        st = fp4_fail(err, st, path, NULL, "kv.write", "cannot write the cache into the %s backend",
                      rt->be->name);
        goto out;
    }
    fp4_rt_seq_set_pos(rt, seq, (int64_t)n_pos);
out:
    free(buf), free(k), free(v);
    return st;
}
