/* comm.h — the communicator of a tensor-parallel engine (docs/SCALE.md): a group of `size` ranks,
 * each holding one fp4_comm, and the collectives the split step needs. Every rank of a group must
 * call the same collectives in the same order with the same sizes (as MPI and NCCL require).
 *
 * Three backends implement it:
 *   - in-process (comm_local.c): N ranks as threads of one process, a shared arena and an
 *     abortable barrier; pointers are host memory. What the CPU engine's --tp runs on, and what
 *     the tests prove the split with.
 *   - in-process over device memory (src/comm/cuda/comm_cuda.c, `make cuda`): the same threads,
 *     device pointers, peer copies; what the split CUDA step runs on (one GPU or several).
 *   - NCCL (src/comm/nccl/comm_nccl.c, built only by `make cuda`): one process per GPU, the
 *     ncclUniqueId passed through a file; pointers are device memory of the rank's GPU.
 *
 * Order: all_gather and broadcast move bytes and are exact on every backend. all_reduce_sum's
 * order belongs to the backend (in-process: ((a_0 + a_1) + a_2) + ... in rank order, the same bits
 * on every rank; NCCL: its own ring/tree, so only native mode may use it). Exact mode never sums
 * across ranks with it: it gathers the partial terms and reduces them in the pinned order.
 *
 * A rank that fails mid-step calls fp4_comm_abort: every rank's pending and later collectives
 * return FP4_ERR_IO, rule "comm.aborted", instead of waiting forever for it. */
#ifndef FP4_COMM_H
#define FP4_COMM_H

#include "fp4lane.h"
#include <stddef.h>
#include <stdint.h>

typedef struct fp4_comm fp4_comm;

typedef struct fp4_comm_ops {
    const char *name; /* "local", "nccl" */
    /* recv[r * bytes .. (r + 1) * bytes) = rank r's send, for every r (recv holds size * bytes) */
    fp4_status (*all_gather)(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err);
    /* recv[i] = Σ_r rank r's send[i] (send may equal recv), in the backend's order (above) */
    fp4_status (*all_reduce_sum)(fp4_comm *c, const float *send, float *recv, int64_t n, fp4_error *err);
    /* every rank's buf = root's buf */
    fp4_status (*broadcast)(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err);
    fp4_status (*barrier)(fp4_comm *c, fp4_error *err);
    void (*abort)(fp4_comm *c);
    void (*destroy)(fp4_comm *c);
} fp4_comm_ops;

struct fp4_comm {
    const fp4_comm_ops *ops;
    int rank, size;
};

static inline int fp4_comm_rank(const fp4_comm *c) {
    return c->rank;
}
static inline int fp4_comm_size(const fp4_comm *c) {
    return c->size;
}

/* The collectives (comm.c): argument checks (rule "comm.args"), then the backend. */
fp4_status fp4_comm_all_gather(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err);
fp4_status fp4_comm_all_reduce_sum(fp4_comm *c, const float *send, float *recv, int64_t n, fp4_error *err);
fp4_status fp4_comm_broadcast(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err);
fp4_status fp4_comm_barrier(fp4_comm *c, fp4_error *err);
void fp4_comm_abort(fp4_comm *c);
/* Ends one rank's handle; the in-process group's shared state goes with its last rank. */
void fp4_comm_free(fp4_comm *c);

#define FP4_COMM_MAX_RANKS 64

/* In-process group of `size` ranks (1..FP4_COMM_MAX_RANKS): out[r] is rank r's handle, to be used
 * by one thread each. A collective moves at most max_bytes per rank (refused above: rule
 * "comm.size"); the arena holds size * max_bytes. */
fp4_status fp4_comm_local_create(int size, size_t max_bytes, fp4_comm **out, fp4_error *err);

/* In-process group over device memory (src/comm/cuda/comm_cuda.c, in `make cuda` only): rank r on CUDA
 * device devices[r] (several ranks may share one device); collectives take device pointers of the
 * rank's device and return when their bytes are in place (rule comm.cuda on a CUDA failure). */
fp4_status fp4_comm_cuda_local_create(int size, const int *devices, size_t max_bytes, fp4_comm **out,
                                      fp4_error *err);

/* NCCL (src/comm/nccl/comm_nccl.c, in `make cuda` only): this process is rank `rank` of `size` on
 * CUDA device `device`; rank 0 writes the ncclUniqueId to id_path, the others wait for it up to
 * timeout_s (rules comm.id, comm.nccl, comm.cuda). Collectives take device pointers. */
fp4_status fp4_comm_nccl_create(int rank, int size, int device, const char *id_path, double timeout_s,
                                fp4_comm **out, fp4_error *err);

#endif
