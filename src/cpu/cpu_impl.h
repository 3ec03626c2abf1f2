/* cpu_impl.h — internals of the CPU backend (src/cpu/): the thread pool, the CPU path choice and
 * the ISA kernels (AVX2 / AVX-512, compiled by target attributes and chosen at run time). Every
 * kernel gives the bits of the portable reference in src/format/ (test_cpu_paths). */
#ifndef FP4_CPU_IMPL_H
#define FP4_CPU_IMPL_H

#include "fp4_impl.h"
#include "fp4lane_runtime.h"


/* CPU code paths (cpu_path.c). All give the same bits; fp4_cpu_path() is the one in use:
 * CPUID, lowered by $FP4_CPU_PATH (portable|avx2|avx512) and by fp4_cpu_force_path (tests;
 * -1 = no forcing). fp4_cpu_pick is the pure rule: best path the CPU has, env a ceiling. */
enum { FP4_CPU_PORTABLE = 0, FP4_CPU_AVX2 = 1, FP4_CPU_AVX512 = 2, FP4_CPU_N_PATHS = 3 };
int fp4_cpu_path(void);
int fp4_cpu_best_path(void);
int fp4_cpu_pick(int best, const char *env);
const char *fp4_cpu_path_name(int path);
void fp4_cpu_force_path(int path);
/* The CPU backend's environment, read once per process (cpu_path.c; HACKING.md lists them):
 * FP4_CPU_PATH (the path ceiling above) and FP4_CPU_NO_COLS (set: the multi-column kernels off,
 * the B side of a benchmark; the bits are the same either way). */
typedef struct fp4_cpu_env {
    const char *path_ceiling; /* $FP4_CPU_PATH or NULL */
    int no_cols;              /* $FP4_CPU_NO_COLS is set */
} fp4_cpu_env;
const fp4_cpu_env *fp4_cpu_env_get(void);
/* the multi-column kernels in use: on unless FP4_CPU_NO_COLS, or fp4_cpu_force_cols (tests: 0 off,
 * 1 on, -1 back to the environment's choice) */
int fp4_cpu_cols_on(void);
void fp4_cpu_force_cols(int on);

/* Exact A16 row dots (contract_x86.c, contract_avx512.c): the same bits as contract.c's. They
 * read activations rearranged once per column (n_in bytes each; fp4_a16_act_avx2 also writes
 * their absolute values) and the super-block scales d[]; only Q8_K values in [-127, 127] (what
 * fp4_q8_K_quantize makes). */
void fp4_a16_act_avx2(const fp4_block_q8_K *xq, int64_t nsb, int8_t *act, uint8_t *aabs);
float fp4_dot_a16_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2, const int8_t *act,
                       const uint8_t *aabs, const float *d, int64_t n_in);
void fp4_a16_act_avx512(const fp4_block_q8_K *xq, int64_t nsb, int8_t *dst);
/* fp4_round_f16 by F16C (same bits for every f32): the row dots' F16 output boundary */
float fp4_round_f16_avx2(float f);
float fp4_round_f16_avx512(float f);
float fp4_dot_a16_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                         const int8_t *act, const float *d, int64_t n_in);
/* The multi-column kernels' entry points: F(args..., NC) with NC a compile-time constant 1..4 (nc
 * beyond 4 takes 4), so that an always_inline core keeps each column's sums in registers. */
#define FP4_NC_DISPATCH(nc, F, ...)                                                                          \
    do {                                                                                                     \
        switch (nc) {                                                                                        \
        case 1: F(__VA_ARGS__, 1); break;                                                                    \
        case 2: F(__VA_ARGS__, 2); break;                                                                    \
        case 3: F(__VA_ARGS__, 3); break;                                                                    \
        default: F(__VA_ARGS__, 4); break;                                                                   \
        }                                                                                                    \
    } while (0)

/* nc (1..4) columns of one row at once, each with fp4_dot_a16_avx512's bits: actu holds each
 * column's rearranged activations offset to unsigned (fp4_a16_actu_avx512 of the act above), column
 * c at actu + c * act_stride, its super-block scales at d + c * d_stride; out[c] its result. */
void fp4_a16_actu_avx512(const int8_t *act, int64_t n, uint8_t *dst);
/* the same on the AVX2 path: actu = act ^ 0x80 on act's AVX2 layout (fp4_a16_act_avx2), each
 * column's results with fp4_dot_a16_avx2's bits */
void fp4_dot_a16_cols_avx2(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                           const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                           int64_t n_in, int nc, float *out);
void fp4_dot_a16_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                             const uint8_t *actu, int64_t act_stride, const float *d, int64_t d_stride,
                             int64_t n_in, int nc, float *out);

