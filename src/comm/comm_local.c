/* comm_local.c — the in-process communicator (comm.h): the ranks are threads of one process and
 * share one arena of size * max_bytes. A collective is "write my slot, barrier, read the slots,
 * barrier" (the second barrier keeps a fast rank from overwriting a slot another rank still
 * reads), so it costs two barriers and a copy in and out; no network protocol, no extra thread.
 * The barrier counts generations under a mutex and can be aborted (a failed rank must not leave
 * the others waiting). */
#include "comm/comm.h"
#include "fp4_impl.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct local_group {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int size, waiting, aborted, refs;
    uint64_t gen;
    size_t max_bytes;
    unsigned char *arena; /* size * max_bytes */
} local_group;

typedef struct local_comm {
    fp4_comm base; /* first: a fp4_comm * is a local_comm * */
    local_group *g;
} local_comm;

static local_group *grp(fp4_comm *c) {
    return ((local_comm *)c)->g;
}

static fp4_status aborted(fp4_error *err) {
    return fp4_fail(err, FP4_ERR_IO, NULL, NULL, "comm.aborted", "another rank of the group failed");
}

static fp4_status wait_all(fp4_comm *c, fp4_error *err) {
    local_group *g = grp(c);
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

static fp4_status fits(const local_group *g, size_t bytes, fp4_error *err) {
    if (bytes <= g->max_bytes) return FP4_OK;
    return fp4_fail(err, FP4_ERR_LIMIT, NULL, NULL, "comm.size",
                    "a collective of %zu bytes per rank (the arena holds %zu)", bytes, g->max_bytes);
}

static fp4_status l_all_gather(fp4_comm *c, const void *send, void *recv, size_t bytes, fp4_error *err) {
    local_group *g = grp(c);
    fp4_status st = fits(g, bytes, err);
    if (st) return st;
    if (bytes) memcpy(g->arena + (size_t)c->rank * g->max_bytes, send, bytes);
    if ((st = wait_all(c, err))) return st;
    for (int r = 0; r < g->size && bytes; r++)
        memcpy((unsigned char *)recv + (size_t)r * bytes, g->arena + (size_t)r * g->max_bytes, bytes);
    return wait_all(c, err);
}

/* ((a_0 + a_1) + a_2) + ...: rank order, so every rank computes the same bits */
static fp4_status l_all_reduce(fp4_comm *c, const float *send, float *recv, int64_t n, fp4_error *err) {
    local_group *g = grp(c);
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n, sizeof(float), &bytes))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "comm.size", "all_reduce of %lld floats",
                        (long long)n);
    fp4_status st = fits(g, bytes, err);
    if (st) return st;
    if (bytes) memcpy(g->arena + (size_t)c->rank * g->max_bytes, send, bytes);
    if ((st = wait_all(c, err))) return st;
    const float *a0 = (const float *)(void *)g->arena;
    for (int64_t i = 0; i < n; i++) {
        float acc = a0[i];
        for (int r = 1; r < g->size; r++)
            acc += ((const float *)(void *)(g->arena + (size_t)r * g->max_bytes))[i];
        recv[i] = acc;
    }
    return wait_all(c, err);
}

static fp4_status l_broadcast(fp4_comm *c, void *buf, size_t bytes, int root, fp4_error *err) {
    local_group *g = grp(c);
    fp4_status st = fits(g, bytes, err);
    if (st) return st;
    if (c->rank == root && bytes) memcpy(g->arena, buf, bytes);
    if ((st = wait_all(c, err))) return st;
    if (c->rank != root && bytes) memcpy(buf, g->arena, bytes);
    return wait_all(c, err);
}

static fp4_status l_barrier(fp4_comm *c, fp4_error *err) {
    return wait_all(c, err);
}

static void l_abort(fp4_comm *c) {
    local_group *g = grp(c);
    pthread_mutex_lock(&g->m);
    g->aborted = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->m);
}

static void group_free(local_group *g) {
    pthread_mutex_destroy(&g->m);
    pthread_cond_destroy(&g->cv);
    free(g->arena);
    free(g);
}

static void l_destroy(fp4_comm *c) {
    local_group *g = grp(c);
    pthread_mutex_lock(&g->m);
    const int last = --g->refs == 0;
    pthread_mutex_unlock(&g->m);
    if (last) group_free(g);
    free(c);
}

static const fp4_comm_ops local_ops = {"local",   l_all_gather, l_all_reduce, l_broadcast,
                                       l_barrier, l_abort,      l_destroy};

fp4_status fp4_comm_local_create(int size, size_t max_bytes, fp4_comm **out, fp4_error *err) {
    if (!out || size < 1 || size > FP4_COMM_MAX_RANKS)
        return fp4_fail(err, FP4_ERR_INVALID_ARG, NULL, NULL, "comm.args", "%d ranks (1..%d)", size,
                        FP4_COMM_MAX_RANKS);
    size_t arena;
    if (!max_bytes || __builtin_mul_overflow((size_t)size, max_bytes, &arena))
        return fp4_fail(err, FP4_ERR_OVERFLOW, NULL, NULL, "comm.size", "arena of %d x %zu bytes", size,
                        max_bytes);
    local_group *g = calloc(1, sizeof *g);
    if (g) g->arena = malloc(arena);
    if (!g || !g->arena) {
        if (g) free(g);
        return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory (comm arena %zu bytes)",
                        arena);
    }
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->size = size, g->max_bytes = max_bytes;
    for (int r = 0; r < size; r++) {
        local_comm *lc = calloc(1, sizeof *lc);
        if (!lc) {
            for (int k = 0; k < r; k++)
                free(out[k]), out[k] = NULL;
            group_free(g);
            return fp4_fail(err, FP4_ERR_NOMEM, NULL, NULL, "alloc", "out of memory");
        }
        lc->base = (fp4_comm){&local_ops, r, size};
        lc->g = g;
        out[r] = &lc->base;
    }
    g->refs = size;
    return FP4_OK;
}
