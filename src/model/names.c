/* names.c — the names of layouts and lanes, as the CLI and the files spell them. */
#include "read_impl.h"

static const char *const layout_names[FP4_LAYOUT_COUNT_] = {"none", "gguf", "gguf-ggml", "modelopt",
                                                             "compressed-tensors"};
const char *const fp4_wp_names[FP4_WP_COUNT_] = {"nvfp4", "q4_k", "f16", "bf16", "f32", "fp8"};
const char *const fp4_ap_names[FP4_AP_COUNT_] = {"a16", "nvfp4"};

const char *fp4_layout_name(fp4_layout l) { return (unsigned)l < FP4_LAYOUT_COUNT_ ? layout_names[l] : "?"; }
const char *fp4_weight_precision_name(fp4_weight_precision p) {
    return (unsigned)p < FP4_WP_COUNT_ ? fp4_wp_names[p] : "?";
}
const char *fp4_act_precision_name(fp4_act_precision p) {
    return (unsigned)p < FP4_AP_COUNT_ ? fp4_ap_names[p] : "?";
}

fp4_status fp4_layout_from_name(const char *name, fp4_layout *out) {
    if (!name || !out) return FP4_ERR_INVALID_ARG;
    int i = fp4_name_index(name, layout_names, FP4_LAYOUT_COUNT_);
    if (i < 0 && !strcmp(name, "ct")) i = FP4_LAYOUT_CT;
    if (i < 0) return FP4_ERR_INVALID_ARG;
    *out = (fp4_layout)i;
    return FP4_OK;
}
