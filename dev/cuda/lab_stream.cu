/* lab_stream.cu — the kernel lab's stream variants (src/cuda/a16_stream.cuh, round 8), 1 column:
 * exact (SPEC §4, bit-identical: the Q8_K pass, then the stream kernel) and native (SPEC §6: the
 * int16 activation pass, then the stream kernel). NW = warps per block, IPS = items (row x
 * super-block, 144 bytes) per shared-memory stage, NST = stages, BPS = blocks per SM, PDL =
 * programmatic dependent launch after the activation pass.
 *
 *   .50  NW 8,  IPS 128, NST 4, BPS 1, PDL   (72 KB of weights in flight per SM)
 *   .51  NW 8,  IPS 64,  NST 8, BPS 1, PDL   (the same bytes, finer stages)
 *   .52  NW 16, IPS 128, NST 4, BPS 1, PDL
 *   .53  NW 8,  IPS 256, NST 3, BPS 1, PDL
 *   .54  NW 8,  IPS 64,  NST 4, BPS 2, PDL
 *   .55  .50 with a plain launch (what PDL is worth)
 *   .56  NW 16, IPS 256, NST 4, BPS 1, PDL   (144 KB in flight per SM)
 *   .57  NW 8,  IPS 128, NST 3, BPS 2, PDL
 *   .58  NW 4,  IPS 64,  NST 4, BPS 3, PDL   (fewer blocks per SM where shared memory is short)
 *   exact.60  the kernel of exact.50 alone, on activations quantized beforehand
 * One item per lane (a16_item_kernel: IPS = NW * 32 items per stage):
 *   .61  NW 8,  NST 4, BPS 1, PDL   (36 KB stages; exact: the route at 1 column, round 8)
 *   .62  NW 16, NST 2, BPS 1, PDL   (72 KB stages)
 *   .63  NW 12, NST 3, BPS 1, PDL
 *   .64  NW 8,  NST 3, BPS 1, PDL
 *   .65  .61 with a plain launch
 *   .66  NW 4,  NST 4, BPS 2, PDL   (1 where shared memory is short)
 *   exact.69  the kernel of exact.61 alone
 *   native.67 the exact path of exact.61 (Q8_K pass + exact item kernel), validated as native
 * The PRMT lookup words read once from shared memory (TAB 1, round 9: no per-PRMT copies from
 * uniform registers):
 *   .71  NW 8,  NST 4, BPS 1, PDL, TAB 1
 *   .72  NW 8,  NST 3, BPS 1, PDL, TAB 1
 *   exact.79  the kernel of exact.71 alone
 * Session 7, for the decode step's 4096-wide shapes (few items per block), TAB 1:
 *   .73  NW 8,  NST 2, BPS 2     .74  NW 16, NST 2, BPS 1
 *   .75  NW 4,  NST 3, BPS 3     .76  NW 4,  NST 4, BPS 2
 *   .82-.86  .72-.76 quantizing their own input in every block (QIN; .82 is the route's kernel)
 * All of them ask for enough shared memory that no more than BPS blocks share an SM.
 */
#include "lab_variants.h"
#include "lab_stream_kernel.cuh"

