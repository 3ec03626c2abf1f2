/* comm_cuda.c — the in-process communicator over device memory (comm.h, fp4_comm_cuda_local_create):
 * the ranks are threads of one process, each with its CUDA device (several ranks may share one),
 * and the collectives' pointers are device memory of the rank's device. What the split CUDA step
 * (src/cuda/step/tp.cu) runs on within one process, and how one GPU proves the split with N ranks.
 * Built only by `make cuda` (cudart), like the NCCL backend.
 *
 * A collective is "publish my pointer, barrier, copy from every rank's pointer, barrier": the
 * copies are cudaMemcpyPeerAsync on the rank's own stream, synchronized before the second barrier,
 * so a collective returns with its bytes in place and no rank reuses a buffer another still reads.
 * all_reduce_sum copies the ranks' vectors to the host and adds them in rank order
 * (((a_0 + a_1) + a_2) + ...), as the host backend does: the same bits on every rank. The barrier
 * counts generations under a mutex and can be aborted (a failed rank must not leave the others
 * waiting). */
#include "comm/comm.h"
#include "fp4_impl.h"
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct cu_group {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int size, waiting, aborted, refs;
    uint64_t gen;
    size_t max_bytes;
    const void *ptr[FP4_COMM_MAX_RANKS]; /* each rank's published buffer (device memory) */
    int dev[FP4_COMM_MAX_RANKS];
} cu_group;

typedef struct cu_comm {
    fp4_comm base; /* first: a fp4_comm * is a cu_comm * */
    cu_group *g;
    cudaStream_t stream;
    float *host; /* all_reduce's staging: size * max_bytes, made on first use */
} cu_comm;

static cu_comm *cc(fp4_comm *c) {
    return (cu_comm *)c;
}

static fp4_status aborted(fp4_error *err) {
    return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.aborted", "another rank of the group failed");
}

static fp4_status cuda_err(cudaError_t e, const char *what, fp4_error *err) {
    (void)cudaGetLastError();
    return fp4_fail(err, FP4_ERR_CUDA, NULL, NULL, "comm.cuda", "%s: %s", what, cudaGetErrorString(e));
}

static fp4_status wait_all(fp4_comm *c, fp4_error *err) {
    cu_group *g = cc(c)->g;
    pthread_mutex_lock(&g->m);
    if (g->aborted) {
        pthread_mutex_unlock(&g->m);
        return aborted(err);
    }
    const uint64_t gen = g->gen;
    if (++g->waiting == g->size) {
        g->waiting = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
    } else
        while (gen == g->gen && !g->aborted)
            pthread_cond_wait(&g->cv, &g->m);
    const int ab = gen == g->gen && g->aborted;
    pthread_mutex_unlock(&g->m);
    return ab ? aborted(err) : FP4_OK;
}

static fp4_status fits(const cu_group *g, size_t bytes, fp4_error *err) {
    if (bytes <= g->max_bytes) return FP4_OK;
    return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "comm.size",
                    "a collective of %zu bytes per rank (the group allows %zu)", bytes, g->max_bytes);
}

/* publish p, wait for every rank's */
static fp4_status publish(fp4_comm *c, const void *p, fp4_error *err) {
    cu_group *g = cc(c)->g;
    pthread_mutex_lock(&g->m);
    g->ptr[c->rank] = p;
    pthread_mutex_unlock(&g->m);
    const cudaError_t e = cudaSetDevice(g->dev[c->rank]);
    if (e != cudaSuccess) return cuda_err(e, "cudaSetDevice", err);
    return wait_all(c, err);
}

/* dst (this rank's device, or the host when to_host) <- rank r's published buffer */
static cudaError_t pull(fp4_comm *c, void *dst, int r, size_t off, size_t bytes, int to_host) {
    cu_comm *k = cc(c);
    const unsigned char *src = (const unsigned char *)k->g->ptr[r] + off;
    if (to_host) return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, k->stream);
    return cudaMemcpyPeerAsync(dst, k->g->dev[c->rank], src, k->g->dev[r], bytes, k->stream);
}

/* the copies done, then the second barrier */
static fp4_status finish(fp4_comm *c, cudaError_t e, fp4_error *err) {
    if (e == cudaSuccess) e = cudaStreamSynchronize(cc(c)->stream);
    if (e != cudaSuccess) {
        fp4_comm_abort(c);
        return cuda_err(e, "collective copy", err);
    }
    return wait_all(c, err);
}

