/* ggml_moe.c — a mixture of experts in llama.cpp's GGUF form (layout gguf-ggml): the per-expert
 * matrices of a Hugging Face checkpoint (Qwen3-MoE's mlp.experts.E.{gate,up,down}_proj, Mixtral's
 * block_sparse_moe.experts.E.{w1,w3,w2}) become one 3-D tensor per layer and projection,
 * blk.L.ffn_{gate,up,down}_exps.weight, ggml shape {n_in, n_out, experts} (expert e's rows are the
 * e-th slab), as llama.cpp's converter stacks them (convert_hf_to_gguf.py, Qwen3MoeModel /
 * LlamaModel: experts merged in index order). The router keeps its name mapping in ggml_arch.c
 * (ffn_gate_inp). The bytes of a stacked entry are its members' in expert order (layout_write.c).
 *
 * Not llama.cpp's form (FP4_ERR_UNSUPPORTED, rule ggml.moe naming the tensor or key, the plan left
 * untouched: ggml_arch.c then keeps every HF name and writes no llama.cpp architecture keys, as
 * for a family it does not map, so fp4lane still runs the file and llama.cpp does not mistake it):
 * experts not stored per expert as plain (F32/F16/BF16/K-quant) matrices (NVFP4 experts: llama.cpp's
 * type 40 has no per-expert second-level scale in a 3-D tensor), a missing expert or one past the
 * config's count, experts of different shapes or types, a Qwen3-MoE with dense layers
 * (mlp_only_layers, decoder_sparse_step: llama.cpp's qwen3moe makes every layer sparse) or with
 * norm_topk_prob false (llama.cpp's qwen3moe always renormalizes the top k). */
#include "layout_impl.h"
#include "fp4lane_runtime.h"
#include <stdio.h>
#include <stdlib.h>

static const char *const parts_gg[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

/* a decimal index at s (digits only, no leading zero, at most 7 digits) followed by '.': its value
 * and the position after the '.', or -1 (so each index has one spelling) */
static long index_at(const char **s) {
    const char *p = *s;
    long v = 0;
    int d = 0;
    while (*p >= '0' && *p <= '9' && d < 8) v = v * 10 + (*p++ - '0'), d++;
    if (!d || d > 7 || *p != '.' || (d > 1 && **s == '0')) return -1;
    *s = p + 1;
    return v;
}

/* "model.layers.L.<mid>.experts.E.<part>.weight" -> L, E, part index (0 gate, 1 up, 2 down) */
static int expert_name(const char *n, long *L, long *E, int *part) {
    static const char *const mids[] = {"mlp.experts.", "block_sparse_moe.experts."};
    static const char *const parts[][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
    const char *s = n + 13;
    if (strncmp(n, "model.layers.", 13) || (*L = index_at(&s)) < 0) return 0;
    for (int m = 0; m < 2; m++) {
        const size_t ml = strlen(mids[m]);
        const char *t = s + ml;
        if (strncmp(s, mids[m], ml) || (*E = index_at(&t)) < 0) continue;
        for (int q = 0; q < 3; q++) {
            const size_t pl = strlen(parts[m][q]);
            if (!strncmp(t, parts[m][q], pl) && !strcmp(t + pl, ".weight")) return *part = q, 1;
        }
    }
    return 0;
}

static fp4_status moe_fail(fp4_error *err, const char *name, const char *fmt, const char *what) {
    return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, name, "ggml.moe", fmt, what);
}

/* llama.cpp's conditions on the architecture (see the file comment) */
static fp4_status arch_ok(const fp4_arch *a, fp4_error *err) {
    if (a->family != FP4_ARCH_QWEN3_MOE) return FP4_OK;
    for (int64_t L = 0; L < a->n_layers; L++)
        if (!fp4_arch_layer_moe(a, L))
            return moe_fail(err, NULL, "config.json: %s (llama.cpp's qwen3moe makes every layer sparse)",
                            "mlp_only_layers / decoder_sparse_step give a dense layer");
    if (!a->moe_norm_topk)
        return moe_fail(err, NULL, "config.json: %s (llama.cpp's qwen3moe always renormalizes the top k)",
                        "norm_topk_prob = false");
    return FP4_OK;
}

/* one stacked entry from the members at ix[0..E) (plan indexes) */
static fp4_status stack_one(plan *p, const int64_t *ix, int64_t E, long L, int q, plan_entry *out,
                            fp4_error *err) {
    const plan_entry *f = &p->e[ix[0]];
    for (int64_t e = 0; e < E; e++) {
        const plan_entry *m = &p->e[ix[e]];
        if (m->part != PART_RAW)
            return moe_fail(err, m->name, "%s",
                            "an NVFP4 expert has no llama.cpp 3-D form here "
                            "(write the experts unquantized or as K-quants)");
        if (m->gguf_type != f->gguf_type || m->n_dims != 2 || m->ne[0] != f->ne[0] || m->ne[1] != f->ne[1] ||
            m->nbytes != f->nbytes)
            return moe_fail(err, m->name, "%s", "the experts of a layer differ in shape or type");
    }
    *out = *f;
    snprintf(out->name, sizeof out->name, "blk.%ld.%s.weight", L, parts_gg[q]);
    out->n_dims = 3;
    out->ne[2] = E;
    out->nbytes = f->nbytes * (uint64_t)E;
    out->stack_n = E;
    out->stack = malloc((size_t)E * sizeof *out->stack);
    if (!out->stack) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t e = 0; e < E; e++)
        out->stack[e] = p->e[ix[e]].src;
    return FP4_OK;
}

