/* rt.c — the engine: arch → routes → bind → backend (CPU here, CUDA through dlopen), sequences
 * with their positions, and the step that splits a batch into backend calls. */
#include "runtime/rt_impl.h"
#include "format/argmax.h"
#include "format/pinned.h"
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RT_DEFAULT_CTX 4096
#define RT_MAX_COLS 64 /* columns per backend call unless the backend asks for more (step_cols) */
#define RT_MAX_STEP_COLS 4096   /* ... and the most it may ask for                               */
#define RT_MAX_LOGIT_COLS 64    /* columns of one backend call that want logits                  */
#define RT_MAX_SEQS 4096

/* the projection slots by name (the others are vectors, or llama.cpp's 3-D kv_b halves): by slot, so
 * a slot added to the enum cannot shift a name onto a norm */
static const char *const proj_slot_names[FP4_LW_COUNT_] = {
    [FP4_LW_Q] = "q",
    [FP4_LW_K] = "k",
    [FP4_LW_V] = "v",
    [FP4_LW_O] = "o",
    [FP4_LW_GATE] = "gate",
    [FP4_LW_UP] = "up",
    [FP4_LW_DOWN] = "down",
    [FP4_LW_Q_A] = "q_a",
    [FP4_LW_KV_A] = "kv_a",
    [FP4_LW_KV_B] = "kv_b",
    [FP4_LW_SH_GATE] = "shexp_gate",
    [FP4_LW_SH_UP] = "shexp_up",
    [FP4_LW_SH_DOWN] = "shexp_down",
};

/* dlopen libfp4lane_cuda.so: opts->cuda_lib, $FP4LANE_CUDA_LIB, beside the executable, the loader's path */
static fp4_status load_cuda(fp4_rt *rt, fp4_error *err) {
    char tried[768] = "", path[PATH_MAX];
    const char *cands[4] = {rt->opts.cuda_lib, getenv("FP4LANE_CUDA_LIB"), NULL, FP4_RT_CUDA_LIBNAME};
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    char beside[PATH_MAX + 32];
    if (n > 0) {
        path[n] = 0;
        char *sl = strrchr(path, '/');
        if (sl) {
            *sl = 0;
            snprintf(beside, sizeof beside, "%s/%s", path, FP4_RT_CUDA_LIBNAME);
            cands[2] = beside;
        }
    }
    const char *why = "";
    for (int i = 0; i < 4; i++) {
        if (!cands[i] || !cands[i][0]) continue;
        size_t l = strlen(tried);
        snprintf(tried + l, sizeof tried - l, "%s%s", l ? ", " : "", cands[i]);
        void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            why = dlerror();
            if (i < 2) break; /* an explicit path that does not load is the answer */
            continue;
        }
        fp4_rt_backend_entry entry;
        *(void **)&entry = dlsym(h, FP4_RT_CUDA_ENTRY);
        const fp4_rt_backend_ops *ops = entry ? entry(FP4_RT_BACKEND_ABI) : NULL;
        if (!ops || ops->abi != FP4_RT_BACKEND_ABI || !ops->name || !ops->route || !ops->create ||
            !ops->destroy || !ops->step || !ops->kv_read || !ops->kv_write) {
            dlclose(h);
            return fp4_fail(err, FP4_ERR_NO_DEVICE, cands[i], NULL, "rt.cuda-abi",
                            "%s does not provide %s for backend ABI %u (a library of another build: "
                            "rebuild it with `make cuda`, or use --device cpu)",
                            cands[i], FP4_RT_CUDA_ENTRY, FP4_RT_BACKEND_ABI);
        }
        rt->dl = h;
        rt->be = ops;
        return FP4_OK;
    }
    return fp4_fail(err, FP4_ERR_NO_DEVICE, NULL, NULL, "rt.cuda-missing",
                    "--device cuda needs %s (build it with `make cuda`; tried: %s; %s); or use --device cpu",
                    FP4_RT_CUDA_LIBNAME, tried, why);
}

static fp4_act_precision model_act(const fp4_model *m) {
    return fp4_model_act_precision(m);
}

void fp4_rt_free(fp4_rt *rt) {
    if (!rt) return;
    if (rt->be && rt->be_state) rt->be->destroy(rt->be_state);
    if (rt->dl) dlclose(rt->dl);
    free(rt->seq_lo), free(rt->rope_cos_local), free(rt->rope_sin_local);
    free(rt->seq_pos), free(rt->cols), free(rt->glg), free(rt->rope_cos), free(rt->rope_sin), free(rt->vec);
    free(rt->lvec);
    fp4_rt_bound_free(&rt->b);
    free(rt);
}

