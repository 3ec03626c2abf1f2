/* types.c — the element-type registry: one static table (name, block size, type size) for
 * every fp4_type id. Ids below 1024 and their sizes are ggml's; ids >= 1024 are fp4lane's own
 * (SPEC §7). Lookup is a scan of 16 rows: no id dispatch by switch anywhere. */
#include "fp4_impl.h"

static const fp4_type_info type_table[] = {
    {FP4_TYPE_F32, "f32", 1, 4},
    {FP4_TYPE_F16, "f16", 1, 2},
    {FP4_TYPE_Q8_0, "q8_0", 32, 34},          /* f16 d + 32 int8                               */
    {FP4_TYPE_Q4_K, "q4_K", 256, 144},        /* f16 d, dmin + 12 scale bytes + 128 nibble bytes */
    {FP4_TYPE_Q6_K, "q6_K", 256, 210},        /* 128 ql + 64 qh + 16 scales + f16 d            */
    {FP4_TYPE_Q8_K, "q8_K", 256, 292},        /* f32 d + 256 int8 + 16 int16 bsums             */
    {FP4_TYPE_I8, "i8", 1, 1},
    {FP4_TYPE_I16, "i16", 1, 2},
    {FP4_TYPE_I32, "i32", 1, 4},
    {FP4_TYPE_I64, "i64", 1, 8},
    {FP4_TYPE_F64, "f64", 1, 8},
    {FP4_TYPE_BF16, "bf16", 1, 2},
    {FP4_TYPE_GGML_NVFP4, "nvfp4", 64, 36},   /* 4 UE4M3 bytes + 32 nibble bytes (ggml name)   */
    {FP4_TYPE_NVFP4_E2M1, "nvfp4_e2m1", 2, 1},/* two E2M1 codes per byte, low nibble first     */
    {FP4_TYPE_F8_E4M3FN, "f8_e4m3fn", 1, 1},
    {FP4_TYPE_U8, "u8", 1, 1},
};

const fp4_type_info *fp4_type_get(int64_t type_id) {
    for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
        if ((int64_t)type_table[i].type == type_id) return &type_table[i];
    return NULL;
}

fp4_status fp4_type_row_size(int64_t type_id, int64_t n, size_t *bytes) {
    const fp4_type_info *t = fp4_type_get(type_id);
    if (!t) return FP4_ERR_UNSUPPORTED;
    if (n < 0 || n % t->block_size != 0) return FP4_ERR_SHAPE;
    uint64_t r;
    if (fp4_mul_overflow_u64((uint64_t)(n / t->block_size), (uint64_t)t->type_size, &r) || r > SIZE_MAX)
        return FP4_ERR_OVERFLOW;
    if (bytes) *bytes = (size_t)r;
    return FP4_OK;
}
