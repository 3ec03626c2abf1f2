/* threads.c — split rows across pthreads. Each row is computed by exactly one thread with the
 * same code, so results do not depend on the thread count. */
#include "fp4_impl.h"
#include <pthread.h>

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

fp4_status fp4_parallel_rows(int64_t n_rows, int n_threads, fp4_rows_fn fn, void *ctx) {
    if (n_rows <= 0) return FP4_OK;
    if (n_threads > FP4_MAX_THREADS) n_threads = FP4_MAX_THREADS;
    if (n_threads <= 1 || n_rows < 2) {
        fn(ctx, 0, n_rows);
        return FP4_OK;
    }
    if (n_threads > n_rows) n_threads = (int)n_rows;
    pthread_t tid[FP4_MAX_THREADS];
    rows_job job[FP4_MAX_THREADS];
    int started = 0;
    for (int t = 0; t < n_threads; t++) {
        job[t] = (rows_job){fn, ctx, n_rows * t / n_threads, n_rows * (t + 1) / n_threads};
        if (t == 0) continue; /* the calling thread takes chunk 0 */
        if (pthread_create(&tid[t], NULL, rows_worker, &job[t]) != 0) {
            /* fall back: run the chunk here */
            rows_worker(&job[t]);
            job[t].fn = NULL;
        } else {
            started++;
        }
    }
    rows_worker(&job[0]);
    for (int t = 1; t < n_threads; t++)
        if (job[t].fn) pthread_join(tid[t], NULL);
    (void)started;
    return FP4_OK;
}