/* per-projection routes of the chosen backend (every layer checked); the summary string is
 * layer 0's slots grouped by route, then the head */
static fp4_status check_routes(fp4_rt *rt, fp4_error *err) {
    const fp4_arch *a = &rt->arch;
    const char *r0[FP4_LW_COUNT_] = {0};
    for (int64_t L = 0; L < a->n_layers; L++)
        for (int s = 0; s < FP4_LW_COUNT_; s++) {
            if (!proj_slot_names[s]) continue;
            const fp4_tensor *w = rt->b.layer[L * FP4_LW_COUNT_ + s];
            if (!w) continue; /* a MoE layer's MLP (below) */
            const char *r = rt->be->route(w, rt->opts.mode);
            if (!r) {
                const int other = rt->be->route(w, rt->opts.mode == FP4_MODE_EXACT ? FP4_MODE_NATIVE
                                                                                   : FP4_MODE_EXACT) != NULL;
                return fp4_fail(
                    err, FP4_ERR_REFUSED_ROUTE, NULL, w->name, "route.tensor",
                    "no %s route for this tensor in %s mode (n_in = %lld, type %d); nearest allowed: %s",
                    rt->be->name, rt->opts.mode == FP4_MODE_EXACT ? "exact" : "native", (long long)w->ne[0],
                    (int)w->type,
                    other ? (rt->opts.mode == FP4_MODE_EXACT ? "--mode native" : "--mode exact")
                          : "--device cpu");
            }
            if (L == 0) r0[s] = r;
        }
    /* every router and expert too (a MoE layer's GATE/UP/DOWN slots are NULL) */
    const int64_t nmoe = rt->b.moe ? a->n_layers * FP4_MOE_STRIDE(a->n_experts) : 0;
    for (int64_t i = 0; i < nmoe; i++) {
        const fp4_tensor *w = rt->b.moe[i];
        if (w && !rt->be->route(w, rt->opts.mode))
            return fp4_fail(
                err, FP4_ERR_REFUSED_ROUTE, NULL, w->name, "route.tensor",
                "no %s route for this tensor in %s mode (n_in = %lld, type %d); nearest allowed: %s",
                rt->be->name, rt->opts.mode == FP4_MODE_EXACT ? "exact" : "native", (long long)w->ne[0],
                (int)w->type, rt->opts.mode == FP4_MODE_EXACT ? "--mode native" : "--device cpu");
    }
    const char *hr = rt->be->route(rt->b.head, rt->opts.mode);
    if (!hr)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, rt->b.head->name, "route.tensor",
                        "no %s route for the LM head in %s mode", rt->be->name,
                        rt->opts.mode == FP4_MODE_EXACT ? "exact" : "native");
    char *p = rt->routes;
    size_t left = sizeof rt->routes;
    int first = 1;
    for (int s = 0; s < FP4_LW_COUNT_; s++) {
        if (!r0[s]) continue;
        int n = snprintf(p, left, "%s%s", first ? "" : ",", proj_slot_names[s]);
        p += n, left -= (size_t)n;
        int t = s + 1;
        while (t < FP4_LW_COUNT_ && !r0[t])
            t++;
        first = 0;
        if (t == FP4_LW_COUNT_ || strcmp(r0[t], r0[s])) {
            n = snprintf(p, left, ": %s; ", r0[s]);
            p += n, left -= (size_t)n;
            first = 1;
        }
    }
    for (int64_t L = 0; nmoe && L < a->n_layers; L++) {
        const fp4_tensor *const *mw = rt->b.moe + L * FP4_MOE_STRIDE(a->n_experts);
        if (!mw[FP4_MOE_ROUTER]) continue;
        int n =
            snprintf(p, left, "router: %s; experts: %s; ", rt->be->route(mw[FP4_MOE_ROUTER], rt->opts.mode),
                     rt->be->route(mw[FP4_MOE_AT(0, FP4_MOE_GATE)], rt->opts.mode));
        if (n > 0 && (size_t)n < left) p += n, left -= (size_t)n;
        break;
    }
    int nh = snprintf(p, left, "head: %s", hr);
    if (a->n_nextn > 0 && nh > 0 && (size_t)nh < left) /* said wherever the routes are */
        snprintf(p + nh, left - (size_t)nh, "; mtp: %d layer(s) in the file, not run", (int)a->n_nextn);
    return FP4_OK;
}

