/* tp_impl.h — the CPU engine split over ranks (tensor and expert parallelism, docs/SCALE.md):
 * the shards of one rank (tp_shard.c) and the split step over a communicator (tp_step.c). */
#ifndef FP4_CPU_TP_IMPL_H
#define FP4_CPU_TP_IMPL_H

#include "backend/backend.h"
#include "backend/tp_plan.h"
#include "comm/comm.h"

_Static_assert(FP4_TP_MAX_RANKS == FP4_COMM_MAX_RANKS, "one rank cap");

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
