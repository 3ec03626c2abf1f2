/* bind_moe.c — a mixture-of-experts layer's router and experts bound to the backend's run of
 * FP4_MOE_STRIDE(E) tensors per layer (backend.h), from each form a checkpoint spells them in:
 *   per expert (Qwen3-MoE, NVIDIA's NVFP4 checkpoints): model.layers.L.mlp.gate.weight,
 *     model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight;
 *   Mixtral: model.layers.L.block_sparse_moe.gate.weight, ...block_sparse_moe.experts.E.{w1,w3,w2}.weight;
 *   fused 3-D (transformers 5's in-memory form, some tools' files): model.layers.L.mlp.experts.gate_up_proj
 *     [E, 2 FE, H] (gate rows, then up rows) and ...down_proj [E, H, FE], plain types only;
 *   llama.cpp GGUF: blk.L.ffn_gate_inp.weight [H, E], blk.L.ffn_{gate,up,down}_exps.weight
 *     ([H, FE, E], [FE, H, E]; ne order), plain and K-quant types; type 40 (NVFP4), which the
 *     reader (read_gguf.c) gives per expert as blk.L.ffn_{gate,up,down}_exps.E.weight.
 * A 3-D tensor is cut into per-expert 2-D views (contiguous rows of the file's bytes, nothing
 * copied). The router must be F16/BF16/F32 [E rows, H]; every expert's shape is checked; a missing
 * expert, a router of the wrong shape and an expert count that disagrees with the tensors are
 * refused naming the tensor. Nothing is read but descriptors. */
#include "runtime/rt_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dense_type(fp4_type t) {
    return t == FP4_TYPE_F32 || t == FP4_TYPE_F16 || t == FP4_TYPE_BF16;
}

static fp4_status want2(const fp4_tensor *t, int64_t n_in, int64_t n_out, const char *what, fp4_error *err) {
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.moe",
                        "%s: expected [%lld out, %lld in], found %d dims [%lld, %lld]", what,
                        (long long)n_out, (long long)n_in, (int)t->n_dims,
                        (long long)(t->n_dims > 1 ? t->ne[1] : 1), (long long)t->ne[0]);
    if (t->type != FP4_TYPE_NVFP4_E2M1 && t->type != FP4_TYPE_Q4_K && t->type != FP4_TYPE_Q6_K &&
        t->type != FP4_TYPE_F8_E4M3FN && !dense_type(t->type))
        return fp4_fail(err, FP4_ERR_DTYPE, NULL, t->name, "bind.dtype",
                        "type %d is not a weight type the runtime projects", (int)t->type);
    return FP4_OK;
}

/* rows [r0, r0 + n) of a plain 3-D tensor as a 2-D view named "<name>#<e>" */
static fp4_status cut(const fp4_tensor *t, int64_t r0, int64_t n, int64_t e, fp4_tensor *v, char *name,
                      size_t cap, fp4_error *err) {
    size_t rb;
    if (t->type == FP4_TYPE_NVFP4_E2M1 || t->type == FP4_TYPE_F8_E4M3FN || !t->data ||
        fp4_type_row_size(t->type, t->ne[0], &rb))
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, t->name, "bind.moe",
                        "a 3-D expert tensor of type %d cannot be cut per expert (plain F16/BF16/F32 and "
                        "K-quants only; NVFP4 and FP8 experts are stored per expert)",
                        (int)t->type);
    if ((uint64_t)(r0 + n) * rb > t->nbytes)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.moe",
                        "expert %lld is past the tensor's bytes", (long long)e);
    *v = *t;
    snprintf(name, cap, "%s#%lld", t->name, (long long)e);
    v->name = name;
    v->n_dims = 2;
    v->ne[1] = n;
    v->ne[2] = v->ne[3] = 1;
    v->data = t->data + (uint64_t)r0 * rb;
    v->nbytes = (uint64_t)n * rb;
    return FP4_OK;
}

static fp4_status want3(const fp4_tensor *t, int64_t a, int64_t b, int64_t E, fp4_error *err) {
    if (t->n_dims != 3 || t->ne[0] != a || t->ne[1] != b || t->ne[2] != E)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, t->name, "bind.moe",
                        "expected ne [%lld, %lld, %lld experts], found %d dims [%lld, %lld, %lld]",
                        (long long)a, (long long)b, (long long)E, (int)t->n_dims, (long long)t->ne[0],
                        (long long)(t->n_dims > 1 ? t->ne[1] : 0), (long long)(t->n_dims > 2 ? t->ne[2] : 0));
    return FP4_OK;
}

typedef struct moe_ctx {
    const fp4_model *m;
    const fp4_arch *a;
    fp4_rt_bound *b;
    uint8_t *used;
    int64_t (*index_of)(const fp4_model *, const fp4_tensor *);
} moe_ctx;