template <bool EXACT>
static fp4_status stream_launch(int variant, const fp4_cuda_tensor *w, const void *q, const float *d,
                                float *y, cudaStream_t s) {
    switch (variant) {
    case 50: return launch_stream<EXACT, 8, 128, 4>(w, q, d, y, 1, 1, s);
    case 51: return launch_stream<EXACT, 8, 64, 8>(w, q, d, y, 1, 1, s);
    case 52: return launch_stream<EXACT, 16, 128, 4>(w, q, d, y, 1, 1, s);
    case 53: return launch_stream<EXACT, 8, 256, 3>(w, q, d, y, 1, 1, s);
    case 54: return launch_stream<EXACT, 8, 64, 4>(w, q, d, y, 2, 1, s);
    case 55: return launch_stream<EXACT, 8, 128, 4>(w, q, d, y, 1, 0, s);
    case 56: return launch_stream<EXACT, 16, 256, 4>(w, q, d, y, 1, 1, s);
    case 57: return launch_stream<EXACT, 8, 128, 3>(w, q, d, y, 2, 1, s);
    case 58: return launch_stream<EXACT, 4, 64, 4>(w, q, d, y, 3, 1, s);
    case 61: return launch_item<EXACT, 8, 4>(w, q, d, y, 1, 1, s);
    case 62: return launch_item<EXACT, 16, 2>(w, q, d, y, 1, 1, s);
    case 63: return launch_item<EXACT, 12, 3>(w, q, d, y, 1, 1, s);
    case 64: return launch_item<EXACT, 8, 3>(w, q, d, y, 1, 1, s);
    case 65: return launch_item<EXACT, 8, 4>(w, q, d, y, 1, 0, s);
    case 66: return launch_item<EXACT, 4, 4>(w, q, d, y, 2, 1, s);
    case 71: return launch_item<EXACT, 8, 4, 1>(w, q, d, y, 1, 1, s);
    case 72: return launch_item<EXACT, 8, 3, 1>(w, q, d, y, 1, 1, s);
    case 73: return launch_item<EXACT, 8, 2, 1>(w, q, d, y, 2, 1, s);
    case 74: return launch_item<EXACT, 16, 2, 1>(w, q, d, y, 1, 1, s);
    case 75: return launch_item<EXACT, 4, 3, 1>(w, q, d, y, 3, 1, s);
    case 76: return launch_item<EXACT, 4, 4, 1>(w, q, d, y, 2, 1, s);
    /* QIN: q is the f32 input */
    case 82: return launch_item<EXACT, 8, 3, 1, true>(w, q, NULL, y, 1, 1, s);
    case 83: return launch_item<EXACT, 8, 2, 1, true>(w, q, NULL, y, 2, 1, s);
    case 84: return launch_item<EXACT, 16, 2, 1, true>(w, q, NULL, y, 1, 1, s);
    case 85: return launch_item<EXACT, 4, 3, 1, true>(w, q, NULL, y, 3, 1, s);
    case 86: return launch_item<EXACT, 4, 4, 1, true>(w, q, NULL, y, 2, 1, s);
    default: return FP4_ERR_UNSUPPORTED;
    }
}

fp4_status lab_stream(int exact, int variant, const fp4_cuda_tensor *w, const float *d_x, int64_t n_cols,
                      float *d_y, const fp4_cuda_scratch *s, cudaStream_t stream) {
    if (n_cols != 1) return FP4_ERR_UNSUPPORTED;
    uint8_t *base = (uint8_t *)s->d_base + FP4_CU_COUNTER_BYTES;
    if (variant >= 82) { /* QIN: no pass */
        if (exact && (w->k_pad != w->n_in || w->n_in % 256)) return FP4_ERR_SHAPE;
        return exact ? stream_launch<true>(variant, w, d_x, NULL, d_y, stream)
                     : stream_launch<false>(variant, w, d_x, NULL, d_y, stream);
    }
    if (exact || variant == 67) { /* native.67: the exact kernel of exact.61, held to native's error */
        if (variant == 67) variant = 61;
        if (w->k_pad != w->n_in || w->n_in % 256) return FP4_ERR_SHAPE;
        int8_t *q = (int8_t *)base;
        float *d = (float *)(base + FP4_CU_ALIGN((size_t)w->k_pad));
        FP4_CU_TRY(fp4_cu_q8k_quantize(d_x, w->n_in, w->k_pad, 1, q, d, NULL, 0, stream));
        return stream_launch<true>(variant, w, q, d, d_y, stream);
    }
    int16_t *q = (int16_t *)base;
    float *d = (float *)(base + FP4_CU_ALIGN((size_t)w->k_pad * 2));
    FP4_CU_TRY(act16_pass(w, d_x, 1, q, d, stream));
    return stream_launch<false>(variant, w, q, d, d_y, stream);
}

fp4_status lab_stream_matvec(int variant, const fp4_cuda_tensor *w, const int8_t *d_q, const float *d_d,
                             float *d_y, cudaStream_t stream) {
    const int v = variant == 69 ? 61 : variant == 79 ? 71 : variant - 10;
    return stream_launch<true>(v, w, d_q, d_d, d_y, stream);
}