static int is_vec_slot(int slot) {
    return slot == FP4_LW_ATTN_NORM || slot == FP4_LW_FFN_NORM || slot == FP4_LW_Q_NORM ||
           slot == FP4_LW_ATTN_POST_NORM || slot == FP4_LW_FFN_POST_NORM || slot == FP4_LW_K_NORM ||
           slot == FP4_LW_Q_BIAS || slot == FP4_LW_K_BIAS || slot == FP4_LW_V_BIAS ||
           slot == FP4_LW_Q_A_NORM || slot == FP4_LW_KV_A_NORM || slot == FP4_LW_EXP_BIAS;
}
static int64_t n_values(const fp4_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++)
        n *= t->ne[i];
    return n;
}

/* Gemma 3's HF norms hold w for the gain 1 + w: the gain, one f32 add, as transformers' f32
 * `1.0 + weight.float()` (llama.cpp's converter stores the gain itself) */
static void shift_norm(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        p[i] = fp4p_add(1.0f, p[i]);
}

/* norm weights and biases widened to f32 once (exact), for every backend; vec[0..H) is output_norm */
static fp4_status widen_vectors(fp4_rt *rt, fp4_error *err) {
    const int64_t nslot = rt->arch.n_layers * FP4_LW_COUNT_;
    int64_t total = rt->arch.hidden;
    for (int64_t i = 0; i < nslot; i++)
        if (is_vec_slot((int)(i % FP4_LW_COUNT_)) && rt->b.layer[i]) total += n_values(rt->b.layer[i]);
    rt->vec = malloc(sizeof(float) * (size_t)total);
    rt->lvec = calloc((size_t)nslot, sizeof *rt->lvec);
    if (!rt->vec || !rt->lvec) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    const fp4_tensor *t = rt->b.out_norm;
    fp4_status st = fp4_tensor_dequant_rows(t, 0, 1, rt->vec);
    if (rt->b.norm_shift) shift_norm(rt->vec, rt->arch.hidden);
    float *p = rt->vec + rt->arch.hidden;
    for (int64_t i = 0; !st && i < nslot; i++) {
        if (!is_vec_slot((int)(i % FP4_LW_COUNT_)) || !(t = rt->b.layer[i])) continue;
        st = fp4_tensor_dequant_rows(t, 0, t->n_dims > 1 ? t->ne[1] : 1, p);
        const int bias = i % FP4_LW_COUNT_ >= FP4_LW_Q_BIAS && i % FP4_LW_COUNT_ <= FP4_LW_V_BIAS;
        if (rt->b.norm_shift && !bias) shift_norm(p, n_values(t));
        rt->lvec[i] = p;
        p += n_values(t);
    }
    return st ? fp4_fail(err, st, NULL, t->name, "rt.widen", "cannot widen this vector to f32") : FP4_OK;
}

/* The CPU backend reads NVFP4 weights as canonical rows: a model opened with FP4_LOAD_DEFER_REPACK
 * (llama.cpp blocks left as the file holds them, for the CUDA upload) is refused by name. */
static fp4_status cpu_canonical(const fp4_model *m, fp4_error *err) {
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (t->type == FP4_TYPE_NVFP4_E2M1 && t->nvfp4.packing != FP4_PACK_CANONICAL)
            return fp4_fail(
                err, FP4_ERR_UNSUPPORTED, NULL, t->name, "rt.deferred",
                "the model was opened with FP4_LOAD_DEFER_REPACK (llama.cpp blocks not repacked): "
                "the CPU backend needs it opened without the flag");
    }
    return FP4_OK;
}

/* Gemma 3's local layers: their own rope base, no scaling, no frequency factors */
static fp4_status local_rope(fp4_rt *rt, fp4_error *err) {
    if (!rt->arch.sliding_window) return FP4_OK;
    fp4_arch la = rt->arch;
    la.rope_theta = la.rope_local_theta;
    la.rope_scaling = FP4_ROPE_NONE;
    fp4_status st = fp4_rt_rope_table(&la, rt->n_ctx, NULL, &rt->rope_cos_local, &rt->rope_sin_local);
    return st ? fp4_fail(err, st, NULL, NULL, "rt.rope", "cannot build the local layers' RoPE table")
              : FP4_OK;
}

