/* mem_plan.c — the CPU engine's memory plan, the twin of the CUDA backend's (cuda/step/step.cu): what
 * fp4_rt_create will allocate on the host for an n_ctx, computed from the architecture alone with
 * overflow-checked arithmetic before anything is allocated, and refused (FP4_ERR_NOMEM, rule
 * "cpu.memory-plan", the plan in the message) when it is above the cap: 3/4 of the physical
 * memory (sysconf), or $FP4LANE_CPU_MEM_LIMIT bytes, read here and nowhere else. Lazily
 * committed allocations would otherwise let a long --ctx build its RoPE table and touch its cache
 * until the host runs out, long after the request could have been refused. The mapped weights
 * are the model's (already open), not the engine's: not in the plan. */
#include "backend/backend.h"
#include "cpu/cpu_impl.h"
#include "format/pinned.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLAN_FRACTION_NUM 3 /* of the physical memory, when no limit is given */
#define PLAN_FRACTION_DEN 4

/* a * b + c, or UINT64_MAX on overflow */
static uint64_t mad(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) return UINT64_MAX;
    return r;
}

static fp4_status plan_cap(uint64_t *cap, const char **why, fp4_error *err) {
    const char *lim = getenv("FP4LANE_CPU_MEM_LIMIT");
    if (lim && *lim) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(lim, &end, 10);
        if (*end || errno || *lim == '-')
            return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "cpu.memory-plan",
                            "FP4LANE_CPU_MEM_LIMIT=%.40s: expected a number of bytes", lim);
        *cap = v, *why = "FP4LANE_CPU_MEM_LIMIT";
        return FP4_OK;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    *cap = pages > 0 && psz > 0
               ? mad((uint64_t)pages, (uint64_t)psz, 0) / PLAN_FRACTION_DEN * PLAN_FRACTION_NUM
               : UINT64_MAX;
    *why = "3/4 of the physical memory; FP4LANE_CPU_MEM_LIMIT=BYTES sets another cap";
    return FP4_OK;
}

fp4_status fp4_rt_cpu_plan(const fp4_arch *a, int64_t n_ctx, int32_t n_slots, int64_t max_cols,
                           int64_t max_logit_cols, int n_threads, fp4_rt_mem_plan *p, fp4_error *err) {
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "cpu");
    const uint64_t H = (uint64_t)a->hidden, D = (uint64_t)a->head_dim,
                   qd = (uint64_t)(a->n_heads * a->head_dim), kvd = (uint64_t)fp4_arch_kv_dim(a),
                   F = (uint64_t)a->ffn, V = (uint64_t)a->vocab, L = (uint64_t)a->n_layers,
                   ctx = (uint64_t)n_ctx, mc = (uint64_t)max_cols;
    /* the RoPE table (cos and sin, n_ctx x D/2 floats each) and the norm/bias vectors widened */
    p->weights_bytes = mad(ctx, D * 4, mad(L, (2 * H + qd + 2 * kvd + 2 * D) * 4, H * 4));
    /* latent attention: kv_b widened to f32 per layer, with W_UK transposed (mla.c) */
    if (a->kv_lora_rank > 0)
        p->weights_bytes = mad(L,
                               (uint64_t)(a->n_heads * (2 * a->qk_nope_dim + a->v_head_dim)) *
                                   (uint64_t)a->kv_lora_rank * 4,
                               p->weights_bytes);
    /* K and V, F16: slots x (each layer's rows: n_ctx, or a local layer's ring) x fp4_arch_kv_dim */
    uint64_t rows = 0;
    for (int64_t l = 0; l < a->n_layers; l++) {
        const int64_t ring = fp4_rt_kv_ring(a, l, n_ctx, max_cols);
        rows = mad(1, rows, ring ? 2 * (uint64_t)ring : ctx);
    }
    p->kv_bytes = mad(mad((uint64_t)n_slots, rows, 0), kvd * 4, 0);
    if (a->sliding_window) p->weights_bytes = mad(ctx, D * 4, p->weights_bytes); /* local RoPE table */
    /* the step's columns (x, h, q, k, v, o, t, g, u: step_cpu.c), the attention's per-thread
     * scores and lanes, the host greedy logits rows, the column table */
    const uint64_t wide = H > qd ? H : qd, hb = FP4_ATTEND_MAX_HEADS;
    uint64_t sc = mad(mc, (2 * H + wide + 2 * qd + 2 * kvd + 2 * F) * 4, 0);
    sc = mad((uint64_t)n_threads, mad(ctx, hb * 4, FP4P_LANES * D * hb * 4), sc);
    sc = mad((uint64_t)max_logit_cols, V * 4, mad(mc, 64, sc));
    p->scratch_bytes = sc;
    p->total_bytes = mad(1, p->weights_bytes, mad(1, p->kv_bytes, p->scratch_bytes));
    const char *why;
    fp4_status st = plan_cap(&p->available_bytes, &why, err);
    if (st) return st;
    const double g = 1073741824.0;
    if (p->weights_bytes == UINT64_MAX || p->kv_bytes == UINT64_MAX || p->total_bytes == UINT64_MAX)
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "cpu.memory-plan",
                        "the engine's memory for %lld positions x %d sequences overflows 64 bits; use a "
                        "shorter --ctx or fewer sequences",
                        (long long)n_ctx, n_slots);
    if (p->total_bytes > p->available_bytes)
        return fp4_fail(
            err, FP4_ERR_NOMEM, NULL, NULL, "cpu.memory-plan",
            "the engine does not fit in host memory: tables %.3f GiB + KV cache %.3f GiB + scratch "
            "%.3f GiB = %.3f GiB for %lld positions x %d sequences, %.3f GiB allowed (%s); nothing "
            "was allocated: use a shorter --ctx or fewer sequences",
            p->weights_bytes / g, p->kv_bytes / g, p->scratch_bytes / g, p->total_bytes / g, (long long)n_ctx,
            n_slots, p->available_bytes / g, why);
    return FP4_OK;
}
