/* routes.c — the run-level route table (docs/ROUTES.md): every combination of (weights lane,
 * activation precision, mode, device, drafting) is a row: a qualified route, or a refusal whose
 * message names the nearest allowed route. Checked at startup before a weight byte is read. */
#include "runtime/rt_impl.h"
#include <stdio.h>
#include <string.h>

enum { ANY = -1 };

/* one refusal, with and without drafting */
#define KQUANT_EXACT_CUDA                                                                                 \
    "kquant exact on cuda cannot be bit-identical to the CPU (the CUDA Q4_K/Q6_K kernels accumulate "    \
    "dequantized f32 values); use --mode native on cuda, or --mode exact on cpu"

static const struct route_row {
    int lane, act, mode, device, drafting;
    const char *name;    /* NULL: refused                                                     */
    const char *refusal; /* the message, naming what to use instead                           */
} route_rows[] = {
    /* speculative drafting (fp4_spec): the target's verify step must give each column the bits a
     * plain decode step gives it, so the accepted tokens and every logit are plain decoding's */
    {FP4_LANE_NVFP4, ANY, FP4_MODE_NATIVE, ANY, 1, NULL,
     "native NVFP4 speculative decode is unqualified (measured far below plain decode elsewhere); omit the "
     "draft model and use "
     "plain NVFP4 decode, or route speculative serving to the kquant lane"},
    {FP4_LANE_FP8, ANY, ANY, ANY, 1, NULL,
     "speculative decode on the fp8 lane is not qualified (no test holds its verify step to plain "
     "decoding's bits yet); omit --draft"},
    {FP4_LANE_DENSE, ANY, FP4_MODE_NATIVE, ANY, 1, NULL,
     "speculative decode on the dense lane needs --mode exact (its verify step is then bit-identical to "
     "plain decode); native dense kernels are not held batch-invariant: use --mode exact, or omit --draft"},
    {FP4_LANE_KQUANT, ANY, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 1, NULL, KQUANT_EXACT_CUDA},
    {FP4_LANE_KQUANT, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, 1, "cuda.kquant.native+draft", NULL},
    {FP4_LANE_KQUANT, ANY, ANY, FP4_DEVICE_CPU, 1, "cpu.kquant.q8_k+draft", NULL},
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, 1, "cpu.nvfp4.a16.exact+draft", NULL},
    {FP4_LANE_NVFP4, FP4_AP_NVFP4, FP4_MODE_EXACT, FP4_DEVICE_CPU, 1, "cpu.nvfp4.w4a4.exact+draft", NULL},
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 1, "cuda.nvfp4.a16.exact+draft", NULL},
    {FP4_LANE_NVFP4, FP4_AP_NVFP4, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 1, "cuda.nvfp4.w4a4.exact+draft", NULL},
    {FP4_LANE_DENSE, ANY, FP4_MODE_EXACT, FP4_DEVICE_CPU, 1, "cpu.dense.pinned+draft", NULL},
    {FP4_LANE_DENSE, ANY, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 1, "cuda.dense.pinned+draft", NULL},
    /* the kquant control lane on CUDA: its kernels accumulate dequantized f32 values, not the CPU's Q8_K dot
     */
    {FP4_LANE_KQUANT, ANY, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 0, NULL, KQUANT_EXACT_CUDA},
    {FP4_LANE_KQUANT, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, 0, "cuda.kquant.native", NULL},
    {FP4_LANE_KQUANT, ANY, ANY, FP4_DEVICE_CPU, 0, "cpu.kquant.q8_k", NULL},
    /* NVFP4 */
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CPU, 0, "cpu.nvfp4.a16.exact", NULL},
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 0, "cpu.nvfp4.a16.native", NULL},
    {FP4_LANE_NVFP4, FP4_AP_NVFP4, ANY, FP4_DEVICE_CPU, 0, "cpu.nvfp4.w4a4.exact", NULL},
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 0, "cuda.nvfp4.a16.exact", NULL},
    {FP4_LANE_NVFP4, FP4_AP_A16, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, 0, "cuda.nvfp4.a16.native", NULL},
    {FP4_LANE_NVFP4, FP4_AP_NVFP4, ANY, FP4_DEVICE_CUDA, 0, "cuda.nvfp4.w4a4.exact", NULL},
    /* the dense reference lane */
    {FP4_LANE_DENSE, ANY, FP4_MODE_EXACT, FP4_DEVICE_CPU, 0, "cpu.dense.pinned", NULL},
    {FP4_LANE_DENSE, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 0, "cpu.dense.native", NULL},
    {FP4_LANE_DENSE, ANY, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 0, "cuda.dense.pinned", NULL},
    {FP4_LANE_DENSE, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, 0, "cuda.dense.native", NULL},
    /* FP8 weights (E4M3 + f32 weight_scale), weight-only: a pinned dense dot, then the scale */
    {FP4_LANE_FP8, ANY, FP4_MODE_EXACT, FP4_DEVICE_CPU, 0, "cpu.fp8.dense.pinned", NULL},
    {FP4_LANE_FP8, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CPU, 0, "cpu.fp8.dense", NULL},
    {FP4_LANE_FP8, ANY, FP4_MODE_EXACT, FP4_DEVICE_CUDA, 0, "cuda.fp8.dense.pinned", NULL},
    {FP4_LANE_FP8, ANY, FP4_MODE_NATIVE, FP4_DEVICE_CUDA, 0, "cuda.fp8.dense", NULL},
};

static const char *const lane_names[FP4_LANE_COUNT_] = {"nvfp4", "kquant", "dense", "fp8"};
const char *fp4_rt_lane_name(fp4_rt_lane l) {
    return (unsigned)l < FP4_LANE_COUNT_ ? lane_names[l] : "?";
}

static int match(int row, int key) {
    return row == ANY || row == key;
}

fp4_status fp4_route_check(const fp4_route_key *k, const char **name, char *msg, size_t msg_size) {
    if (name) *name = NULL;
    if (msg && msg_size) msg[0] = 0;
    if (!k) return FP4_ERR_INVALID_ARG;
    const int drafting = k->drafting != 0;
    for (size_t i = 0; i < sizeof route_rows / sizeof route_rows[0]; i++) {
        const struct route_row *r = &route_rows[i];
        if (!match(r->lane, (int)k->lane) || !match(r->act, (int)k->act) || !match(r->mode, (int)k->mode) ||
            !match(r->device, (int)k->device) || r->drafting != drafting)
            continue;
        if (r->name) {
            if (name) *name = r->name;
            return FP4_OK;
        }
        if (msg && msg_size) snprintf(msg, msg_size, "%s", r->refusal);
        return FP4_ERR_REFUSED_ROUTE;
    }
    if (msg && msg_size)
        snprintf(msg, msg_size,
                 "no route for lane %s, %s activations, %s mode on %s; use --mode exact --device cpu",
                 fp4_rt_lane_name(k->lane), k->act == FP4_AP_NVFP4 ? "nvfp4" : "a16",
                 k->mode == FP4_MODE_EXACT ? "exact" : "native",
                 k->device == FP4_DEVICE_CUDA ? "cuda" : "cpu");
    return FP4_ERR_REFUSED_ROUTE;
}