static fp4_status c_all_gather(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err) {
    fp4_status st = fits(cc(c)->g, bytes, err);
    if (st || (st = publish(c, send, err))) return st;
    cudaError_t e = cudaSuccess;
    for (int r = 0; r < c->size && bytes && e == cudaSuccess; r++)
        e = pull(c, (unsigned char *)recv + (size_t)r * bytes, r, 0, bytes, 0);
    return finish(c, e, err);
}

static fp4_status c_all_reduce(fp4_comm *c, const float *send, float *recv, int64_t n, fp4_error *err) {
    cu_comm *k = cc(c);
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n, sizeof(float), &bytes))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "comm.size", "all_reduce of %lld floats",
                        (long long)n);
    fp4_status st = fits(k->g, bytes, err);
    if (st) return st;
    if (!k->host && !(k->host = malloc((size_t)c->size * k->g->max_bytes + 1)))
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory (all_reduce staging)");
    if ((st = publish(c, send, err))) return st;
    const size_t stride = k->g->max_bytes / sizeof(float);
    cudaError_t e = cudaSuccess;
    for (int r = 0; r < c->size && bytes && e == cudaSuccess; r++)
        e = pull(c, k->host + (size_t)r * stride, r, 0, bytes, 1);
    if ((st = finish(c, e, err))) return st; /* every rank has read every send: recv may be written */
    for (int64_t i = 0; i < n; i++) {
        float acc = k->host[i];
        for (int r = 1; r < c->size; r++)
            acc += k->host[(size_t)r * stride + (size_t)i];
        k->host[i] = acc;
    }
    e = bytes ? cudaMemcpyAsync(recv, k->host, bytes, cudaMemcpyDefault, k->stream) : cudaSuccess;
    if (e == cudaSuccess) e = cudaStreamSynchronize(k->stream);
    return e == cudaSuccess ? FP4_OK : cuda_err(e, "all_reduce result", err);
}

static fp4_status c_broadcast(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err) {
    fp4_status st = fits(cc(c)->g, bytes, err);
    if (st || (st = publish(c, buf, err))) return st;
    const cudaError_t e = c->rank != root && bytes ? pull(c, buf, root, 0, bytes, 0) : cudaSuccess;
    return finish(c, e, err);
}

static fp4_status c_barrier(fp4_comm *c, fp4_error *err) {
    return wait_all(c, err);
}

static void c_abort(fp4_comm *c) {
    cu_group *g = cc(c)->g;
    pthread_mutex_lock(&g->m);
    g->aborted = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->m);
}

static void group_free(cu_group *g) {
    pthread_mutex_destroy(&g->m);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static void c_destroy(fp4_comm *c) {
    cu_comm *k = cc(c);
    cu_group *g = k->g;
    if (k->stream && cudaSetDevice(g->dev[c->rank]) == cudaSuccess) cudaStreamDestroy(k->stream);
    free(k->host);
    pthread_mutex_lock(&g->m);
    const int last = --g->refs == 0;
    pthread_mutex_unlock(&g->m);
    if (last) group_free(g);
    free(k);
}

static const fp4_comm_ops cuda_ops = {"cuda-local", c_all_gather, c_all_reduce, c_broadcast,
                                      c_barrier,    c_abort,      c_destroy};

fp4_status fp4_comm_cuda_local_create(int size, const int *devices, size_t max_bytes, fp4_comm **out,
                                      fp4_error *err) {
    if (!out || !devices || size < 1 || size > FP4_COMM_MAX_RANKS || !max_bytes)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "comm.args", "%d ranks (1..%d)", size,
                        FP4_COMM_MAX_RANKS);
    cu_group *g = calloc(1, sizeof *g);
    if (!g) return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->size = size, g->max_bytes = max_bytes;
    for (int r = 0; r < size; r++)
        g->dev[r] = devices[r];
    fp4_status st = FP4_OK;
    int made = 0;
    for (int r = 0; r < size && !st; r++) {
        cu_comm *k = calloc(1, sizeof *k);
        if (!k) {
            st = fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
            break;
        }
        k->base = (fp4_comm){&cuda_ops, r, size};
        k->g = g;
        out[made++] = &k->base;
        g->refs++;
        cudaError_t e = cudaSetDevice(devices[r]);
        if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) st = cuda_err(e, "rank stream", err);
    }
    if (st) {
        if (!made) group_free(g);
        for (int r = 0; r < made; r++)
            c_destroy(out[r]), out[r] = NULL;
    }
    return st;
}
