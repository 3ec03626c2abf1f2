/* ggml_moe.c — a mixture of experts in llama.cpp's GGUF form (layout gguf-ggml): the per-expert
 * matrices of a Hugging Face checkpoint (Qwen3-MoE's mlp.experts.E.{gate,up,down}_proj, Mixtral's
 * block_sparse_moe.experts.E.{w1,w3,w2}) become one 3-D tensor per layer and projection,
 * blk.L.ffn_{gate,up,down}_exps.weight, ggml shape {n_in, n_out, experts} (expert e's rows are the
 * e-th slab), as llama.cpp's converter stacks them (convert_hf_to_gguf.py, Qwen3MoeModel /
 * LlamaModel: experts merged in index order). The router keeps its name mapping in ggml_arch.c
 * (ffn_gate_inp). The bytes of a stacked entry are its members' in expert order (layout_write.c).
 *
 * NVFP4 experts: the slab of each expert in llama.cpp's type 40 (the dense repack, ggml_pack.c),
 * and each expert's own second-level scale in blk.L.ffn_X_exps.scale, an F32 vector of one value
 * per expert (1.0 for an expert whose scale2 is 1), the W4A4 input scales likewise in
 * .input_scale: the per-expert tensors llama.cpp's loader creates for every *_exps weight
 * (llama-model.cpp, "MoE expert weight scales", shape {n_expert}) and its build_lora_mm_id
 * multiplies into each selected expert's output. Every expert's scale2 is kept exactly (F32, as
 * the dense .scale), so the file reads back with the source's bits (read_gguf.c cuts the slab of
 * expert e into the logical tensor blk.L.ffn_X_exps.e.weight; fp4_ggml_moe_map gives those names
 * their Hugging Face ones for the way back).
 *
 * Not llama.cpp's form (FP4_ERR_UNSUPPORTED, rule ggml.moe naming the tensor or key, the plan left
 * untouched: ggml_arch.c then keeps every HF name and writes no llama.cpp architecture keys, as
 * for a family it does not map, so fp4lane still runs the file and llama.cpp does not mistake it):
 * experts not stored per expert as plain (F32/F16/BF16/K-quant) or NVFP4 matrices (NVFP4 experts of
 * DeepSeek-V3: llama.cpp's deepseek2 graph passes no .scale to build_moe_ffn), a missing expert
 * or one past the config's count, experts of different shapes or types, input scales on some
 * experts of a layer only, a Qwen3-MoE with dense layers (mlp_only_layers, decoder_sparse_step:
 * llama.cpp's qwen3moe makes every layer sparse) or with norm_topk_prob false (llama.cpp's qwen3moe
 * always renormalizes the top k). */
#include "layout_impl.h"
#include "fp4lane_runtime.h"
#include <stdio.h>
#include <stdlib.h>

