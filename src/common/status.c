/* status.c — status names, version, error filling. */
#include "fp4_impl.h"
#include <stdio.h>

static const char *const status_names[FP4_STATUS_COUNT_] = {
    [FP4_OK] = "ok",
    [FP4_ERR_INVALID_ARG] = "invalid argument",
    [FP4_ERR_NOMEM] = "out of memory",
    [FP4_ERR_IO] = "i/o error",
    [FP4_ERR_FORMAT] = "malformed file",
    [FP4_ERR_TRUNCATED] = "truncated file",
    [FP4_ERR_LIMIT] = "limit exceeded",
    [FP4_ERR_OVERFLOW] = "size overflow",
    [FP4_ERR_UNSUPPORTED] = "unsupported",
    [FP4_ERR_SHAPE] = "bad shape",
    [FP4_ERR_DTYPE] = "bad dtype",
    [FP4_ERR_NAN_SCALE] = "bad scale byte (NaN or negative E4M3)",
    [FP4_ERR_SCALE2] = "bad per-tensor scale",
    [FP4_ERR_COMPANION] = "bad companion tensor",
    [FP4_ERR_LANE] = "lane mismatch",
    [FP4_ERR_NONFINITE] = "non-finite input",
    [FP4_ERR_NOT_FOUND] = "not found",
    [FP4_ERR_DUPLICATE] = "duplicate name",
    [FP4_ERR_BOUNDS] = "out of bounds",
    [FP4_ERR_CUDA] = "CUDA error",
    [FP4_ERR_NO_DEVICE] = "no CUDA device",
    [FP4_ERR_REFUSED_ROUTE] = "refused route",
};

const char *fp4_status_str(fp4_status s) {
    if ((unsigned)s >= FP4_STATUS_COUNT_ || !status_names[s]) return "unknown status";
    return status_names[s];
}

const char *fp4_version(void) { return FP4LANE_VERSION_STRING; }

void fp4_error_clear(fp4_error *err) {
    if (err) memset(err, 0, sizeof *err);
}

fp4_status fp4_fail(fp4_error *err, fp4_status code, const char *file, const char *tensor, const char *rule,
                    const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    snprintf(err->tensor, sizeof err->tensor, "%s", tensor ? tensor : "");
    snprintf(err->rule, sizeof err->rule, "%s", rule ? rule : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}
