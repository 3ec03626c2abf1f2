/* env.cu — the one reader of the FP4LANE_CUDA_* environment variables (env.h): one row each,
 * name, form and field. Forms: a flag is on when set, non-empty and not "0"; a switch is off only
 * when exactly "0"; GEMM has three states; MEM_LIMIT is a decimal byte count (unset: no limit);
 * PROFILE a path (empty: unset). */
#include "cuda/env.h"
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { ENV_FLAG, ENV_SWITCH, ENV_GEMM, ENV_BYTES, ENV_PATH };

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
    ENV_ROW("NO_ARGMAX", ENV_FLAG, no_argmax),
    ENV_ROW("NO_ACTFUSE", ENV_FLAG, no_actfuse),
    ENV_ROW("NO_FUSE", ENV_FLAG, no_fuse),
    ENV_ROW("FRAG", ENV_FLAG, frag),
    ENV_ROW("NO_FRAG", ENV_FLAG, no_frag),
    ENV_ROW("TP_NCCL", ENV_FLAG, tp_nccl),
    ENV_ROW("MEM_LIMIT", ENV_BYTES, mem_limit),
    ENV_ROW("PROFILE", ENV_PATH, profile),
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
    case ENV_BYTES:
        *(uint64_t *)f = s && *s ? (uint64_t)strtoull(s, NULL, 10) : UINT64_MAX;
        break;
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

} /* extern "C" */