/* W4A4 row dot, AVX-512 (contract_avx512.c): the same bits as fp4_nvfp4_dot_w4a4. Per column,
 * fp4_w4a4_act_avx512 decodes the activation codes to signed int8 (rearranged like the A16
 * ones) and their scales to q9, padded to a multiple of 8 groups: act holds ceil(n_in/128)·128
 * bytes, q9a ceil(n_in/128)·8 values. */
void fp4_w4a4_act_avx512(const uint8_t *codes, const uint8_t *scales, int64_t n_in, int8_t *act,
                         int64_t *q9a);
float fp4_dot_w4a4_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                          const int8_t *act, const int64_t *q9a, float input_scale_inv, int64_t n_in);
/* nc (1..4) columns of one W4A4 row at once, each with fp4_dot_w4a4_avx512's bits: actu holds each
 * column's act offset to unsigned (fp4_a16_actu_avx512 over its act_stride = ceil(n_in/128)·128
 * bytes, padding included), column c at actu + c * act_stride, its q9a at q9a + c * act_stride / 16 */
void fp4_dot_w4a4_cols_avx512(const uint8_t *payload_row, const uint8_t *scales_row, float scale2,
                              const uint8_t *actu, const int64_t *q9a, int64_t act_stride,
                              float input_scale_inv, int64_t n_in, int nc, float *out);

/* Q4_K dots, AVX2 and AVX-512 (kquant_avx2.c, kquant_avx512.c): the same bits as kquant_dot.c's
 * ggml-generic order. act is NULL or the activations rearranged by the matching fp4_q4K_act_*:
 * FP4_Q4K_ACT_BYTES per block, the 256 values (the two layouts differ) then the 8 pair sums
 * bsums[2k] + bsums[2k+1] as int16, which fit for blocks made by fp4_q8_K_quantize (|sum| <= 32·127). */
#define FP4_Q4K_ACT_BYTES 272
void fp4_q4K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q4K_dot_avx2(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
void fp4_q4K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q4K_dot_avx512(const fp4_block_q4_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
/* rows 0..n-1 (n = 1..4) of w (row_bytes apart, nb blocks each) against one column: its blocks x and
 * act, those rearranged by fp4_q4K_act4_avx512 (a layout of its own, FP4_Q4K_ACT_BYTES per block):
 * y[r] = fp4_q4K_dot_avx512 of row r, the same bits */
void fp4_q4K_act4_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
void fp4_q4K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y);
/* the same for nc (1..4) columns at once (column c: x + c·nb, act + c·nb·FP4_Q4K_ACT_BYTES, y + c·y_stride),
 * the rows' heads and nibbles decoded once per block for them; each column's bits as one call's */
void fp4_q4K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride);

/* Q6_K dots, AVX2 and AVX-512 (kquant_avx2.c, kquant_avx512.c): the same bits as kquant_dot.c's
 * q6K_dot. act is NULL or the activations rearranged by the matching fp4_q6K_act_*: FP4_Q6K_ACT_BYTES
 * per block, the 256 values (the two layouts differ) then 128 int16 bias terms 32·(a + a'). */
#define FP4_Q6K_ACT_BYTES 512
void fp4_q6K_act_avx2(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q6K_dot_avx2(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
void fp4_q6K_act_avx512(const fp4_block_q8_K *x, int64_t nb, int8_t *dst);
float fp4_q6K_dot_avx512(const fp4_block_q6_K *w, const fp4_block_q8_K *x, const int8_t *act, int64_t nb);
/* rows 0..n-1 (n = 1..4), as fp4_q4K_rows4_avx512, against act from fp4_q6K_act_avx512:
 * y[r] = fp4_q6K_dot_avx512 of row r, the same bits */
void fp4_q6K_rows4_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                          const int8_t *act, int64_t nb, float *y);
/* the same for nc (1..4) columns at once, as fp4_q4K_rows4_cols_avx512 */
void fp4_q6K_rows4_cols_avx512(const uint8_t *w, size_t row_bytes, int n, const fp4_block_q8_K *x,
                               const int8_t *act, int64_t nb, int nc, float *y, int64_t y_stride);

/* fp4p_attend (src/format/pinned.h) on the AVX2 / AVX-512 paths, the same bits
 * (src/cpu/attend_x86.c) */
void fp4_attend_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                     int head_dim, float scale, float *s, float *o);
void fp4_attend_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride, int64_t n,
                       int head_dim, float scale, float *s, float *o);
/* fp4p_attend of query heads hq0 .. hq0 + nh - 1 of one column (kv head (hq0 + h) / group; q and o
 * hold the nh heads' head_dim values back to back; k0 / v0 point at kv head 0 of position 0) with
 * AVX-512, positions outside and heads inside (src/cpu/attend_heads_x86.c); scratch s holds
 * nh * n floats, P nh * 32 * head_dim. The same bits as fp4p_attend head by head. */
