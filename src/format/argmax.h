/* argmax.h — greedy decoding's choice from a row of logits, in one place for the sampler
 * (sample.c), the runtime's host fallback of fp4_rt_step_greedy (rt.c) and the CUDA backend's
 * FP4LANE_CUDA_NO_ARGMAX path (step_cuda.cu); the device kernel (src/cuda/argmax.cu) follows the
 * same rule and is tested against it (tests/gpu/test_gpu_argmax.cu). */
#ifndef FP4_RT_ARGMAX_H
#define FP4_RT_ARGMAX_H

#include <math.h>
#include <stdint.h>

/* The first index of the largest value, NaN never chosen, 0 when every value is -inf or NaN.
 * Eight running maxima, then the first index holding the maximum: two light passes instead of a
 * copy, a NaN pass and a serial scan (a 128k vocabulary: 250-300 us a token on the project VM
 * before, ~25 us after; CLAIMS sampler-1). */
static inline int32_t fp4_rt_greedy_argmax(const float *l, int64_t V) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= V; i += 8)
        for (int k = 0; k < 8; k++)
            m[k] = l[i + k] > m[k] ? l[i + k] : m[k];
    for (; i < V; i++)
        m[0] = l[i] > m[0] ? l[i] : m[0];
    float best = m[0];
    for (int k = 1; k < 8; k++)
        best = m[k] > best ? m[k] : best;
    if (best == -INFINITY) return 0;
    for (i = 0; i < V; i++)
        if (l[i] == best) break;
    return (int32_t)i;
}

/* The first index of a NaN or infinite value, -1 when every value is finite: one pass of eight
 * running sums of x * 0 (NaN exactly when x is not finite), then a search only when one is NaN.
 * A row of logits holding one is refused (rule rt.nonfinite) rather than sampled: NaN is never
 * chosen, so a NaN row would read as token 0. */
static inline int64_t fp4_rt_nonfinite_index(const float *l, int64_t V) {
    float z[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= V; i += 8)
        for (int k = 0; k < 8; k++)
            z[k] += l[i + k] * 0.0f;
    for (; i < V; i++)
        z[0] += l[i] * 0.0f;
    float t = 0;
    for (int k = 0; k < 8; k++)
        t += z[k];
    if (t == 0) return -1;
    for (i = 0; i < V; i++)
        if (!isfinite(l[i])) return i;
    return -1;
}

#endif
