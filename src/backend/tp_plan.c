/* tp_plan.c — the shard plan of a split engine (tp_plan.h, docs/SCALE.md), one for both backends:
 * what rank r of n holds, the shard views and copies, and the checks that refuse a split before
 * anything is allocated. The CPU split (src/cpu/tp_step.c) and the CUDA split
 * (src/cuda/step/tp.cu) cut the same shards, so their exact-mode gathers replay the same sums. */
#include "fp4_impl.h"
#include "backend/tp_plan.h"
#include <stdlib.h>
#include <string.h>

static const char *route_of(fp4_tp_route_fn f, const fp4_tensor *w, fp4_mode mode) {
    const char *n = f ? f(w, mode) : NULL;
    return n ? n : "none";
}

tp_part fp4_tp_part(const fp4_arch *a, int r, int n) {
    const int64_t G = a->n_heads / a->n_kv_heads;
    tp_part p;
    p.kv0 = a->n_kv_heads * r / n, p.kv1 = a->n_kv_heads * (r + 1) / n;
    p.hq0 = p.kv0 * G, p.hq1 = p.kv1 * G;
    p.f0 = a->ffn * r / n, p.f1 = a->ffn * (r + 1) / n;
    p.v0 = a->vocab * r / n, p.v1 = a->vocab * (r + 1) / n;
    p.e0 = a->n_experts * r / n, p.e1 = a->n_experts * (r + 1) / n;
    return p;
}

static int is_nvfp4(const fp4_tensor *w) {
    return w->type == FP4_TYPE_NVFP4_E2M1;
}

/* bytes of one element of a plain tensor the row-parallel copy can slice (0: it cannot) */
static int64_t elem_bytes(const fp4_tensor *w) {
    switch (w->type) {
    case FP4_TYPE_F32:
        return 4;
    case FP4_TYPE_F16:
    case FP4_TYPE_BF16:
        return 2;
    case FP4_TYPE_F8_E4M3FN:
        return 1;
    default:
        return 0;
    }
}

/* a block-scaled FP8 weight's scale grid does not follow a split of its rows or columns */
static fp4_status no_fp8_blocks(const fp4_tensor *w, fp4_error *err) {
    if (w->type != FP4_TYPE_F8_E4M3FN || !w->fp8.block_scale) return FP4_OK;
    return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, w->name, "tp.route",
                    "a block-scaled FP8 weight (weight_scale_inv) is not split in this version; use --tp 1");
}

fp4_status fp4_tp_rows(const fp4_tensor *w, int64_t r0, int64_t r1, fp4_tensor *out, fp4_error *err) {
    const int64_t rows = fp4_rows_of(w->ne, w->n_dims);
    fp4_status bst = no_fp8_blocks(w, err);
    if (bst) return bst;
    if (w->n_dims != 2 || r0 < 0 || r1 < r0 || r1 > rows)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, w->name, "tp.route", "rows [%lld, %lld) of a %d-D tensor",
                        (long long)r0, (long long)r1, (int)w->n_dims);
    *out = *w;
    out->ne[1] = r1 - r0;
    if (is_nvfp4(w)) {
        if (w->nvfp4.packing != FP4_PACK_CANONICAL)
            return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, w->name, "tp.route", "a deferred type-40 view");
        out->nvfp4.payload += r0 * (w->nvfp4.n_in / 2);
        out->nvfp4.scales += r0 * (w->nvfp4.n_in / 16);
        out->nvfp4.n_out = r1 - r0;
        return FP4_OK;
    }
    const uint64_t rb = rows ? w->nbytes / (uint64_t)rows : 0;
    out->data += rb * (uint64_t)r0;
    out->nbytes = rb * (uint64_t)(r1 - r0);
    if (w->type == FP4_TYPE_F8_E4M3FN) {
        if (w->fp8.row_scale) out->fp8.row_scale += r0;
        out->fp8.n_out = r1 - r0;
    }
    return FP4_OK;
}