static const fp4_tensor *take(moe_ctx *c, const char *name) {
    const fp4_tensor *t = fp4_model_find(c->m, name);
    if (t) c->used[c->index_of(c->m, t)] = 1;
    return t;
}

/* the views of one layer's 3-D tensors (fused HF or GGUF) */
static fp4_status bind_3d(moe_ctx *c, int64_t L, const fp4_tensor *gu, const fp4_tensor *gt,
                          const fp4_tensor *up, const fp4_tensor *dn, const fp4_tensor **out,
                          fp4_error *err) {
    const fp4_arch *a = c->a;
    const int64_t E = a->n_experts, H = a->hidden, FE = a->moe_ffn;
    fp4_status st;
    if (gu ? (st = want3(gu, H, 2 * FE, E, err))
           : (st = want3(gt, H, FE, E, err)) || (st = want3(up, H, FE, E, err)))
        return st;
    if ((st = want3(dn, FE, H, E, err))) return st;
    fp4_tensor *v = c->b->moe_views + (L * E) * 3;
    char *nm = c->b->moe_names + (L * E) * 3 * FP4_MAX_NAME;
    for (int64_t e = 0; e < E; e++, v += 3, nm += 3 * FP4_MAX_NAME) {
        if ((st = gu ? cut(gu, e * 2 * FE, FE, e, v, nm, FP4_MAX_NAME, err)
                     : cut(gt, e * FE, FE, e, v, nm, FP4_MAX_NAME, err)) ||
            (st = gu ? cut(gu, e * 2 * FE + FE, FE, e, v + 1, nm + FP4_MAX_NAME, FP4_MAX_NAME, err)
                     : cut(up, e * FE, FE, e, v + 1, nm + FP4_MAX_NAME, FP4_MAX_NAME, err)) ||
            (st = cut(dn, e * H, H, e, v + 2, nm + 2 * FP4_MAX_NAME, FP4_MAX_NAME, err)))
            return st;
        out[FP4_MOE_AT(e, FP4_MOE_GATE)] = v, out[FP4_MOE_AT(e, FP4_MOE_UP)] = v + 1;
        out[FP4_MOE_AT(e, FP4_MOE_DOWN)] = v + 2;
    }
    return FP4_OK;
}

/* llama.cpp's NVFP4 experts: read_gguf.c gives expert e of blk.L.ffn_X_exps.weight (type 40) as
 * blk.L.ffn_X_exps.e.weight, with its own scale2 */
static fp4_status bind_gg_experts(moe_ctx *c, int64_t L, const fp4_tensor **out, fp4_error *err) {
    static const char *const p3[3] = {"gate", "up", "down"};
    const int64_t E = c->a->n_experts, H = c->a->hidden, FE = c->a->moe_ffn;
    char name[FP4_MAX_NAME];
    fp4_status st;
    for (int64_t e = 0; e <= E; e++)
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "blk.%lld.ffn_%s_exps.%lld.weight", (long long)L, p3[p],
                     (long long)e);
            const fp4_tensor *t = e < E ? take(c, name) : fp4_model_find(c->m, name);
            if (e == E && t) /* an expert past the config's count */
                return fp4_fail(err, FP4_ERR_FORMAT, NULL, t->name, "bind.moe",
                                "expert %lld exists but the config says %lld experts", (long long)E,
                                (long long)E);
            if (e == E) continue;
            if (!t) {
                if (!e) snprintf(name, sizeof name, "blk.%lld.ffn_%s_exps.weight", (long long)L, p3[p]);
                return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, name, "bind.missing", "%s is missing", name);
            }
            if ((st = want2(t, p == 2 ? FE : H, p == 2 ? H : FE, "expert", err))) return st;
            out[FP4_MOE_AT(e, FP4_MOE_GATE + p)] = t;
        }
    return FP4_OK;
}

static const struct moe_form {
    const char *router, *expert, *part[3]; /* part: gate, up, down                             */
} forms[] = {
    {"model.layers.%lld.mlp.gate.weight",
     "model.layers.%lld.mlp.experts.%lld.%s.weight",
     {"gate_proj", "up_proj", "down_proj"}},
    {"model.layers.%lld.block_sparse_moe.gate.weight",
     "model.layers.%lld.block_sparse_moe.experts.%lld.%s.weight",
     {"w1", "w3", "w2"}},
};

