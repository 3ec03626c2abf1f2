/* test_comm.c — the in-process communicator (src/comm/comm_local.c): at 1..4 ranks, all_gather
 * and broadcast move the exact bytes, all_reduce_sum sums in rank order (the same bits on every
 * rank, ((a0 + a1) + a2) + a3), back-to-back collectives do not overwrite a slot another rank
 * still reads, and the refusals: a collective above the arena (comm.size), a bad root or count
 * (comm.args), a group size out of range, and an aborted group (comm.aborted) releasing a rank
 * that waits in a barrier instead of hanging. Checks run on the main thread (rank threads record). */
#include "check.h"
#include "comm/comm.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { N_EL = 37, ROUNDS = 50, MAXR = 4 };

typedef struct rank_job {
    fp4_comm *c;
    int bad;       /* a wrong byte or bit seen */
    fp4_status st; /* the first failure */
    char rule[64];
} rank_job;

static float value(int rank, int round, int i) {
    /* magnitudes far apart, so the order of the sum shows in the bits */
    return (float)((rank + 1) * (i + 3) + round) * (rank % 2 ? 1e-7f : 1.0f) * (i % 3 ? 1.0f : -1.0f);
}

static void *rank_main(void *p) {
    rank_job *j = p;
    fp4_error err = {0};
    const int R = fp4_comm_rank(j->c), N = fp4_comm_size(j->c);
    float send[N_EL], recv[MAXR * N_EL], sum[N_EL];
    for (int round = 0; round < ROUNDS && !j->st; round++) {
        for (int i = 0; i < N_EL; i++)
            send[i] = value(R, round, i);
        if ((j->st = fp4_comm_all_gather(j->c, send, recv, sizeof send, &err))) break;
        for (int r = 0; r < N; r++)
            for (int i = 0; i < N_EL; i++)
                j->bad |= f32_bits(recv[r * N_EL + i]) != f32_bits(value(r, round, i));
        if ((j->st = fp4_comm_all_reduce_sum(j->c, send, sum, N_EL, &err))) break;
        for (int i = 0; i < N_EL; i++) {
            float acc = value(0, round, i);
            for (int r = 1; r < N; r++)
                acc += value(r, round, i);
            j->bad |= f32_bits(sum[i]) != f32_bits(acc);
        }
        const int root = round % N;
        for (int i = 0; i < N_EL; i++)
            send[i] = R == root ? value(root, round, i) : -1.0f;
        if ((j->st = fp4_comm_broadcast(j->c, send, sizeof send, root, &err))) break;
        for (int i = 0; i < N_EL; i++)
            j->bad |= f32_bits(send[i]) != f32_bits(value(root, round, i));
        if ((j->st = fp4_comm_barrier(j->c, &err))) break;
    }
    if (j->st) snprintf(j->rule, sizeof j->rule, "%s", err.rule);
    return NULL;
}

static void run_group(int n) {
    fp4_comm *c[MAXR];
    fp4_error err;
    CHECK_OK(fp4_comm_local_create(n, MAXR * N_EL * sizeof(float), c, &err));
    rank_job job[MAXR];
    pthread_t t[MAXR];
    for (int r = 0; r < n; r++) {
        job[r] = (rank_job){c[r], 0, FP4_OK, ""};
        CHECK(pthread_create(&t[r], NULL, rank_main, &job[r]) == 0);
    }
    for (int r = 0; r < n; r++) {
        pthread_join(t[r], NULL);
        CHECK_MSG(job[r].st == FP4_OK && !job[r].bad, "%d ranks: rank %d status %d bad %d", n, r, job[r].st,
                  job[r].bad);
        CHECK(fp4_comm_rank(c[r]) == r && fp4_comm_size(c[r]) == n);
    }
    for (int r = 0; r < n; r++)
        fp4_comm_free(c[r]);
}

static void *waiter(void *p) {
    rank_job *j = p;
    fp4_error err = {0};
    j->st = fp4_comm_barrier(j->c, &err);
    snprintf(j->rule, sizeof j->rule, "%s", err.rule);
    return NULL;
}

static void refusals(void) {
    fp4_comm *c[3];
    fp4_error err;
    CHECK(fp4_comm_local_create(0, 16, c, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_comm_local_create(FP4_COMM_MAX_RANKS + 1, 16, c, &err) == FP4_ERR_INVALID_ARG);
    CHECK(fp4_comm_local_create(2, SIZE_MAX / 2 + 1, c, &err) == FP4_ERR_OVERFLOW);
    CHECK_OK(fp4_comm_local_create(1, 16, c, &err));
    float buf[8] = {0}, out[8];
    CHECK(fp4_comm_all_gather(c[0], buf, out, 17, &err) == FP4_ERR_LIMIT && !strcmp(err.rule, "comm.size"));
    CHECK(fp4_comm_all_reduce_sum(c[0], buf, out, 5, &err) == FP4_ERR_LIMIT &&
          !strcmp(err.rule, "comm.size"));
    CHECK(fp4_comm_all_reduce_sum(c[0], buf, out, -1, &err) == FP4_ERR_INVALID_ARG &&
          !strcmp(err.rule, "comm.args"));
    CHECK(fp4_comm_broadcast(c[0], buf, 4, 1, &err) == FP4_ERR_INVALID_ARG && !strcmp(err.rule, "comm.args"));
    CHECK(fp4_comm_all_gather(c[0], NULL, out, 4, &err) == FP4_ERR_INVALID_ARG);
    CHECK_OK(fp4_comm_all_reduce_sum(c[0], buf, out, 4, &err)); /* one rank: its own values */
    fp4_comm_free(c[0]);
    /* abort: ranks 1 and 2 wait in a barrier that rank 0 never reaches */
    CHECK_OK(fp4_comm_local_create(3, 16, c, &err));
    rank_job job[3];
    pthread_t t[3];
    for (int r = 1; r < 3; r++) {
        job[r] = (rank_job){c[r], 0, FP4_OK, ""};
        CHECK(pthread_create(&t[r], NULL, waiter, &job[r]) == 0);
    }
    fp4_comm_abort(c[0]);
    for (int r = 1; r < 3; r++) {
        pthread_join(t[r], NULL);
        CHECK(job[r].st == FP4_ERR_IO && !strcmp(job[r].rule, "comm.aborted"));
    }
    CHECK(fp4_comm_barrier(c[0], &err) == FP4_ERR_IO && !strcmp(err.rule, "comm.aborted"));
    for (int r = 0; r < 3; r++)
        fp4_comm_free(c[r]);
}

int main(void) {
    for (int n = 1; n <= MAXR; n++)
        run_group(n);
    refusals();
    return check_report();
}
