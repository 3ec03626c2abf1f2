/* ggml_oracle.c — dlopen helper for the ggml oracle (see ggml_oracle.h). */
#include "ggml_oracle.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORACLE_DEFAULT_DIR "third_party/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

static int oracle_sym(void *h, const char *name, void *slot, size_t slot_size, char *err, size_t err_len) {
    dlerror();
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(err, err_len, "ggml oracle: symbol %s not found", name);
        return -1;
    }
    memcpy(slot, &p, slot_size); /* object pointer -> function pointer, as POSIX allows */
    return 0;
}

#define SYM(h, field, name)                                                                    \
    do {                                                                                       \
        if (oracle_sym((h), (name), &o->field, sizeof o->field, err, err_len)) goto fail;      \
    } while (0)

int ggml_oracle_open(ggml_oracle *o, const char *cpu_variant, char *err, size_t err_len) {
    memset(o, 0, sizeof *o);
    const char *dir = getenv("FP4_GGML_DIR");
    if (!dir || !*dir) dir = ORACLE_DEFAULT_DIR;
    const char *var = getenv("FP4_GGML_CPU");
    if (!var || !*var) var = cpu_variant ? cpu_variant : "x64";
    snprintf(o->dir, sizeof o->dir, "%s", dir);
    snprintf(o->cpu_name, sizeof o->cpu_name, "libggml-cpu-%s.so", var);
    char path[1200];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    o->base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!o->base) {
        snprintf(err, err_len, "ggml oracle: cannot open %s (%s); run `make oracle`", path, dlerror());
        goto fail;
    }
    snprintf(path, sizeof path, "%s/%s", dir, o->cpu_name);
    o->cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!o->cpu) {
        snprintf(err, err_len, "ggml oracle: cannot open %s (%s)", path, dlerror());
        goto fail;
    }
    SYM(o->base, dequantize_row_nvfp4, "dequantize_row_nvfp4");
    SYM(o->base, quantize_row_q8_K_ref, "quantize_row_q8_K_ref");
    SYM(o->base, quantize_row_q4_K_ref, "quantize_row_q4_K_ref");
    SYM(o->base, dequantize_row_q4_K, "dequantize_row_q4_K");
    SYM(o->base, quantize_row_q6_K_ref, "quantize_row_q6_K_ref");
    SYM(o->base, dequantize_row_q6_K, "dequantize_row_q6_K");
    SYM(o->base, ggml_version, "ggml_version");
    SYM(o->base, ggml_commit, "ggml_commit");
    SYM(o->base, gguf_init_from_file, "gguf_init_from_file");
    SYM(o->base, gguf_free, "gguf_free");
    SYM(o->base, gguf_get_n_tensors, "gguf_get_n_tensors");
    SYM(o->base, gguf_get_n_kv, "gguf_get_n_kv");
    SYM(o->cpu, vec_dot_q4_K_q8_K_generic, "ggml_vec_dot_q4_K_q8_K_generic");
    SYM(o->cpu, vec_dot_q6_K_q8_K_generic, "ggml_vec_dot_q6_K_q8_K_generic");
    SYM(o->cpu, vec_dot_q4_K_q8_K, "ggml_vec_dot_q4_K_q8_K");
    SYM(o->cpu, vec_dot_q6_K_q8_K, "ggml_vec_dot_q6_K_q8_K");
    SYM(o->cpu, vec_dot_nvfp4_q8_0, "ggml_vec_dot_nvfp4_q8_0");
    SYM(o->cpu, quantize_row_q8_K, "quantize_row_q8_K");
    SYM(o->cpu, quantize_row_q8_0, "quantize_row_q8_0");
    void (*cpu_init)(void) = NULL;
    if (oracle_sym(o->cpu, "ggml_cpu_init", &cpu_init, sizeof cpu_init, err, err_len)) goto fail;
    cpu_init(); /* fills the CPU backend's f16 tables; idempotent */
    return 0;
fail:
    ggml_oracle_close(o);
    return -1;
}

void ggml_oracle_close(ggml_oracle *o) {
    /* the libraries stay mapped (ggml registers process-wide state); only forget them */
    o->cpu = NULL;
    o->base = NULL;
}
