/* tp_plan.h — the shard plan of a split (tensor- and expert-parallel) engine, shared by the CPU split
 * (src/cpu/tp_step.c) and the CUDA split (src/cuda/step/tp.cu): what each rank holds and the checks
 * that refuse a split by name before anything is allocated (docs/SCALE.md). */
#ifndef FP4_BACKEND_TP_PLAN_H
#define FP4_BACKEND_TP_PLAN_H

#include "backend/backend.h"

#define FP4_TP_MAX_RANKS 64 /* = FP4_COMM_MAX_RANKS (comm/comm.h) */

/* What rank r of n holds: query heads [hq0, hq1), KV heads [kv0, kv1), ffn rows [f0, f1), vocab
 * rows [v0, v1), experts [e0, e1). Equal contiguous parts (the vocabulary and the experts may be
 * uneven: part r is [n·r/N, n·(r+1)/N)). */
typedef struct tp_part {
    int64_t hq0, hq1, kv0, kv1, f0, f1, v0, v1, e0, e1;
} tp_part;
tp_part fp4_tp_part(const fp4_arch *a, int rank, int n);

/* How a projection is split: column-parallel (whole output rows [r0, r1) of the weight, the rows'
 * bytes borrowed) or row-parallel (input columns [k0, k1) of every row, copied into owned). */
fp4_status fp4_tp_rows(const fp4_tensor *w, int64_t r0, int64_t r1, fp4_tensor *out, fp4_error *err);
fp4_status fp4_tp_cols(const fp4_tensor *w, int64_t k0, int64_t k1, fp4_tensor *out, uint8_t **owned,
                       fp4_error *err);

/* the backend's route name of w (its messages; NULL: "none") */
typedef const char *(*fp4_tp_route_fn)(const fp4_tensor *w, fp4_mode mode);

/* The checks of a split before anything is allocated: the KV heads divide over the ranks (rule
 * "tp.heads"), the ffn rows too, and each row-parallel shard can be computed on its route (rule
 * "tp.route"), in exact mode on a route whose pinned order the gather keeps (rule "tp.exact-route":
 * NVFP4 A16) with every shard boundary on a 256-value super-block (rule "tp.exact-split"). */
fp4_status fp4_tp_check(const fp4_rt_model_desc *d, int n, fp4_tp_route_fn route_name, fp4_error *err);

#endif