fp4_status fp4_ggml_moe_stack(plan *p, const fp4_arch *a, fp4_error *err) {
    if (a->n_experts <= 0) return FP4_OK;
    fp4_status st = arch_ok(a, err);
    if (st) return st;
    const int64_t E = a->n_experts, slots = a->n_layers * 3 * E;
    int64_t *ix = malloc((size_t)slots * sizeof *ix);
    plan_entry *made = calloc((size_t)(a->n_layers * 3), sizeof *made);
    if (!ix || !made) st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t k = 0; k < slots && !st; k++)
        ix[k] = -1;
    for (int64_t i = 0; i < p->n && !st; i++) { /* the members, by (layer, projection, expert) */
        long L, e;
        int q;
        if (!expert_name(p->e[i].name, &L, &e, &q)) continue;
        if (L >= a->n_layers || e >= E)
            st = moe_fail(err, p->e[i].name, "%s", "an expert past the config's count");
        else
            ix[(L * 3 + q) * E + e] = i; /* one name per index: digits without leading zeros */
    }
    int64_t n_made = 0;
    for (int64_t s = 0; s < a->n_layers * 3 && !st; s++) {
        int64_t have = 0;
        for (int64_t e = 0; e < E; e++)
            have += ix[s * E + e] >= 0;
        if (!have) continue;
        if (have < E) {
            char what[96];
            for (int64_t e = 0; e < E; e++)
                if (ix[s * E + e] < 0) {
                    snprintf(what, sizeof what, "layer %lld: expert %lld of %s is missing",
                             (long long)(s / 3), (long long)e, parts_gg[s % 3]);
                    break;
                }
            st = moe_fail(err, NULL, "%s", what);
            break;
        }
        st = stack_one(p, ix + s * E, E, (long)(s / 3), (int)(s % 3), &made[n_made], err);
        if (!st) n_made++;
    }
    if (!st) { /* the members leave the plan, the stacked entries join it */
        int64_t kept = 0;
        for (int64_t i = 0; i < p->n; i++) {
            long L, e;
            int q;
            if (!expert_name(p->e[i].name, &L, &e, &q)) p->e[kept++] = p->e[i];
        }
        p->n = kept;
        for (int64_t k = 0; k < n_made && !st; k++) {
            plan_entry *e = fp4_plan_add(p, err);
            if (!e)
                st = FP4_ERR_NOMEM;
            else
                *e = made[k], made[k].stack = NULL;
        }
    }
    for (int64_t k = 0; k < n_made; k++)
        free(made[k].stack);
    free(made);
    free(ix);
    return st;
}
