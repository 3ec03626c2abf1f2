/* comm_nccl.c — comm.h over NCCL (built only by `make cuda`, linked with libnccl and cudart):
 * one process per GPU, rank r driving device `device`. Pointers given to the collectives are device
 * memory; each collective runs on the rank's own stream and returns when it has completed there
 * (the split step is synchronous, as THE STEP is). all_reduce_sum is NCCL's ncclSum: its order is
 * NCCL's ring or tree, so only native mode may use it (comm.h).
 *
 * Bootstrap: rank 0 makes the ncclUniqueId and writes it to id_path (a temporary name, fsynced,
 * renamed, so a reader never sees half an id); the other ranks wait for the file, up to timeout_s,
 * and refuse one of the wrong size. The file is the only thing the ranks share before NCCL runs:
 * no socket of ours, no protocol of ours (docs/SCALE.md: the same file on a shared filesystem, or
 * an MPI broadcast of the id, bootstraps several hosts). */
#include "fp4_impl.h"
#include "comm/comm.h"
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct nccl_comm {
    fp4_comm base;
    ncclComm_t nc;
    cudaStream_t stream;
    float *one; /* a device float for the barrier */
} nccl_comm;

static nccl_comm *nc_of(fp4_comm *c) {
    return (nccl_comm *)c;
}

static fp4_status nccl_done(nccl_comm *n, ncclResult_t r, const char *what, fp4_error *err) {
    if (r == ncclSuccess) {
        cudaError_t ce = cudaStreamSynchronize(n->stream);
        if (ce == cudaSuccess) return FP4_OK;
        return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.nccl", "%s: %s", what, cudaGetErrorString(ce));
    }
    return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.nccl", "%s: %s", what, ncclGetErrorString(r));
}

static fp4_status n_all_gather(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err) {
    nccl_comm *n = nc_of(c);
    return nccl_done(n, ncclAllGather(send, recv, bytes, ncclChar, n->nc, n->stream), "ncclAllGather", err);
}
static fp4_status n_all_reduce(fp4_comm *c, const float *send, float *recv, int64_t cnt, fp4_error *err) {
    nccl_comm *n = nc_of(c);
    return nccl_done(n, ncclAllReduce(send, recv, (size_t)cnt, ncclFloat, ncclSum, n->nc, n->stream),
                     "ncclAllReduce", err);
}
static fp4_status n_broadcast(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err) {
    nccl_comm *n = nc_of(c);
    return nccl_done(n, ncclBroadcast(buf, buf, bytes, ncclChar, root, n->nc, n->stream), "ncclBroadcast",
                     err);
}
static fp4_status n_barrier(fp4_comm *c, fp4_error *err) {
    nccl_comm *n = nc_of(c);
    return nccl_done(n, ncclAllReduce(n->one, n->one, 1, ncclFloat, ncclSum, n->nc, n->stream), "barrier",
                     err);
}
static void n_abort(fp4_comm *c) {
    nccl_comm *n = nc_of(c);
    if (n->nc) ncclCommAbort(n->nc), n->nc = NULL;
}
static void n_destroy(fp4_comm *c) {
    nccl_comm *n = nc_of(c);
    if (n->nc) ncclCommDestroy(n->nc);
    if (n->one) cudaFree(n->one);
    if (n->stream) cudaStreamDestroy(n->stream);
    free(n);
}

static const fp4_comm_ops nccl_ops = {"nccl",    n_all_gather, n_all_reduce, n_broadcast,
                                      n_barrier, n_abort,      n_destroy};

static fp4_status write_id(const char *path, const ncclUniqueId *id, fp4_error *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, path, NULL, "comm.id", "path too long");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return fp4_fail(err, FP4_ERR_IO, tmp, NULL, "comm.id", "cannot create: %s", strerror(errno));
    const int ok = write(fd, id, sizeof *id) == (ssize_t)sizeof *id && fsync(fd) == 0;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return fp4_fail(err, FP4_ERR_IO, path, NULL, "comm.id", "cannot write the NCCL id: %s",
                        strerror(errno));
    }
    return FP4_OK;
}

static fp4_status read_id(const char *path, double timeout_s, ncclUniqueId *id, fp4_error *err) {
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (double waited = 0; waited <= timeout_s; waited += 0.02) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            struct stat sb;
            const int ok = fstat(fd, &sb) == 0 && sb.st_size == (off_t)sizeof *id &&
                           read(fd, id, sizeof *id) == (ssize_t)sizeof *id;
            close(fd);
            if (ok) return FP4_OK;
            return fp4_fail(err, FP4_ERR_FORMAT, path, NULL, "comm.id", "not an NCCL id (%zu bytes expected)",
                            sizeof *id);
        }
        nanosleep(&nap, NULL);
    }
    return fp4_fail(err, FP4_ERR_IO, path, NULL, "comm.id", "no NCCL id after %.0f s (is rank 0 running?)",
                    timeout_s);
}

fp4_status fp4_comm_nccl_create(int rank, int size, int device, const char *id_path, double timeout_s,
                                fp4_comm **out, fp4_error *err) {
    *out = NULL;
    if (size < 1 || size > FP4_COMM_MAX_RANKS || rank < 0 || rank >= size || !id_path)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "comm.args", "rank %d of %d", rank, size);
    ncclUniqueId id;
    fp4_status st = FP4_OK;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.nccl", "ncclGetUniqueId: %s",
                            ncclGetErrorString(r));
        st = write_id(id_path, &id, err);
    } else
        st = read_id(id_path, timeout_s, &id, err);
    if (st) return st;
    nccl_comm *n = calloc(1, sizeof *n);
    if (!n) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    n->base = (fp4_comm){&nccl_ops, rank, size};
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&n->one, sizeof(float));
    if (ce == cudaSuccess) ce = cudaMemset(n->one, 0, sizeof(float));
    if (ce != cudaSuccess) {
        n_destroy(&n->base);
        return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.cuda", "device %d: %s", device,
                        cudaGetErrorString(ce));
    }
    ncclResult_t r = ncclCommInitRank(&n->nc, size, id, rank);
    if (r != ncclSuccess) {
        n->nc = NULL;
        n_destroy(&n->base);
        return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.nccl", "ncclCommInitRank (rank %d of %d): %s",
                        rank, size, ncclGetErrorString(r));
    }
    *out = &n->base;
    return FP4_OK;
}