fp4_status fp4_rt_kv_window_held(const fp4_rt *rt, int32_t seq, int64_t n_pos, const char *path,
                                 fp4_error *err) {
    const int64_t need =
        rt->arch.sliding_window > 0 && n_pos > rt->arch.sliding_window ? n_pos - rt->arch.sliding_window : 0;
    if (rt->seq_lo[seq] > need)
        return fp4_fail(err, FP4_ERR_LIMIT, path, NULL, "kv.window",
                        "sequence %d was rolled back below what its local layers' rings hold (position %lld "
                        "on): a snapshot at %lld cannot hold the last %lld positions",
                        seq, (long long)rt->seq_lo[seq], (long long)n_pos,
                        (long long)rt->arch.sliding_window);
    return FP4_OK;
}

fp4_status fp4_rt_create(const fp4_model *m, const fp4_rt_opts *opts, fp4_rt **out, fp4_error *err) {
    fp4_error_clear(err);
    if (!m || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    fp4_rt_opts o = opts ? *opts : (fp4_rt_opts){0};
    if (o.mode != FP4_MODE_EXACT && o.mode != FP4_MODE_NATIVE)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.opts", "unknown mode %d", (int)o.mode);
    if (o.device != FP4_DEVICE_CPU && o.device != FP4_DEVICE_CUDA)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.opts", "unknown device %d", (int)o.device);
    if (o.kv_dtype != FP4_KV_F16)
        return fp4_fail(err, FP4_ERR_UNSUPPORTED, NULL, NULL, "rt.opts", "KV dtype %d: only F16",
                        (int)o.kv_dtype);
    if (o.max_seqs <= 0) o.max_seqs = 1;
    if (o.max_seqs > RT_MAX_SEQS)
        return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "rt.opts", "max_seqs %d is above %d", o.max_seqs,
                        RT_MAX_SEQS);
    if (o.n_threads < 1) o.n_threads = 1;
    if (o.n_threads > FP4_MAX_THREADS) o.n_threads = FP4_MAX_THREADS;
    if (o.n_ctx < 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.opts", "n_ctx %lld", (long long)o.n_ctx);

    /* 1. the run-level route, before anything is read */
    fp4_route_key key = {fp4_rt_model_lane(m), model_act(m), o.mode, o.device, o.drafting != 0};
    char msg[400];
    if (fp4_route_check(&key, NULL, msg, sizeof msg))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.refused", "%s", msg);
    /* FP8 layers of another lane's model (ModelOpt MIXED_PRECISION) need the fp8 lane's route too */
    const fp4_tensor *fp8_t = NULL;
    for (int64_t i = 0; i < fp4_model_n_tensors(m) && !fp8_t; i++)
        if (fp4_model_tensor(m, i)->type == FP4_TYPE_F8_E4M3FN) fp8_t = fp4_model_tensor(m, i);
    fp4_route_key key8 = {FP4_LANE_FP8, FP4_AP_A16, o.mode, o.device, o.drafting != 0};
    if (fp8_t && key.lane != FP4_LANE_FP8 && fp4_route_check(&key8, NULL, msg, sizeof msg))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, fp8_t->name, "route.refused", "%s", msg);
    if (fp8_t && fp8_t->fp8.block_scale && o.device == FP4_DEVICE_CUDA)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, fp8_t->name, "route.fp8-block-cuda",
                        "block-scaled FP8 weights (DeepSeek's weight_scale_inv) run on the CPU in this "
                        "version; use --device cpu");
    /* an engine whose lane the table qualifies for drafting is held batch-invariant whether or not
     * it drafts: a speculative run's target and the plain run it must equal bit for bit take the
     * same routes (CUDA: FP4_CUDA_TENSOR_INVARIANT; test_gpu_generate) */
    fp4_route_key keyd = key;
    keyd.drafting = 1;
    const int invariant = o.drafting || fp4_route_check(&keyd, NULL, NULL, 0) == FP4_OK;
    /* 2. the architecture (its refusals come before the engine allocates anything) */
    fp4_arch arch;
    fp4_status st = fp4_rt_model_arch(m, &arch, err);
    if (st) return st;
    /* the CUDA MoE step (src/cuda/step/moe.cuh): exact mode proven on a device (CPU bits); native mode
     * refused until its tolerance test passes there (FP4LANE_CUDA_UNPROVEN=1 runs it) */
    const char *unproven = getenv("FP4LANE_CUDA_UNPROVEN");
    /* the CUDA step's latent attention and DeepSeek's routing (mla.cuh, moe.cuh) stay refused until a
     * device run has proven them; FP4LANE_CUDA_UNPROVEN=1 lets the GPU tests run them before then */
    const int unproven_on = unproven && unproven[0] && strcmp(unproven, "0");
    if (arch.kv_lora_rank && o.device == FP4_DEVICE_CUDA && !unproven_on)
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.mla-cuda",
                        "multi-head latent attention (%s) runs on the CPU in this version; use --device cpu",
                        fp4_arch_family_name(arch.family));
    if (arch.n_experts && o.device == FP4_DEVICE_CUDA && o.mode == FP4_MODE_NATIVE &&
        !(unproven && unproven[0] && strcmp(unproven, "0")))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.moe-cuda",
                        "mixture of experts (%s, %lld experts, %lld per token) in native mode runs on "
                        "the CPU in this version; use --mode exact or --device cpu",
                        fp4_arch_family_name(arch.family), (long long)arch.n_experts,
                        (long long)arch.n_experts_used);
    /* the CUDA step's Gemma 3 stays refused until a device run has proven it; FP4LANE_CUDA_UNPROVEN=1
     * lets the GPU tests run it before then */
    if (arch.family == FP4_ARCH_GEMMA3 && o.device == FP4_DEVICE_CUDA &&
        !(unproven && unproven[0] && strcmp(unproven, "0")))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.gemma-cuda",
                        "Gemma 3 (sliding-window layers, GeGLU, four norms per block) runs on the CPU in "
                        "this version; use --device cpu");
    /* the split CUDA step (src/cuda/step/tp.cu) stays refused until a device run has proven it;
     * FP4LANE_CUDA_UNPROVEN=1 lets the GPU tests run it before then */
    if (o.tp > 1 && o.device == FP4_DEVICE_CUDA && !(unproven && unproven[0] && strcmp(unproven, "0")))
        return fp4_fail(err, FP4_ERR_REFUSED_ROUTE, NULL, NULL, "route.tp-cuda",
                        "--tp %d on cuda: the split CUDA step has not been proven on a device yet; use "
                        "--device cpu",
                        o.tp);
    fp4_rt *rt = calloc(1, sizeof *rt);
    if (!rt) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    rt->m = m;
    rt->opts = o;
    rt->arch = arch;
    /* 3. binding (descriptors only) */
    if ((st = fp4_rt_bind(m, &rt->arch, &rt->b, err))) goto fail;
    rt->n_ctx =
        o.n_ctx ? o.n_ctx : (rt->arch.n_ctx_train < RT_DEFAULT_CTX ? rt->arch.n_ctx_train : RT_DEFAULT_CTX);
    if (rt->n_ctx > rt->arch.n_ctx_train) {
        st = fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "rt.context",
                      "n_ctx %lld is past the model's context length %lld", (long long)rt->n_ctx,
                      (long long)rt->arch.n_ctx_train);
        goto fail;
    }
    /* 4. backend and per-tensor routes */
    if (o.device == FP4_DEVICE_CUDA) {
        if ((st = load_cuda(rt, err))) goto fail;
    } else if ((st = cpu_canonical(m, err))) {
        goto fail;
    } else
        rt->be = o.tp > 1 ? fp4_rt_cpu_tp_backend() : fp4_rt_cpu_backend();
    if ((st = check_routes(rt, err))) goto fail;
    /* the CPU engine's memory plan, before the RoPE table and the KV cache are allocated (a
     * device backend makes its own in create: the tables below are small beside it) */
    fp4_rt_mem_plan plan;
    if (o.device == FP4_DEVICE_CPU &&
        (st = fp4_rt_cpu_plan(&rt->arch, rt->n_ctx, o.max_seqs, RT_MAX_COLS, RT_MAX_LOGIT_COLS, o.n_threads,
                              &plan, err)))
        goto fail;
    /* 5. tables, sequences, upload */
    float ff[FP4_ARCH_MAX_HEAD_DIM / 2];
    if (rt->b.rope_freqs) fp4_tensor_dequant_rows(rt->b.rope_freqs, 0, 1, ff);
    if ((st = fp4_rt_rope_table(&rt->arch, rt->n_ctx, rt->b.rope_freqs ? ff : NULL, &rt->rope_cos,
                                &rt->rope_sin))) {
        st = fp4_fail(err, st, NULL, rt->b.rope_freqs ? rt->b.rope_freqs->name : NULL, "rt.rope",
                      "cannot build the RoPE table (frequency factors must be finite and > 0)");
        goto fail;
    }
    if ((st = local_rope(rt, err)) || (st = widen_vectors(rt, err))) goto fail;
    fp4_rt_model_desc d = {
        .arch = rt->arch,
        .mode = o.mode,
        .tok_embd = rt->b.tok_embd,
        .out_norm = rt->b.out_norm,
        .head = rt->b.head,
        .layer = rt->b.layer,
        .vec = rt->lvec,
        .out_norm_f32 = rt->vec,
        .rope_cos = rt->rope_cos,
        .rope_sin = rt->rope_sin,
        .attn_scale = fp4_rt_attn_scale(&rt->arch),
        .n_ctx = rt->n_ctx,
        .n_slots = o.max_seqs,
        .invariant = invariant,
        .n_threads = o.n_threads,
        .device = o.cuda_device,
        .on_plan = o.on_plan,
        .plan_user = o.plan_user,
        .moe = rt->b.moe,
        .rope_cos_local = rt->rope_cos_local,
        .rope_sin_local = rt->rope_sin_local,
        .tp = o.tp,
    };
    rt->max_cols = rt->be->step_cols ? rt->be->step_cols(&d) : RT_MAX_COLS;
    if (rt->max_cols < 1 || rt->max_cols > RT_MAX_STEP_COLS) rt->max_cols = RT_MAX_COLS;
    d.max_logit_cols = rt->max_cols < RT_MAX_LOGIT_COLS ? rt->max_cols : RT_MAX_LOGIT_COLS;
    rt->max_logit_cols = d.max_logit_cols;
    rt->seq_pos = malloc(sizeof *rt->seq_pos * (size_t)o.max_seqs);
    rt->seq_lo = calloc((size_t)o.max_seqs, sizeof *rt->seq_lo);
    rt->cols = malloc(sizeof *rt->cols * (size_t)rt->max_cols);
    for (int64_t L = 0; L < rt->arch.n_layers && !rt->ring; L++)
        rt->ring = fp4_rt_kv_ring(&rt->arch, L, rt->n_ctx, rt->max_cols);
    if (!rt->seq_pos || !rt->seq_lo || !rt->cols) {
        st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < o.max_seqs; i++)
        rt->seq_pos[i] = -1;
    if ((st = rt->be->create(&d, rt->max_cols, &rt->be_state, err))) goto fail;
    *out = rt;
    return FP4_OK;
