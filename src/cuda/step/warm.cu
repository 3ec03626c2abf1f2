/* warm.cu — what a cold process would otherwise pay inside its first prefill, paid while the engine
 * is created, where the native GEMM route serves prefill (native mode, cuBLAS loaded):
 *   - cuBLAS's handle is made on a thread of its own, started as soon as the device is initialized,
 *     so that the loading of its library and modules into the context (host work)
 *     runs beside the memory plan and the weights' upload instead of after them; the handle is the
 *     one every later GEMM uses (a16_gemm.cu), made once, on the engine's device;
 *   - after everything is allocated, one discarded step of max_cols columns (token 0 in slot 0 at
 *     positions 0.., only the last wanting its token): cuBLAS's first call per shape (its heuristic
 *     query, its kernels' lazy loading, its workspace) and every step kernel's first launch happen
 *     here, so the user's first prefill runs at the steady speed.
 * No bit of any later step changes: the discarded step writes slot 0's cache rows up to max_cols,
 * and THE STEP writes a position's row before any column reads it (attention reads positions up to
 * the column's own, of this step or earlier ones); cuBLAS takes one algorithm per shape whether
 * or not it has run that shape before (a16_gemm.cu); the step leaves its tickets and argmax work
 * at zero, as every step does; the profile's totals are cleared after it. test_gpu_runtime's
 * warm_case holds the logits of warmed and unwarmed engines byte for byte. OFF until a device run
 * has proven it: FP4LANE_CUDA_WARM=1 turns it on (dev/gpu/firsttok/run.sh measures it). */
#include "cuda/step/step_impl.cuh"
#include <malloc.h>
#include <pthread.h>
#include <string.h>

/* never on a rank of the split step (tp.cu): its step's row-parallel gathers need every rank */
static int warm_wanted(const cu_state *s) {
    return s->env.warm && !s->tp && s->d.mode == FP4_MODE_NATIVE && fp4_cu_gemm_available();
}

static void *prep_main(void *p) {
    const cu_state *s = (const cu_state *)p;
    if (cudaSetDevice(s->d.device) == cudaSuccess) fp4_cu_gemm_warm();
    /* heap the library's load freed again goes back to the system, not kept by malloc */
    malloc_trim(0);
    return NULL;
}

extern "C" {

void fp4_cu_step_prep_start(cu_state *s) {
    if (!warm_wanted(s) || s->prep_on) return;
    s->prep_on = pthread_create(&s->prep, NULL, prep_main, s) == 0;
}

void fp4_cu_step_prep_join(cu_state *s) {
    if (!s->prep_on) return;
    pthread_join(s->prep, NULL);
    s->prep_on = 0;
}

fp4_status fp4_cu_step_warm(cu_state *s, fp4_error *err) {
    if (!warm_wanted(s)) return FP4_OK;
    const int64_t n = s->max_cols < s->d.n_ctx ? s->max_cols : s->d.n_ctx;
    fp4_status st = fp4_cu_step_warm_step(s, n, err);
    memset(s->prof_ms, 0, sizeof s->prof_ms);
    memset(s->prof_steps, 0, sizeof s->prof_steps);
    memset(s->prof_cols, 0, sizeof s->prof_cols);
    return st;
}

} /* extern "C" */
