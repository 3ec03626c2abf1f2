/* test_threads.c — fp4_parallel_rows (src/cpu/threads.c): the pool of kept workers and the
 * per-call path give every row to exactly one chunk, the split is the documented one (chunk t of T:
 * rows [n t / T, n (t + 1) / T)), for many row and thread counts back to back (the pool reused
 * with more and fewer threads than it has), from inside a chunk (nested: the per-call path), from
 * two threads at once (one of them gets the pool), and in the child of a fork (a pool of its own). */
#include "check.h"
#include "fp4_impl.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct hits {
    int64_t n;
    int threads;
    atomic_int *count; /* per row: how many chunks covered it */
    atomic_int bad;    /* a chunk that is not one of the documented split's */
    atomic_int nested; /* >0: every chunk also splits 7 rows over 3 threads */
} hits;

static void nested_rows(void *ctx, int64_t r0, int64_t r1) {
    atomic_int *c = ctx;
    for (int64_t r = r0; r < r1; r++)
        atomic_fetch_add(&c[r], 1);
}

static void count_rows(void *ctx, int64_t r0, int64_t r1) {
    hits *h = ctx;
    int ok = 0;
    for (int t = 0; t < h->threads && !ok; t++)
        ok = r0 == h->n * t / h->threads && r1 == h->n * (t + 1) / h->threads;
    if (!ok) atomic_fetch_add(&h->bad, 1);
    for (int64_t r = r0; r < r1; r++)
        atomic_fetch_add(&h->count[r], 1);
    if (atomic_load(&h->nested)) {
        atomic_int c[7];
        for (int i = 0; i < 7; i++)
            atomic_init(&c[i], 0);
        fp4_parallel_rows(7, 3, nested_rows, c);
        for (int i = 0; i < 7; i++)
            if (atomic_load(&c[i]) != 1) atomic_fetch_add(&h->bad, 1);
    }
}

/* 0 when every row was covered once by a documented chunk */
static int one_call(int64_t n, int threads, int nested) {
    hits h = {n, threads, calloc((size_t)n + 1, sizeof(atomic_int)), 0, nested};
    if (!h.count) return -1;
    int eff = threads > FP4_MAX_THREADS ? FP4_MAX_THREADS : threads;
    if (eff > n) eff = (int)n;
    h.threads = eff < 1 ? 1 : eff;
    if (fp4_parallel_rows(n, threads, count_rows, &h) != FP4_OK) return free(h.count), -1;
    int bad = atomic_load(&h.bad);
    for (int64_t r = 0; r < n; r++)
        bad += atomic_load(&h.count[r]) != 1;
    free(h.count);
    return bad;
}

static void *concurrent(void *arg) {
    int *bad = arg;
    for (int i = 0; i < 300; i++)
        *bad += one_call(50 + i % 37, 2 + i % 4, 0) != 0;
    return NULL;
}

int main(void) {
    alarm(120); /* a lost wake-up hangs: the process is killed and the test fails */
    /* the sizes and thread counts back to back: the pool grows, is reused, and serves fewer */
    static const int64_t ns[] = {1, 2, 3, 7, 64, 1000, 4097};
    static const int ts[] = {1, 2, 3, 4, 8, 2, 1, 16, 3, 300};
    int bad = 0, calls = 0;
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++, calls++)
                bad += one_call(ns[i], ts[j], 0) != 0;
    CHECK_MSG(bad == 0, "%d of %d calls covered a row not exactly once or split otherwise", bad, calls);
    /* nested: a chunk that splits rows itself (the pool is taken: the per-call path) */
    bad = 0;
    for (int rep = 0; rep < 50; rep++)
        bad += one_call(100, 3, 1) != 0;
    CHECK_MSG(bad == 0, "nested splits: %d of 50 calls wrong", bad);
    /* two callers at once: one has the pool, the other the per-call path, both right */
    int b1 = 0, b2 = 0;
    pthread_t t1, t2;
    const int c1 = pthread_create(&t1, NULL, concurrent, &b1) == 0;
    const int c2 = pthread_create(&t2, NULL, concurrent, &b2) == 0;
    CHECK(c1 && c2);
    if (c1) pthread_join(t1, NULL);
    if (c2) pthread_join(t2, NULL);
    CHECK_MSG(b1 == 0 && b2 == 0, "concurrent callers: %d and %d of 300 calls wrong", b1, b2);
    /* the child of a fork has no workers of the parent: it must make its own, not wait forever */
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a child waiting on the parent's workers would hang: killed, the check fails */
        int cb = 0;
        for (int i = 0; i < 50; i++)
            cb += one_call(333, 4, 0) != 0;
        _exit(cb ? 1 : 0);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return check_report();
}
