/* nccl_dl.c — the NCCL functions comm_nccl.c calls, resolved from libnccl.so.2 at run time
 * (dlopen on first use) instead of at link time: libfp4lane_cuda.so carries the NCCL communicator
 * for the split CUDA step (FP4LANE_CUDA_TP_NCCL) without needing NCCL where it is not used (a
 * machine without libnccl still loads the library; the split's NCCL form then fails with
 * comm.nccl naming the missing library). test_nccl_comm links libnccl itself and not this file. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stddef.h>

typedef struct nccl_fns {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort_)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
} nccl_fns;

static nccl_fns fns;
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    *(void **)&fns.get_unique_id = dlsym(h, "ncclGetUniqueId");
    *(void **)&fns.init_rank = dlsym(h, "ncclCommInitRank");
    *(void **)&fns.destroy = dlsym(h, "ncclCommDestroy");
    *(void **)&fns.abort_ = dlsym(h, "ncclCommAbort");
    *(void **)&fns.error_string = dlsym(h, "ncclGetErrorString");
    *(void **)&fns.broadcast = dlsym(h, "ncclBroadcast");
    *(void **)&fns.all_reduce = dlsym(h, "ncclAllReduce");
    *(void **)&fns.all_gather = dlsym(h, "ncclAllGather");
    loaded = fns.get_unique_id && fns.init_rank && fns.destroy && fns.abort_ && fns.error_string &&
             fns.broadcast && fns.all_reduce && fns.all_gather;
}
static int ok(void) {
    pthread_once(&once, load);
    return loaded;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    return ok() ? fns.get_unique_id(id) : ncclSystemError;
}
ncclResult_t ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int rank) {
    return ok() ? fns.init_rank(c, n, id, rank) : ncclSystemError;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
    return ok() ? fns.destroy(c) : ncclSystemError;
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
    return ok() ? fns.abort_(c) : ncclSystemError;
}
const char *ncclGetErrorString(ncclResult_t r) {
    return ok() ? fns.error_string(r) : "libnccl.so.2 could not be loaded (NCCL is not installed here)";
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st) {
    return ok() ? fns.broadcast(s, r, n, t, root, c, st) : ncclSystemError;
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st) {
    return ok() ? fns.all_reduce(s, r, n, t, op, c, st) : ncclSystemError;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
    return ok() ? fns.all_gather(s, r, n, t, c, st) : ncclSystemError;
}
