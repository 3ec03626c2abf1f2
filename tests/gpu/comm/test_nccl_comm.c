/* test_nccl_comm.c — comm.h's NCCL backend on the device machine (built by `make cuda`, run by
 * dev/cuda/run_tp.sh): one process per GPU (forked before CUDA starts), the ncclUniqueId through a
 * file. Each rank checks, on device buffers: all_gather moves every rank's exact bytes, broadcast
 * the root's, all_reduce_sum of small integers (exact in f32 in any order) the sum, a barrier; and
 * a wrong-sized id file is refused (comm.id). Usage: test_nccl_comm N_GPUS (>= 2). */
#include "check.h"
#include "comm/comm.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N_EL = 4099 };

static int rank_main(int rank, int size, const char *id_path) {
    fp4_comm *c;
    fp4_error err;
    if (fp4_comm_nccl_create(rank, size, rank, id_path, 60.0, &c, &err)) {
        fprintf(stderr, "rank %d: %s (%s)\n", rank, err.msg, err.rule);
        return 1;
    }
    float *h = malloc(sizeof(float) * N_EL * (size_t)size), *d_send, *d_recv;
    int bad = !h || cudaMalloc((void **)&d_send, sizeof(float) * N_EL) != cudaSuccess ||
              cudaMalloc((void **)&d_recv, sizeof(float) * N_EL * (size_t)size) != cudaSuccess;
    for (int i = 0; i < N_EL && !bad; i++)
        h[i] = (float)(rank * 100000 + i);
    bad = bad || cudaMemcpy(d_send, h, sizeof(float) * N_EL, cudaMemcpyHostToDevice) != cudaSuccess;
    bad = bad || fp4_comm_all_gather(c, d_send, d_recv, sizeof(float) * N_EL, &err);
    bad = bad || cudaMemcpy(h, d_recv, sizeof(float) * N_EL * size, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (int r = 0; r < size && !bad; r++)
        for (int i = 0; i < N_EL; i++)
            bad |= h[r * N_EL + i] != (float)(r * 100000 + i);
    bad = bad || fp4_comm_all_reduce_sum(c, d_send, d_recv, N_EL, &err);
    bad = bad || cudaMemcpy(h, d_recv, sizeof(float) * N_EL, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (int i = 0; i < N_EL && !bad; i++)
        bad |= h[i] != (float)(100000 * size * (size - 1) / 2 + size * i);
    bad = bad || fp4_comm_broadcast(c, d_send, sizeof(float) * N_EL, size - 1, &err);
    bad = bad || cudaMemcpy(h, d_send, sizeof(float) * N_EL, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (int i = 0; i < N_EL && !bad; i++)
        bad |= h[i] != (float)((size - 1) * 100000 + i);
    bad = bad || fp4_comm_barrier(c, &err);
    if (bad) fprintf(stderr, "rank %d: wrong result or failure (%s)\n", rank, err.rule);
    fp4_comm_free(c);
    free(h);
    return bad;
}

int main(int argc, char **argv) {
    const int size = argc > 1 ? atoi(argv[1]) : 2;
    if (size < 2 || size > FP4_COMM_MAX_RANKS)
        return fprintf(stderr, "usage: test_nccl_comm N_GPUS (>= 2)\n"), 2;
    char dir[512], id_path[600], bad_path[600];
    snprintf(dir, sizeof dir, "%s/fp4lane-nccl-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    snprintf(id_path, sizeof id_path, "%s/id", dir);
    snprintf(bad_path, sizeof bad_path, "%s/bad", dir);
    /* a file that is not an id: refused before NCCL or CUDA start */
    FILE *f = fopen(bad_path, "wb");
    if (f) fputs("short", f), fclose(f);
    fp4_comm *c;
    fp4_error err;
    CHECK(fp4_comm_nccl_create(1, 2, 0, bad_path, 1.0, &c, &err) == FP4_ERR_FORMAT &&
          !strcmp(err.rule, "comm.id"));
    pid_t pid[FP4_COMM_MAX_RANKS];
    for (int r = 0; r < size; r++)
        if ((pid[r] = fork()) == 0) _exit(rank_main(r, size, id_path));
    for (int r = 0; r < size; r++) {
        int ws = 0;
        CHECK(pid[r] > 0 && waitpid(pid[r], &ws, 0) == pid[r]);
        CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "rank %d failed", r);
    }
    unlink(id_path), unlink(bad_path), rmdir(dir);
    return check_report();
}
