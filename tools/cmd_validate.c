/* cmd_validate.c — `fp4lane validate FILE|DIR [--json]`: the fail-closed loader on its own (opened
 * with FP4_LOAD_DEFER_REPACK: the same checks, no repacked copy of llama.cpp's type-40 tensors).
 * Exit 0 and a one-line summary when the checkpoint loads; 1 with the error on stderr when it is
 * refused; 2 on usage errors. */
#include "cli.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_validate(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] == '-' || path) path = NULL, i = argc;
        else path = argv[i];
    }
    if (!path) return cli_usage("validate");
    fp4_model *m = NULL;
    fp4_error e;
    /* deferred: every check of the default open (the same verdicts), without the host copy of
     * llama.cpp's type-40 tensors; validate reads no weight */
    const fp4_load_opts lo = {.flags = FP4_LOAD_DEFER_REPACK};
    fp4_status st = fp4_model_open(path, &lo, &m, &e);
    int64_t n_nv = 0, n_fp8 = 0;
    for (int64_t i = 0; !st && i < fp4_model_n_tensors(m); i++) {
        n_nv += fp4_model_tensor(m, i)->type == FP4_TYPE_NVFP4_E2M1;
        n_fp8 += fp4_model_tensor(m, i)->type == FP4_TYPE_F8_E4M3FN; /* FP8 weights (fp4_fp8_view) */
    }
    if (json) {
        json_t *o =
            st ? json_pack("{s:b,s:s,s:s,s:s,s:s,s:s}", "valid", 0, "status", fp4_status_str(st), "file",
                           e.file, "tensor", e.tensor, "rule", e.rule, "message", e.msg)
               : json_pack("{s:b,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "valid", 1, "file", path, "layout",
                           fp4_layout_name(fp4_model_layout(m)), "weight_precision",
                           fp4_weight_precision_name(fp4_model_weight_precision(m)), "activation_precision",
                           fp4_act_precision_name(fp4_model_act_precision(m)), "tensors",
                           (json_int_t)fp4_model_n_tensors(m), "nvfp4_tensors", (json_int_t)n_nv,
                           "fp8_tensors", (json_int_t)n_fp8, "bytes", (json_int_t)fp4_model_file_bytes(m));
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
        puts(s ? s : "{}");
        free(s);
        json_decref(o);
    }
    if (st) {
        fp4_model_close(m);
        return cli_report_error("validate", st, &e);
    }
    char fp8s[40];
    if (!json)
        printf("valid: %s: %s layout, weights %s, activations %s, %lld tensors (%lld NVFP4%s), %llu bytes\n",
               cli_escaped(path, (char[1200]){0}, 1200), fp4_layout_name(fp4_model_layout(m)),
               fp4_weight_precision_name(fp4_model_weight_precision(m)),
               fp4_act_precision_name(fp4_model_act_precision(m)), (long long)fp4_model_n_tensors(m),
               (long long)n_nv,
               n_fp8 ? (snprintf(fp8s, sizeof fp8s, ", %lld FP8", (long long)n_fp8), fp8s) : "",
               (unsigned long long)fp4_model_file_bytes(m));
    fp4_model_close(m);
    return 0;
}