fail:
    fp4_rt_free(rt);
    return st;
}

const fp4_arch *fp4_rt_arch(const fp4_rt *rt) {
    return rt ? &rt->arch : NULL;
}
int64_t fp4_rt_n_ctx(const fp4_rt *rt) {
    return rt ? rt->n_ctx : 0;
}
int64_t fp4_rt_vocab(const fp4_rt *rt) {
    return rt ? rt->arch.vocab : 0;
}
const char *fp4_rt_device_name(const fp4_rt *rt) {
    return rt && rt->be ? rt->be->name : "?";
}
const char *fp4_rt_routes(const fp4_rt *rt) {
    return rt ? rt->routes : "";
}

fp4_status fp4_rt_seq_open(fp4_rt *rt, int32_t *seq) {
    if (!rt || !seq) return FP4_ERR_INVALID_ARG;
    for (int32_t i = 0; i < rt->opts.max_seqs; i++)
        if (rt->seq_pos[i] < 0) {
            rt->seq_pos[i] = 0;
            rt->seq_lo[i] = 0;
            *seq = i;
            return FP4_OK;
        }
    return FP4_ERR_LIMIT;
}
/* a paged backend gets the blocks past pos back (kv_trim): the memory follows the tokens held */
static void seq_trim(fp4_rt *rt, int32_t seq, int64_t pos) {
    if (rt->be->kv_trim) rt->be->kv_trim(rt->be_state, seq, pos);
}
void fp4_rt_seq_close(fp4_rt *rt, int32_t seq) {
    if (!rt || seq < 0 || seq >= rt->opts.max_seqs || rt->seq_pos[seq] < 0) return;
    rt->seq_pos[seq] = -1;
    seq_trim(rt, seq, 0);
}
int64_t fp4_rt_kv_blocks(const fp4_rt *rt, int64_t *used, int64_t *total) {
    int64_t u = 0, block = 16; /* an unpaged backend: the positions held, counted in blocks of 16 */
    if (rt && rt->be->kv_blocks)
        block = rt->be->kv_blocks(rt->be_state, &u);
    else
        for (int32_t i = 0; rt && i < rt->opts.max_seqs; i++)
            u += rt->seq_pos[i] > 0 ? (rt->seq_pos[i] + block - 1) / block : 0;
    if (used) *used = u;
    if (total) *total = rt ? rt->opts.max_seqs * ((rt->n_ctx + block - 1) / block) : 0;
    return block;
}
int64_t fp4_rt_seq_pos(const fp4_rt *rt, int32_t seq) {
    return rt && seq >= 0 && seq < rt->opts.max_seqs ? rt->seq_pos[seq] : -1;
}
fp4_status fp4_rt_seq_truncate(fp4_rt *rt, int32_t seq, int64_t pos) {
    if (!rt || seq < 0 || seq >= rt->opts.max_seqs || rt->seq_pos[seq] < 0 || pos < 0 ||
        pos > rt->seq_pos[seq])
        return FP4_ERR_INVALID_ARG;
    /* a local layer's ring must still hold the window the step at pos reads */
    if (rt->arch.sliding_window > 0 && pos > 0 &&
        (pos - rt->arch.sliding_window + 1 > 0 ? pos - rt->arch.sliding_window + 1 : 0) < rt->seq_lo[seq])
        return FP4_ERR_LIMIT;
    rt->seq_pos[seq] = pos; /* the rows past pos are written again before any step reads them */
    seq_trim(rt, seq, pos);
    return FP4_OK;
}
int fp4_rt_drafting(const fp4_rt *rt) {
    return rt && rt->opts.drafting;
}
/* used by kv.c after a load */
void fp4_rt_seq_set_pos(fp4_rt *rt, int32_t seq, int64_t pos);
void fp4_rt_seq_set_pos(fp4_rt *rt, int32_t seq, int64_t pos) {
    rt->seq_pos[seq] = pos;
    /* a snapshot holds a local layer's last sliding_window positions (kv_read) */
    rt->seq_lo[seq] =
        pos > rt->arch.sliding_window && rt->arch.sliding_window > 0 ? pos - rt->arch.sliding_window : 0;
}