enum { FP4_ATTEND_MAX_HD = 512, FP4_ATTEND_MAX_HEADS = 16 };
void fp4_attend_heads_avx512(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                             int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                             float *P, float *o);
/* the same with AVX2 (src/cpu/attend_heads_avx2.c), and fp4p_attend head by head (portable) */
void fp4_attend_heads_portable(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                               int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                               float *P, float *o);
void fp4_attend_heads_avx2(const float *q, const uint16_t *k0, const uint16_t *v0, int64_t row_stride,
                           int64_t n, int head_dim, int64_t hq0, int nh, int group, float scale, float *s,
                           float *P, float *o);
/* fp4p_exp on n values and g[i] = fp4p_swiglu(g[i], u[i]) for i < n, 16 / 8 lanes at a time
 * (src/cpu/pinned_x86.c): the same bits (a NaN may be another NaN) */
void fp4_exp_avx512(const float *x, float *y, int64_t n);
void fp4_exp_avx2(const float *x, float *y, int64_t n);
void fp4_swiglu_avx512(float *g, const float *u, int64_t n);
void fp4_swiglu_avx2(float *g, const float *u, int64_t n);
/* The CPU backend's paged KV cache (src/cpu/kv_pages.c): per slot a reserved range laid out
 * [pos][layer][NKV*D] halves (row = n_layers * NKV*D halves per position), committed in blocks of
 * `block` positions (whole pages) as the sequence grows, given back when it is trimmed. */
typedef struct fp4_kv_pages {
    uint8_t *k, *v;                /* n_slots ranges of slot_bytes each                        */
    size_t slot_bytes, block_bytes, map_bytes;
    int64_t block, row, max_blocks; /* positions per block, halves per position, blocks per slot */
    int32_t n_slots;
    int64_t *committed;            /* per slot: blocks [0, committed) readable and writable     */
} fp4_kv_pages;
fp4_status fp4_kv_pages_init(fp4_kv_pages *p, int32_t n_slots, int64_t n_ctx, int64_t row_halves);
void fp4_kv_pages_free(fp4_kv_pages *p);
/* positions [0, n_pos) of a slot usable: FP4_ERR_NOMEM when the system refuses the pages */
fp4_status fp4_kv_pages_commit(fp4_kv_pages *p, int32_t slot, int64_t n_pos);
/* the blocks wholly past n_pos given back (n_pos 0: the sequence ended) */
void fp4_kv_pages_trim(fp4_kv_pages *p, int32_t slot, int64_t n_pos);
int64_t fp4_kv_pages_used(const fp4_kv_pages *p); /* committed blocks over all slots */
/* K (or V) of a slot's position pos, layer L: base is p->k or p->v */
static inline uint16_t *fp4_kv_pages_at(const fp4_kv_pages *p, uint8_t *base, int32_t slot, int64_t L,
                                        int64_t kvd, int64_t pos) {
    return (uint16_t *)(base + (size_t)slot * p->slot_bytes) + pos * p->row + L * kvd;
}
/* kv_rows.c: a slot's K/V rows by layer (a local layer's ring: backend.h, fp4_rt_kv_ring). off[L]
 * is layer L's first row in a slot, ring[L] its ring (0: n_ctx rows), stride a slot's rows. */
typedef struct fp4_kv_rows {
    int64_t *off, *ring, stride;
} fp4_kv_rows;
fp4_status fp4_kv_rows_init(fp4_kv_rows *r, const fp4_arch *a, int64_t n_ctx, int64_t max_cols);
void fp4_kv_rows_free(fp4_kv_rows *r);
void fp4_kv_window(const fp4_kv_rows *r, const fp4_arch *a, int64_t L, int64_t pos, int64_t *row0,
                   int64_t *n);
void fp4_kv_put(const fp4_kv_rows *r, int64_t L, int64_t pos, uint16_t *slot_base, int64_t kvd, int64_t i0,
                const uint16_t *src, int64_t n);
void fp4_kv_copy(const fp4_kv_rows *r, const fp4_arch *a, uint16_t *slot_base, int64_t n_pos, int64_t kvd,
                 uint16_t *host, int to_host);
/* gemma_ops.c: Gemma 3's operations of the step (pinned_gemma.h) */
void fp4_cpu_embed_scale(const fp4_arch *a, const fp4_tensor *emb, float *x, int64_t n_cols);
fp4_status fp4_cpu_geglu(float *g, const float *u, int64_t n, int n_threads);
void fp4_cpu_post_norm_add(float *x, float *t, const float *w, int64_t n_cols, int64_t H, float eps);
void fp4_cpu_softcap(float *logits, int64_t n, double cap);

#endif