static fp4_status bind_layer(moe_ctx *c, int64_t L, int gg, fp4_error *err) {
    const fp4_arch *a = c->a;
    const int64_t E = a->n_experts, H = a->hidden, FE = a->moe_ffn;
    const fp4_tensor **out = c->b->moe + L * FP4_MOE_STRIDE(E);
    char name[FP4_MAX_NAME], r_name[FP4_MAX_NAME];
    const struct moe_form *f = NULL;
    const fp4_tensor *r = NULL;
    fp4_status st;
    if (gg) {
        snprintf(r_name, sizeof r_name, "blk.%lld.ffn_gate_inp.weight", (long long)L);
        r = take(c, r_name);
    } else
        for (size_t i = 0; i < sizeof forms / sizeof forms[0] && !r; i++) {
            snprintf(r_name, sizeof r_name, forms[i].router, (long long)L);
            if ((r = take(c, r_name))) f = &forms[i];
        }
    if (!r)
        return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, gg ? r_name : "model.layers.N.mlp.gate.weight",
                        "bind.missing", "the router of layer %lld is missing (%s%s)", (long long)L,
                        gg ? r_name : "model.layers.N.mlp.gate.weight or ",
                        gg ? "" : "block_sparse_moe.gate.weight");
    if (!dense_type(r->type))
        return fp4_fail(err, FP4_ERR_DTYPE, NULL, r->name, "bind.moe",
                        "the router must be F16, BF16 or F32 (is type %d): routers are never quantized",
                        (int)r->type);
    if (r->n_dims != 2 || r->ne[0] != H || r->ne[1] != E)
        return fp4_fail(err, FP4_ERR_SHAPE, NULL, r->name, "bind.moe",
                        "the router must be [%lld experts, %lld] (the config's expert count), found %d dims "
                        "[%lld, %lld]",
                        (long long)E, (long long)H, (int)r->n_dims, (long long)(r->n_dims > 1 ? r->ne[1] : 1),
                        (long long)r->ne[0]);
    out[FP4_MOE_ROUTER] = r;
    if (gg) {
        static const char *const p3[3] = {"gate", "up", "down"};
        const fp4_tensor *t3[3];
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "blk.%lld.ffn_%s_exps.weight", (long long)L, p3[p]);
            t3[p] = take(c, name);
            if (!t3[p] && p == 0) return bind_gg_experts(c, L, out, err);
            if (!t3[p])
                return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, name, "bind.missing", "%s is missing", name);
        }
        return bind_3d(c, L, NULL, t3[0], t3[1], t3[2], out, err);
    }
    snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.gate_up_proj", (long long)L);
    const fp4_tensor *gu = f == &forms[0] ? take(c, name) : NULL;
    if (gu) {
        snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.down_proj", (long long)L);
        const fp4_tensor *dn = take(c, name);
        if (!dn) return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, name, "bind.missing", "%s is missing", name);
        return bind_3d(c, L, gu, NULL, NULL, dn, out, err);
    }
    for (int64_t e = 0; e < E; e++)
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, f->expert, (long long)L, (long long)e, f->part[p]);
            const fp4_tensor *t = take(c, name);
            if (!t)
                return fp4_fail(err, FP4_ERR_NOT_FOUND, NULL, name, "bind.missing",
                                "%s is missing (expert %lld of %lld, layer %lld)", name, (long long)e,
                                (long long)E, (long long)L);
            if ((st = want2(t, p == 2 ? FE : H, p == 2 ? H : FE, "expert", err))) return st;
            out[FP4_MOE_AT(e, FP4_MOE_GATE + p)] = t;
        }
    /* an expert past the config's count: the count disagrees with the tensors */
    snprintf(name, sizeof name, f->expert, (long long)L, (long long)E, f->part[0]);
    if (fp4_model_find(c->m, name))
        return fp4_fail(err, FP4_ERR_FORMAT, NULL, name, "bind.moe",
                        "expert %lld exists but the config says %lld experts", (long long)E, (long long)E);
    return FP4_OK;
}

fp4_status fp4_rt_bind_moe(const fp4_model *m, const fp4_arch *a, fp4_rt_bound *b, uint8_t *used, int gg,
                           int64_t (*index_of)(const fp4_model *, const fp4_tensor *), fp4_error *err) {
    const int64_t E = a->n_experts, nl = a->n_layers;
    b->moe = calloc((size_t)(nl * FP4_MOE_STRIDE(E)), sizeof *b->moe);
    b->moe_views = calloc((size_t)(nl * E * 3), sizeof *b->moe_views);
    b->moe_names = calloc((size_t)(nl * E * 3), FP4_MAX_NAME);
    if (!b->moe || !b->moe_views || !b->moe_names)
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    moe_ctx c = {m, a, b, used, index_of};
    for (int64_t L = 0; L < nl; L++) {
        if (!fp4_arch_layer_moe(a, L)) continue;
        fp4_status st = bind_layer(&c, L, gg, err);
        if (st) return st;
    }
    return FP4_OK;
}
