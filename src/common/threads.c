/* threads.c — split rows across threads. Each row is computed by exactly one thread with the
 * same code, and the split (chunk t of T: rows [n t / T, n (t + 1) / T)) depends only on the row
 * and thread counts, so results do not depend on which threads run the chunks.
 *
 * A decode step of a small model is ~100 parallel regions of a few microseconds each; creating
 * and joining pthreads per region cost ~40-70 us each (2 threads were slower than 1 on a 160M
 * model). So the chunks go to a pool of worker threads made on first use and kept: after a job a
 * worker spins on the job generation for POOL_SPIN pause iterations and then sleeps on a
 * condition variable. One caller at a time owns the pool (a try-lock); a concurrent caller, or a
 * chunk that itself splits rows (nested), takes the per-call pthread path instead, with the same
 * split. After fork() the child starts with no pool. */
#include "fp4_impl.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct rows_job {
    fp4_rows_fn fn;
    void *ctx;
    int64_t r0, r1;
} rows_job;

static void *rows_worker(void *arg) {
    rows_job *j = arg;
    j->fn(j->ctx, j->r0, j->r1);
    return NULL;
}

/* the per-call path: chunk 0 here, the others on fresh pthreads (or here when one cannot start) */
static void split_spawn(rows_job *job, int n_threads) {
    pthread_t tid[FP4_MAX_THREADS];
    for (int t = 1; t < n_threads; t++)
        if (pthread_create(&tid[t], NULL, rows_worker, &job[t]) != 0) {
            rows_worker(&job[t]);
            job[t].fn = NULL;
        }
    rows_worker(&job[0]);
    for (int t = 1; t < n_threads; t++)
        if (job[t].fn) pthread_join(tid[t], NULL);
}

#define POOL_SPIN 2000 /* pause iterations a worker (or the caller) spins before it sleeps (~0.1-0.3 ms) */

/* worker w's mailbox: the caller writes job, then bumps gen (release); the worker runs the job when
 * gen changes. Only the owner of the pool writes a slot, and only to a worker that is idle (the
 * owner waited for every worker of its previous job). One cache line each. */
typedef struct pool_slot {
    _Alignas(64) atomic_uint_fast64_t gen;
    uint_fast64_t start; /* gen when the worker was made (it has run no job of it) */
    rows_job job;
} pool_slot;

static struct {
    pthread_mutex_t owner; /* held by the caller whose job the pool runs */
    pthread_mutex_t m;
    pthread_cond_t work, done;
    int n_workers;      /* threads made so far (worker w runs chunk w + 1) */
    atomic_int pending; /* workers of the current job not finished yet */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0};
static pool_slot slots[FP4_MAX_THREADS];
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *pool_worker(void *arg) {
    pool_slot *sl = &slots[(intptr_t)arg];
    uint_fast64_t seen = sl->start; /* not the gen at its start: the first job may be posted already */
    for (;;) {
        uint_fast64_t g;
        int spin = 0;
        while ((g = atomic_load_explicit(&sl->gen, memory_order_acquire)) == seen && spin < POOL_SPIN)
            cpu_relax(), spin++;
        if (g == seen) {
            pthread_mutex_lock(&pool.m);
            while ((g = atomic_load_explicit(&sl->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&pool.work, &pool.m);
            pthread_mutex_unlock(&pool.m);
        }
        seen = g;
        rows_worker(&sl->job);
        if (atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.m);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.m);
        }
    }
    return NULL;
}

/* the child of a fork has none of the parent's workers: it starts a pool of its own */
static void pool_after_fork(void) {
    pthread_mutex_init(&pool.owner, NULL);
    pthread_mutex_init(&pool.m, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.n_workers = 0;
    atomic_store(&pool.pending, 0);
}
static void pool_init(void) {
    pthread_atfork(NULL, NULL, pool_after_fork);
}

/* workers up to want (detached; they live as long as the process); the number there is */
static int pool_grow(int want) {
    while (pool.n_workers < want) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at)) break;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        slots[pool.n_workers].start = atomic_load(&slots[pool.n_workers].gen);
        const int ok = pthread_create(&t, &at, pool_worker, (void *)(intptr_t)pool.n_workers) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break;
        pool.n_workers++;
    }
    return pool.n_workers;
}

fp4_status fp4_parallel_rows(int64_t n_rows, int n_threads, fp4_rows_fn fn, void *ctx) {
    if (n_rows <= 0) return FP4_OK;
    if (n_threads > FP4_MAX_THREADS) n_threads = FP4_MAX_THREADS;
    if (n_threads <= 1 || n_rows < 2) {
        fn(ctx, 0, n_rows);
        return FP4_OK;
    }
    if (n_threads > n_rows) n_threads = (int)n_rows;
    pthread_once(&pool_once, pool_init);
    if (pthread_mutex_trylock(&pool.owner) != 0) { /* the pool runs another job (or ours: nested) */
        rows_job job[FP4_MAX_THREADS];
        for (int t = 0; t < n_threads; t++)
            job[t] = (rows_job){fn, ctx, n_rows * t / n_threads, n_rows * (t + 1) / n_threads};
        split_spawn(job, n_threads);
        return FP4_OK;
    }
    const int have = pool_grow(n_threads - 1);
    const int chunks = have + 1 < n_threads ? have + 1 : n_threads; /* chunks 1.. on workers 0.. */
    rows_job job[FP4_MAX_THREADS];
    for (int t = 0; t < n_threads; t++)
        job[t] = (rows_job){fn, ctx, n_rows * t / n_threads, n_rows * (t + 1) / n_threads};
    atomic_store_explicit(&pool.pending, chunks - 1, memory_order_relaxed);
    for (int w = 0; w + 1 < chunks; w++) {
        slots[w].job = job[w + 1];
        atomic_fetch_add_explicit(&slots[w].gen, 1, memory_order_release);
    }
    pthread_mutex_lock(&pool.m); /* wake the workers that sleep (the spinning ones saw gen) */
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.m);
    rows_worker(&job[0]);
    for (int t = chunks; t < n_threads; t++) /* chunks of workers that could not be made: here */
        rows_worker(&job[t]);
    for (int spin = 0; atomic_load_explicit(&pool.pending, memory_order_acquire) != 0 && spin < POOL_SPIN;
         spin++)
        cpu_relax();
    if (atomic_load_explicit(&pool.pending, memory_order_acquire) != 0) {
        pthread_mutex_lock(&pool.m);
        while (atomic_load_explicit(&pool.pending, memory_order_acquire) != 0)
            pthread_cond_wait(&pool.done, &pool.m);
        pthread_mutex_unlock(&pool.m);
    }
    pthread_mutex_unlock(&pool.owner);
    return FP4_OK;
}
