/* tp_impl.h — the CPU engine split over ranks (tensor and expert parallelism, docs/SCALE.md):
 * the shards of one rank (tp_shard.c) and the split step over a communicator (tp_step.c). */
#ifndef FP4_CPU_TP_IMPL_H
#define FP4_CPU_TP_IMPL_H

#include "backend/backend.h"
#include "comm/comm.h"

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

/* The checks of a split before anything is allocated: the KV heads divide over the ranks (rule
 * "tp.heads"), the ffn rows too, and each row-parallel shard can be computed on its route (rule
 * "tp.route"), in exact mode on a route whose pinned order the gather keeps (rule "tp.exact-route":
 * NVFP4 A16) with every shard boundary on a 256-value super-block (rule "tp.exact-split"). */
fp4_status fp4_tp_check(const fp4_rt_model_desc *d, int n, fp4_error *err);

/* Exact A16 row-parallel partial (SPEC §4 steps 1-4 without the sum): c[col][row][sb] for the
 * shard's super-blocks, the term each super-block adds to the row's accumulator (+0 for an
 * all-zero super-block, which the sum then leaves unchanged). x: n columns of the shard's n_in. */
fp4_status fp4_tp_a16_terms(const fp4_tensor *w, const float *x, int64_t n, float *c, int n_threads);
/* The pinned sum of the gathered terms: y[col][row] = F16(((0 + t_0) + t_1) + ...), t over the
 * super-blocks in index order (rank by rank: g holds n_ranks blocks of [n][n_out][nsb] terms). */
void fp4_tp_a16_reduce(const float *g, int n_ranks, int64_t n, int64_t n_out, int64_t nsb, float *y);

/* The split engine's backend ops (tp_step.c): desc->tp ranks in-process. */
const fp4_rt_backend_ops *fp4_rt_cpu_tp_backend(void);

#endif
