/* env.cu — the one reader of the FP4LANE_CUDA_* environment variables (env.h): one row each,
 * name, form and field. Forms: a flag is on when set, non-empty and not "0"; a switch is off only
 * when exactly "0"; GEMM has three states; an int is a decimal number (unset or not one: 0);
 * MEM_LIMIT is a decimal byte count (unset: no limit); PROFILE a path (empty: unset); DECODE a
 * decimal bit set 0..255 (unset or malformed: -1). */
#include "cuda/env.h"
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { ENV_FLAG, ENV_SWITCH, ENV_GEMM, ENV_BYTES, ENV_PATH, ENV_INT, ENV_BITS };

typedef struct env_var {
    const char *name;
    int form;
    size_t off;
} env_var;

#define ENV_ROW(name, form, field)                                                                           \
    { "FP4LANE_CUDA_" name, form, offsetof(fp4_cu_env, field) }
static const env_var env_vars[] = {
    ENV_ROW("GEMM", ENV_GEMM, gemm),
    ENV_ROW("NO_PDL", ENV_FLAG, no_pdl),
    ENV_ROW("NO_QIN", ENV_FLAG, no_qin),
    ENV_ROW("NO_DENSE_MMA", ENV_FLAG, no_dense_mma),
    ENV_ROW("IMMA", ENV_SWITCH, imma),
    ENV_ROW("ATT_GEMM", ENV_SWITCH, att_gemm),
    ENV_ROW("ATT_CLUSTER", ENV_SWITCH, att_cluster),
    ENV_ROW("ATT_CLUSTER_WIDE", ENV_SWITCH, att_cluster_wide),
    ENV_ROW("ATT_TILED", ENV_FLAG, att_tiled),
    ENV_ROW("IMMA_WC", ENV_INT, imma_wc),
    ENV_ROW("IMMA_OCC", ENV_INT, imma_occ),
    ENV_ROW("NO_ARGMAX", ENV_FLAG, no_argmax),
    ENV_ROW("NO_ACTFUSE", ENV_FLAG, no_actfuse),
    ENV_ROW("NO_FUSE", ENV_FLAG, no_fuse),
    ENV_ROW("MOE_GROUPED", ENV_FLAG, moe_grouped),
    ENV_ROW("FRAG", ENV_FLAG, frag),
    ENV_ROW("NO_FRAG", ENV_FLAG, no_frag),
    ENV_ROW("TP_NCCL", ENV_FLAG, tp_nccl),
    ENV_ROW("WARM", ENV_FLAG, warm),
    ENV_ROW("MEM_LIMIT", ENV_BYTES, mem_limit),
    ENV_ROW("PROFILE", ENV_PATH, profile),
    ENV_ROW("DECODE", ENV_BITS, decode),
};
#undef ENV_ROW

static void env_parse(const env_var *v, fp4_cu_env *e) {
    const char *s = getenv(v->name);
    char *f = (char *)e + v->off;
    switch (v->form) {
    case ENV_FLAG:
        *(int *)f = s && *s && strcmp(s, "0");
        break;
    case ENV_SWITCH:
        *(int *)f = !(s && !strcmp(s, "0"));
        break;
    case ENV_GEMM:
        *(int *)f = !s ? -1 : !strcmp(s, "0") ? 0 : !strcmp(s, "1") ? 1 : -1;
        break;
    case ENV_INT:
        *(int *)f = s && *s >= '0' && *s <= '9' && strlen(s) < 6 ? atoi(s) : 0;
        break;
    case ENV_BYTES:
        *(uint64_t *)f = s && *s ? (uint64_t)strtoull(s, NULL, 10) : UINT64_MAX;
        break;
    case ENV_BITS: {
        char *end = NULL;
        const long v = s && *s ? strtol(s, &end, 10) : -1;
        *(int *)f = end && *end == '\0' && v >= 0 && v <= 0xFF ? (int)v : -1;
        break;
    }
    default: /* ENV_PATH */
        *(const char **)f = s && *s ? s : NULL;
        break;
    }
}

extern "C" {

void fp4_cu_env_read(fp4_cu_env *e) {
    memset(e, 0, sizeof *e);
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
        env_parse(&env_vars[i], e);
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static fp4_cu_env env_first;
static void env_read_first(void) {
    fp4_cu_env_read(&env_first);
}
const fp4_cu_env *fp4_cu_env_process(void) {
    pthread_once(&env_once, env_read_first);
    return &env_first;
}

/* the one variable of field off, now (its row found by the field) */
static int env_flag_now(size_t off) {
    fp4_cu_env e;
    memset(&e, 0, sizeof e);
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
        if (env_vars[i].off == off) env_parse(&env_vars[i], &e);
    return *(const int *)((const char *)&e + off);
}
int fp4_cu_env_no_qin(void) {
    return env_flag_now(offsetof(fp4_cu_env, no_qin));
}
int fp4_cu_env_no_dense_mma(void) {
    return env_flag_now(offsetof(fp4_cu_env, no_dense_mma));
}
int fp4_cu_env_imma(void) {
    return env_flag_now(offsetof(fp4_cu_env, imma));
}
int fp4_cu_env_imma_wc(void) {
    return env_flag_now(offsetof(fp4_cu_env, imma_wc));
}
int fp4_cu_env_imma_occ(void) {
    return env_flag_now(offsetof(fp4_cu_env, imma_occ));
}
int fp4_cu_env_decode(void) {
    return env_flag_now(offsetof(fp4_cu_env, decode));
}

} /* extern "C" */