fp4_status fp4_tp_cols(const fp4_tensor *w, int64_t k0, int64_t k1, fp4_tensor *out, uint8_t **owned,
                       fp4_error *err) {
    *owned = NULL;
    fp4_status bst = no_fp8_blocks(w, err);
    if (bst) return bst;
    const int64_t rows = fp4_rows_of(w->ne, w->n_dims), n_in = w->ne[0], nk = k1 - k0;
    const int64_t eb = is_nvfp4(w) ? 0 : elem_bytes(w);
    if (w->n_dims != 2 || k0 < 0 || nk <= 0 || k1 > n_in || (is_nvfp4(w) ? (k0 % 16 || nk % 16) : !eb) ||
        (is_nvfp4(w) && w->nvfp4.packing != FP4_PACK_CANONICAL))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, w->name, "tp.route",
                        "input columns [%lld, %lld) of this tensor cannot be split (type %d)", (long long)k0,
                        (long long)k1, (int)w->type);
    *out = *w;
    out->ne[0] = nk;
    const int64_t rowb = is_nvfp4(w) ? nk / 2 + nk / 16 : nk * eb;
    uint8_t *buf = malloc((size_t)(rows * rowb) + 1);
    if (!buf) return fp4_fail(err, FP4_ERR_NOMEM, NULL, w->name, "alloc", "out of memory (a shard)");
    if (is_nvfp4(w)) {
        uint8_t *pay = buf, *sc = buf + rows * (nk / 2);
        for (int64_t r = 0; r < rows; r++) {
            memcpy(pay + r * (nk / 2), w->nvfp4.payload + r * (n_in / 2) + k0 / 2, (size_t)(nk / 2));
            memcpy(sc + r * (nk / 16), w->nvfp4.scales + r * (n_in / 16) + k0 / 16, (size_t)(nk / 16));
        }
        out->nvfp4.payload = pay, out->nvfp4.scales = sc, out->nvfp4.n_in = nk;
    } else {
        for (int64_t r = 0; r < rows; r++)
            memcpy(buf + r * rowb, w->data + (r * n_in + k0) * eb, (size_t)rowb);
        out->data = buf;
        out->nbytes = (uint64_t)(rows * rowb);
        if (w->type == FP4_TYPE_F8_E4M3FN) out->fp8.n_in = nk;
    }
    *owned = buf;
    return FP4_OK;
}

/* one row-parallel weight's split at [k_r, k_{r+1}) for every rank */
static fp4_status check_cols(const fp4_rt_model_desc *d, const fp4_tensor *w, const int64_t *k, int n,
                             fp4_tp_route_fn route_name, fp4_error *err) {
    const int exact = d->mode == FP4_MODE_EXACT;
    if (exact && !(is_nvfp4(w) && w->nvfp4.input_scale_inv == 0.0f))
        return fp4_fail(
            err, FP4_ERR_REFUSED_ROUTE, NULL, w->name, "tp.exact-route",
            "--tp %d in exact mode: a row-parallel projection on route %s cannot keep its pinned "
            "order across ranks (only NVFP4 A16 can: its super-block terms are gathered); use --mode "
            "native or --tp 1",
            n, route_of(route_name, w, d->mode));
    const int64_t align = exact ? FP4_QK_K : 16;
    for (int r = 0; r <= n; r++)
        if (k[r] % align || (r < n && k[r + 1] <= k[r]))
            return fp4_fail(
                err, FP4_ERR_REFUSED_ROUTE, NULL, w->name, exact ? "tp.exact-split" : "tp.route",
                "--tp %d: rank %d's input columns start at %lld, not on a %lld-value %s boundary; "
                "choose a --tp whose shards are multiples of %lld%s",
                n, r, (long long)k[r], (long long)align, exact ? "super-block" : "group", (long long)align,
                exact ? " (or --mode native)" : "");
    if (!is_nvfp4(w) && !elem_bytes(w))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, w->name, "tp.route",
                        "--tp %d: route %s is not split in this version", n,
                        route_of(route_name, w, d->mode));
    return FP4_OK;
}

fp4_status fp4_tp_check(const fp4_rt_model_desc *d, int n, fp4_tp_route_fn route_name, fp4_error *err) {
    const fp4_arch *a = &d->arch;
    if (n < 2 || n > FP4_TP_MAX_RANKS)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "tp.ranks", "--tp %d (2..%d)", n,
                        FP4_TP_MAX_RANKS);
    /* Gemma 3: its local layers' ring cache, GeGLU and extra norms; DeepSeek-V3: the latent cache and
     * the absorbed attention: not split yet */
    if (a->family == FP4_ARCH_GEMMA3 || a->family == FP4_ARCH_DEEPSEEK_V3)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "tp.arch",
                        "--tp %d: %s is not split in this version; use --tp 1", n,
                        a->family == FP4_ARCH_GEMMA3 ? "Gemma 3" : "DeepSeek-V3 (latent attention)");
    if (a->n_kv_heads % n)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "tp.heads",
                        "--tp %d does not divide the %lld KV heads (%lld query heads): the heads and the KV "
                        "cache are split by KV head",
                        n, (long long)a->n_kv_heads, (long long)a->n_heads);
    if (a->vocab < n)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "tp.vocab", "--tp %d is above the vocabulary",
                        n);
    int64_t ko[FP4_TP_MAX_RANKS + 1], kf[FP4_TP_MAX_RANKS + 1];
    for (int r = 0; r <= n; r++) {
        const tp_part p = fp4_tp_part(a, r < n ? r : n - 1, n);
        ko[r] = (r < n ? p.hq0 : p.hq1) * a->head_dim;
        kf[r] = r < n ? p.f0 : p.f1;
    }
    fp4_status st;
    for (int64_t L = 0; L < a->n_layers; L++) {
        const fp4_tensor *const *w = d->layer + L * FP4_LW_COUNT_;
        if ((st = check_cols(d, w[FP4_LW_O], ko, n, route_name, err))) return st;
        if (w[FP4_LW_DOWN] && (st = check_cols(d, w[FP4_LW_DOWN], kf, n, route_name, err))) return st;
    }
    return FP4_OK;
}