/* The columns of the next backend step from toks[0..n): at most max_cols, and it ends before the
 * column that would be the (max_logit_cols + 1)-th to want logits (max_logit_cols < 1 counts as 1);
 * at least 1 when n >= 1 and max_cols >= 1. */
int64_t fp4_rt_step_span(const fp4_rt_tok *toks, int64_t n, int64_t max_cols, int64_t max_logit_cols) {
    int64_t m = 0, nl = 0;
    if (max_logit_cols < 1) max_logit_cols = 1; /* so that a step always takes a column */
    for (; m < n && m < max_cols; m++) {
        if (toks[m].want_logits && nl == max_logit_cols) break;
        nl += toks[m].want_logits != 0;
    }
    return m;
}

/* A logits row of the step just made that holds NaN or an infinity stops the run here, naming
 * the sequence and position (NaN is never sampled: such a row would silently read as token 0).
 * rows: the host rows (NULL when a backend's step_greedy reduced them on the device and marked
 * such a row's token -1). */
static fp4_status check_finite(const fp4_rt *rt, int64_t m, const float *rows, const int32_t *tokens,
                               fp4_error *err) {
    const int64_t V = rt->arch.vocab;
    for (int64_t j = 0, k = 0; j < m; j++) {
        if (!rt->cols[j].want_logits) continue;
        const int64_t bad = rows ? fp4_rt_nonfinite_index(rows + k * V, V) : tokens[k] < 0 ? 0 : -1;
        char at[48] = "";
        if (bad >= 0 && rows) snprintf(at, sizeof at, " (the first at token id %lld)", (long long)bad);
        if (bad >= 0)
            return fp4_fail(err, FP4_ERR_NONFINITE, NULL, NULL, "rt.nonfinite",
                            "sequence %d, position %lld: the logits hold NaN or an infinity%s: the model's "
                            "arithmetic overflowed, nothing was sampled",
                            rt->cols[j].slot, (long long)rt->cols[j].pos, at);
        k++;
    }
    return FP4_OK;
}