static const char *const parts_gg[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

/* what a plan entry of an expert is: its matrix or one of its scale sidecars (layout_plan.c,
 * nvfp4_ggml: <module>.scale holds scale2, <module>.input_scale the input scale) */
enum { K_WEIGHT, K_SCALE, K_INPUT, K_N };
static const char *const kind_sfx[K_N] = {".weight", ".scale", ".input_scale"};

/* the HF spellings of an expert: mid, then the part names (gate, up, down) */
static const char *const mids[] = {"mlp.experts.", "block_sparse_moe.experts."};
static const char *const parts_hf[][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};

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

/* "<mid>E.<part><rest>" (layer-relative) -> E, part index (0 gate, 1 up, 2 down), *rest */
static int expert_rel(const char *s, long *E, int *part, const char **rest) {
    for (int m = 0; m < 2; m++) {
        const size_t ml = strlen(mids[m]);
        const char *t = s + ml;
        if (strncmp(s, mids[m], ml) || (*E = index_at(&t)) < 0) continue;
        for (int q = 0; q < 3; q++) {
            const size_t pl = strlen(parts_hf[m][q]);
            if (!strncmp(t, parts_hf[m][q], pl) && t[pl] == '.') return *part = q, *rest = t + pl, 1;
        }
    }
    return 0;
}

/* "model.layers.L.<mid>.experts.E.<part><kind suffix>" -> L, E, part index, kind */
static int expert_name(const char *n, long *L, long *E, int *part, int *kind) {
    const char *s = n + 13, *rest;
    if (strncmp(n, "model.layers.", 13) || (*L = index_at(&s)) < 0 || !expert_rel(s, E, part, &rest))
        return 0;
    for (int k = 0; k < K_N; k++)
        if (!strcmp(rest, kind_sfx[k])) return *kind = k, 1;
    return 0;
}

int fp4_ggml_moe_map(const char *in, char *out, size_t n, int to_gg, int mixtral) {
    long E;
    int q;
    const char *rest;
    if (to_gg)
        return expert_rel(in, &E, &q, &rest) && snprintf(out, n, "%s.%ld%s", parts_gg[q], E, rest) < (int)n;
    if (mixtral && !strncmp(in, "ffn_gate_inp.", 13)) /* the router in Mixtral's spelling */
        return snprintf(out, n, "block_sparse_moe.gate%s", in + 12) < (int)n;
    for (q = 0; q < 3; q++) {
        const size_t l = strlen(parts_gg[q]);
        const char *t = in + l + 1;
        if (strncmp(in, parts_gg[q], l) || in[l] != '.' || (E = index_at(&t)) < 0) continue;
        return snprintf(out, n, "%s%ld.%s.%s", mids[mixtral != 0], E, parts_hf[mixtral != 0][q], t) < (int)n;
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

/* one stacked entry from the weights of ix[(e * K_N) + K_WEIGHT], e < E (plan indexes) */
static fp4_status stack_one(plan *p, const fp4_arch *a, const int64_t *ix, int64_t E, long L, int q,
                            plan_entry *out, fp4_error *err) {
    const plan_entry *f = &p->e[ix[K_WEIGHT]];
    for (int64_t e = 0; e < E; e++) {
        const plan_entry *m = &p->e[ix[e * K_N + K_WEIGHT]];
        if (m->part == PART_GGML && a->family == FP4_ARCH_DEEPSEEK_V3)
            return moe_fail(err, m->name, "%s",
                            "llama.cpp's deepseek2 graph applies no per-expert .scale to its experts");
        if (m->part != PART_RAW && m->part != PART_GGML)
            return moe_fail(err, m->name, "%s",
                            "an expert neither plain nor llama.cpp's NVFP4 has no llama.cpp 3-D form");
        if (m->part != f->part || m->gguf_type != f->gguf_type || m->n_dims != 2 || m->ne[0] != f->ne[0] ||
            m->ne[1] != f->ne[1] || m->nbytes != f->nbytes)
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
        out->stack[e] = p->e[ix[e * K_N + K_WEIGHT]].src;
    return FP4_OK;
}

/* the experts' scale sidecars of kind k as one F32 vector of E (absent: 1.0, llama.cpp's and the
 * dense writer's convention for scale2; an input scale is on every expert or none); *made 0 when
 * no expert has one */
static fp4_status stack_vec(plan *p, const int64_t *ix, int64_t E, long L, int q, int k, plan_entry *out,
                            int *made, fp4_error *err) {
    int64_t have = 0;
    *made = 0;
    for (int64_t e = 0; e < E; e++)
        have += ix[e * K_N + k] >= 0;
    if (!have) return FP4_OK;
    if (have < E && k == K_INPUT)
        return moe_fail(err, p->e[ix[K_WEIGHT]].name, "%s",
                        "some experts of a layer have an input scale and some do not");
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "blk.%ld.%s%s", L, parts_gg[q], kind_sfx[k]);
    out->src = p->e[ix[K_WEIGHT]].src;
    out->part = PART_SCALAR;
    out->gguf_type = FP4_TYPE_F32;
    out->st_dtype = FP4_ST_F32;
    out->n_dims = 1;
    for (int d = 0; d < FP4_MAX_DIMS; d++)
        out->ne[d] = 1;
    out->ne[0] = E;
    out->nbytes = 4 * (uint64_t)E;
    out->stack_n = E;
    out->stack_values = malloc((size_t)E * sizeof *out->stack_values);
    if (!out->stack_values) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t e = 0; e < E; e++)
        out->stack_values[e] = ix[e * K_N + k] >= 0 ? p->e[ix[e * K_N + k]].value : 1.0f;
    *made = 1;
    return FP4_OK;
}

/* the first expert missing from slot s (layer s / 3, projection s % 3) */
static fp4_status missing(const int64_t *ix, int64_t s, int64_t E, fp4_error *err) {
    char what[96] = "";
    for (int64_t e = 0; e < E && !*what; e++)
        if (ix[e * K_N + K_WEIGHT] < 0)
            snprintf(what, sizeof what, "layer %lld: expert %lld of %s is missing", (long long)(s / 3),
                     (long long)e, parts_gg[s % 3]);
    return moe_fail(err, NULL, "%s", what);
}

fp4_status fp4_ggml_moe_stack(plan *p, const fp4_arch *a, fp4_error *err) {
    if (a->n_experts <= 0) return FP4_OK;
    fp4_status st = arch_ok(a, err);
    if (st) return st;
    const int64_t E = a->n_experts, n_slots = a->n_layers * 3, cells = n_slots * E * K_N;
    int64_t *ix = malloc((size_t)cells * sizeof *ix);
    plan_entry *made = calloc((size_t)(n_slots * K_N), sizeof *made);
    if (!ix || !made) st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    for (int64_t k = 0; k < cells && !st; k++)
        ix[k] = -1;
    for (int64_t i = 0; i < p->n && !st; i++) { /* the members, by (layer, projection, expert, kind) */
        long L, e;
        int q, k;
        if (!expert_name(p->e[i].name, &L, &e, &q, &k)) continue;
        if (L >= a->n_layers || e >= E)
            st = moe_fail(err, p->e[i].name, "%s", "an expert past the config's count");
        else
            ix[((L * 3 + q) * E + e) * K_N + k] = i; /* one name per index: digits without leading zeros */
    }
    int64_t n_made = 0;
    for (int64_t s = 0; s < n_slots && !st; s++) {
        const int64_t *sx = ix + s * E * K_N;
        int64_t have = 0, side = 0;
        for (int64_t e = 0; e < E; e++) {
            have += sx[e * K_N + K_WEIGHT] >= 0;
            side += (sx[e * K_N + K_SCALE] >= 0) + (sx[e * K_N + K_INPUT] >= 0);
        }
        if (!have && !side) continue;
        if (have < E) {
            st = missing(sx, s, E, err);
            break;
        }
        st = stack_one(p, a, sx, E, (long)(s / 3), (int)(s % 3), &made[n_made], err);
        if (!st) n_made++;
        for (int k = K_SCALE; k < K_N && !st; k++) {
            int one = 0;
            st = stack_vec(p, sx, E, (long)(s / 3), (int)(s % 3), k, &made[n_made], &one, err);
            n_made += one;
        }
    }
    if (!st) { /* the members leave the plan, the stacked entries join it */
        int64_t kept = 0;
        for (int64_t i = 0; i < p->n; i++) {
            long L, e;
            int q, k;
            if (!expert_name(p->e[i].name, &L, &e, &q, &k)) p->e[kept++] = p->e[i];
        }
        p->n = kept;
        for (int64_t k = 0; k < n_made && !st; k++) {
            plan_entry *e = fp4_plan_add(p, err);
            if (!e)
                st = FP4_ERR_NOMEM;
            else
                *e = made[k], made[k].stack = NULL, made[k].stack_values = NULL;
        }
    }
    for (int64_t k = 0; k < n_made; k++)
        free(made[k].stack), free(made[k].stack_values);
    free(made);
    free(ix);
    return st;
}