/* fp4_rt_step (tokens NULL) and fp4_rt_step_greedy (logits NULL) */
static fp4_status rt_step(fp4_rt *rt, const fp4_rt_tok *toks, int64_t n, float *logits, int32_t *tokens,
                          fp4_error *err) {
    fp4_error_clear(err);
    if (!rt || !toks || n <= 0)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "no columns");
    /* validate everything first: nothing is computed for a step that would fail */
    int64_t *next = malloc(sizeof *next * (size_t)rt->opts.max_seqs);
    if (!next) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    memcpy(next, rt->seq_pos, sizeof *next * (size_t)rt->opts.max_seqs);
    fp4_status st = FP4_OK;
    int64_t n_logits = 0;
    for (int64_t i = 0; i < n && !st; i++) {
        const fp4_rt_tok *t = &toks[i];
        if (t->seq < 0 || t->seq >= rt->opts.max_seqs || rt->seq_pos[t->seq] < 0)
            st = fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.seq",
                          "column %lld: sequence %d is not open", (long long)i, t->seq);
        else if (t->token < 0 || t->token >= rt->arch.vocab)
            st = fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.token",
                          "column %lld: token id %d is outside [0, %lld)", (long long)i, t->token,
                          (long long)rt->arch.vocab);
        else if (next[t->seq] >= rt->n_ctx)
            st = fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "rt.context",
                          "sequence %d: position %lld is past the context length %lld", t->seq,
                          (long long)next[t->seq], (long long)rt->n_ctx);
        else
            next[t->seq]++;
        n_logits += t->want_logits != 0;
    }
    if (!st && n_logits && !logits && !tokens)
        st = fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "logits wanted but no buffer given");
    if (!st && n_logits && tokens && !rt->be->step_greedy && !rt->glg &&
        !(rt->glg = malloc(sizeof *rt->glg * (size_t)(rt->max_logit_cols * rt->arch.vocab))))
        st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    free(next);
    if (st) return st;
    float *lp = logits;
    for (int64_t i0 = 0, m = 0; i0 < n; i0 += m) {
        m = fp4_rt_step_span(toks + i0, n - i0, rt->max_cols, rt->max_logit_cols);
        int64_t nl = 0;
        for (int64_t j = 0; j < m; j++) {
            const fp4_rt_tok *t = &toks[i0 + j];
            rt->cols[j] = (fp4_rt_col){t->token, t->seq, rt->seq_pos[t->seq]++, t->want_logits != 0};
            if (rt->ring && rt->seq_pos[t->seq] - rt->ring > rt->seq_lo[t->seq])
                rt->seq_lo[t->seq] = rt->seq_pos[t->seq] - rt->ring;
            nl += t->want_logits != 0;
        }
        if (tokens && rt->be->step_greedy) {
            st = rt->be->step_greedy(rt->be_state, rt->cols, m, tokens, err);
            if (!st) st = check_finite(rt, m, NULL, tokens, err);
        } else if (tokens) {
            st = rt->be->step(rt->be_state, rt->cols, m, nl ? rt->glg : NULL, err);
            if (!st) st = check_finite(rt, m, rt->glg, NULL, err);
            for (int64_t k = 0; !st && k < nl; k++)
                tokens[k] = fp4_rt_greedy_argmax(rt->glg + k * rt->arch.vocab, rt->arch.vocab);
        } else {
            st = rt->be->step(rt->be_state, rt->cols, m, lp, err);
            if (!st && nl) st = check_finite(rt, m, lp, NULL, err);
        }
        if (st) {
            /* the cache of these columns is not trustworthy: close their sequences */
            for (int64_t j = 0; j < n; j++)
                fp4_rt_seq_close(rt, toks[j].seq);
            return st;
        }
        if (lp) lp += nl * rt->arch.vocab;
        if (tokens) tokens += nl;
    }
    return FP4_OK;
}

fp4_status fp4_rt_step(fp4_rt *rt, const fp4_rt_tok *toks, int64_t n, float *logits, fp4_error *err) {
    return rt_step(rt, toks, n, logits, NULL, err);
}

fp4_status fp4_rt_step_greedy(fp4_rt *rt, const fp4_rt_tok *toks, int64_t n, int32_t *tokens,
                              fp4_error *err) {
    fp4_error_clear(err);
    int64_t nl = 0;
    for (int64_t i = 0; toks && i < n; i++)
        nl += toks[i].want_logits != 0;
    if (nl && !tokens)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "rt.step", "tokens wanted but no buffer given");
    return rt_step(rt, toks, n, NULL, nl ? tokens : NULL, err);
}
