/* fp8_twin.c — see fp8_twin.h. */
#include "fp8_twin.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct tw_entry {
    char name[300];
    fp4_st_dtype dtype;
    int rank;
    int64_t shape[FP4_MAX_DIMS];
    const void *data; /* borrowed, or owned (below) */
    void *owned;
    size_t nbytes;
} tw_entry;

static int is_proj(const char *module) {
    size_t l = strlen(module);
    return l > 5 && !strcmp(module + l - 5, "_proj");
}

/* the module of a tensor name ("a.b.weight" -> "a.b") into mod */
static void module_of(const char *name, char *mod, size_t n) {
    const char *dot = strrchr(name, '.');
    snprintf(mod, n, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
}

static uint16_t f32_to_bf16_trunc(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)(u >> 16);
}

/* DeepSeek's block-scaled pair of one module (or its F32 twin), from the plain weight w */
static int fp8_block(const fp4_tensor *w, const fp8tw_opts *o, const char *mod, tw_entry *e, int *n) {
    const int64_t n_in = w->ne[0], n_out = w->ne[1], br = o->block_rows, bc = o->block_cols;
    const int64_t nbr = (n_out + br - 1) / br, nbc = (n_in + bc - 1) / bc;
    float *f = malloc(sizeof(float) * (size_t)(n_in * n_out));
    uint8_t *q = malloc((size_t)(n_in * n_out));
    float *sc = calloc((size_t)(nbr * nbc), sizeof(float));
    if (!f || !q || !sc || fp4_tensor_dequant_rows(w, 0, n_out, f)) return free(f), free(q), free(sc), -1;
    for (int64_t i = 0; i < n_in * n_out; i++) {
        float *s = &sc[(i / n_in / br) * nbc + (i % n_in) / bc];
        *s = fmaxf(*s, fabsf(f[i]));
    }
    for (int64_t b = 0; b < nbr * nbc; b++)
        sc[b] = sc[b] > 0.0f ? sc[b] / 448.0f : 1.0f;
    for (int64_t i = 0; i < n_in * n_out; i++) {
        const float s = sc[(i / n_in / br) * nbc + (i % n_in) / bc];
        q[i] = fp4_e4m3fn_encode(f[i] / s);
        f[i] = fp4_e4m3fn_decode(q[i]) * s; /* the F32 twin: one f32 multiply, as the loader defines it */
    }
    tw_entry *t = &e[(*n)++];
    snprintf(t->name, sizeof t->name, "%.256s.weight", mod);
    if (o->f32_twin) {
        *t = (tw_entry){.dtype = FP4_ST_F32,
                        .rank = 2,
                        .shape = {n_out, n_in},
                        .data = f,
                        .owned = f,
                        .nbytes = sizeof(float) * (size_t)(n_in * n_out)};
        snprintf(t->name, sizeof t->name, "%.256s.weight", mod);
        return free(q), free(sc), 0;
    }
    free(f);
    *t = (tw_entry){.dtype = FP4_ST_F8_E4M3,
                    .rank = 2,
                    .shape = {n_out, n_in},
                    .data = q,
                    .owned = q,
                    .nbytes = (size_t)(n_in * n_out)};
    snprintf(t->name, sizeof t->name, "%.256s.weight", mod);
    t = &e[(*n)++];
    *t = (tw_entry){.dtype = FP4_ST_F32,
                    .rank = 2,
                    .shape = {nbr, nbc},
                    .data = sc,
                    .owned = sc,
                    .nbytes = sizeof(float) * (size_t)(nbr * nbc)};
    if (o->scale_bf16) {
        uint16_t *h =
            (uint16_t *)(void *)sc; /* in place: each bf16 is written before its f32 is read again */
        for (int64_t b = 0; b < nbr * nbc; b++)
            h[b] = f32_to_bf16_trunc(sc[b]);
        t->dtype = FP4_ST_BF16, t->nbytes = 2 * (size_t)(nbr * nbc);
    }
    snprintf(t->name, sizeof t->name, "%.256s.weight_scale_inv", mod);
    if (o->plus_scale) {
        float *one = malloc(sizeof(float));
        if (!one) return -1;
        *one = 1.0f;
        t = &e[(*n)++];
        *t = (tw_entry){.dtype = FP4_ST_F32, .rank = 0, .data = one, .owned = one, .nbytes = 4};
        snprintf(t->name, sizeof t->name, "%.256s.weight_scale", mod);
    }
    return 0;
}

/* the FP8 trio of one module, quantized from the plain weight w ([out, in] f32 rows) */
static int fp8_trio(const fp4_tensor *w, const fp8tw_opts *o, const char *mod, tw_entry *e, int *n) {
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    float *f = malloc(sizeof(float) * (size_t)(n_in * n_out));
    uint8_t *q = malloc((size_t)(n_in * n_out));
    float *sc = malloc(sizeof(float) * (size_t)n_out);
    if (!f || !q || !sc || fp4_tensor_dequant_rows(w, 0, n_out, f)) return free(f), free(q), free(sc), -1;
    float amax_all = 0.0f;
    for (int64_t i = 0; i < n_in * n_out; i++)
        amax_all = fmaxf(amax_all, fabsf(f[i]));
    for (int64_t r = 0; r < n_out; r++) {
        float amax = 0.0f;
        for (int64_t k = 0; k < n_in; k++)
            amax = fmaxf(amax, fabsf(f[r * n_in + k]));
        float s = (o->per_channel ? amax : amax_all) / 448.0f;
        if (!(s > 0.0f)) s = 1.0f;
        sc[r] = s;
        for (int64_t k = 0; k < n_in; k++)
            q[r * n_in + k] = fp4_e4m3fn_encode(f[r * n_in + k] / s);
    }
    free(f);
    tw_entry *t = &e[(*n)++];
    *t = (tw_entry){.dtype = FP4_ST_F8_E4M3,
                    .rank = 2,
                    .shape = {n_out, n_in},
                    .data = q,
                    .owned = q,
                    .nbytes = (size_t)(n_in * n_out)};
    snprintf(t->name, sizeof t->name, "%.256s.weight", mod);
    t = &e[(*n)++];
    *t = (tw_entry){.dtype = FP4_ST_F32,
                    .rank = o->per_channel,
                    .shape = {n_out},
                    .data = sc,
                    .owned = sc,
                    .nbytes = sizeof(float) * (size_t)(o->per_channel ? n_out : 1)};
    snprintf(t->name, sizeof t->name, "%.256s.weight_scale", mod);
    if (!o->no_input_scale) {
        float *in = malloc(sizeof(float));
        if (!in) return -1;
        *in = 0.0125f; /* a static activation scale as ModelOpt stores it: checked, not applied */
        t = &e[(*n)++];
        *t = (tw_entry){.dtype = FP4_ST_F32, .rank = 0, .data = in, .owned = in, .nbytes = 4};
        snprintf(t->name, sizeof t->name, "%.256s.input_scale", mod);
    }
    return 0;
}

static int write_config(const char *plain_dir, const char *dst, const char *qc) {
    char p[900];
    snprintf(p, sizeof p, "%s/config.json", plain_dir);
    json_t *cfg = json_load_file(p, 0, NULL), *q = qc ? json_loads(qc, 0, NULL) : NULL;
    if (!cfg || (qc && !q)) return json_decref(cfg), json_decref(q), -1;
    if (q)
        json_object_set_new(cfg, "quantization_config", q);
    else
        json_object_del(cfg, "quantization_config");
    snprintf(p, sizeof p, "%s/config.json", dst);
    int rc = json_dump_file(cfg, p, JSON_INDENT(2)) ? -1 : 0;
    json_decref(cfg);
    return rc;
}

int fp8tw_write(const char *plain_dir, const char *nv_dir, const char *dst, const fp8tw_opts *o) {
    fp4_model *plain = NULL;
    fp4_hfdir *src = NULL;
    fp4_error err;
    if (fp4_model_open(plain_dir, NULL, &plain, &err) ||
        fp4_hfdir_open(nv_dir ? nv_dir : plain_dir, &src, &err))
        return fp4_model_close(plain), -1;
    const int64_t n_src = fp4_hfdir_n_tensors(src);
    tw_entry *e = calloc((size_t)n_src * 3 + 3, sizeof *e);
    int n = 0, rc = e ? 0 : -1;
    char mod[300];
    for (int64_t i = 0; !rc && i < n_src; i++) {
        const fp4_st_tensor *t = fp4_hfdir_tensor_at(src, i);
        module_of(t->name, mod, sizeof mod);
        const int fp8 = is_proj(mod) && (!o->pick || o->pick(mod, o->ctx));
        if (fp8) { /* the module's own tensors are replaced; its trio is written at its weight */
            size_t l = strlen(t->name);
            if (l > 7 && !strcmp(t->name + l - 7, ".weight")) {
                const fp4_tensor *w = fp4_model_find(plain, t->name);
                rc = !w ? -1 : o->block_rows > 0 ? fp8_block(w, o, mod, e, &n) : fp8_trio(w, o, mod, e, &n);
            }
            continue;
        }
        tw_entry *x = &e[n++];
        snprintf(x->name, sizeof x->name, "%s", t->name);
        x->dtype = t->dtype, x->rank = t->rank, x->data = t->data, x->nbytes = t->nbytes;
        memcpy(x->shape, t->shape, sizeof x->shape);
    }
    fp4_hfdir_writer *w = NULL;
    mkdir(dst, 0700);
    if (!rc) rc = fp4_hfdir_writer_create(dst, 0, &w, &err) ? -1 : 0;
    for (int i = 0; !rc && i < n; i++)
        rc = fp4_hfdir_writer_add_tensor(w, e[i].name, e[i].dtype, e[i].rank, e[i].shape, &err) ? -1 : 0;
    for (int i = 0; !rc && i < n; i++)
        rc = fp4_hfdir_writer_write(w, e[i].data, e[i].nbytes, &err) ? -1 : 0;
    size_t shards;
    if (!rc) rc = fp4_hfdir_writer_finish(w, &shards, &err) ? -1 : 0;
    if (rc && w) fprintf(stderr, "fp8tw_write: %s %s\n", err.rule, err.msg);
    fp4_hfdir_writer_free(w);
    for (int i = 0; i < n; i++)
        free(e[i].owned);
    free(e);
    fp4_hfdir_close(src);
    fp4_model_close(plain);
    if (!rc) rc = write_config(plain_dir, dst, o->quantization_config);
    if (!rc && o->hf_quant_config) {
        char p[900];
        snprintf(p, sizeof p, "%s/hf_quant_config.json", dst);
        FILE *f = fopen(p, "w");
        rc = f && fputs(o->hf_quant_config, f) >= 0 ? 0 : -1;
        if (f && fclose(f)) rc = -1;
    }
    return rc;
}

int fp8tw_poke(const char *dir, const char *tensor, uint64_t at, const void *bytes, size_t n) {
    char p[900];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    fp4_st *st = NULL;
    fp4_error err;
    if (fp4_st_open(p, &st, &err)) return -1;
    const fp4_st_tensor *t = fp4_st_find(st, tensor);
    const uint64_t off = t && at + n <= t->nbytes ? 8 + fp4_st_header_len(st) + t->offset + at : 0;
    fp4_st_close(st);
    if (!off) return -1;
    int fd = open(p, O_WRONLY);
    int rc = fd >= 0 && pwrite(fd, bytes, n, (off_t)off) == (ssize_t)n ? 0 : -1;
    if (fd >= 0 && close(fd)) rc = -1;
    return rc;
}

int fp8tw_mixed_hfq(char *buf, size_t cap, int n_layers, const char *(*algo)(const char *module, void *ctx),
                    void *ctx) {
    static const char *const proj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};
    size_t k = (size_t)snprintf(buf, cap,
                                "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.31.0\"},\n"
                                " \"quantization\": {\"quant_algo\": \"MIXED_PRECISION\", "
                                "\"kv_cache_quant_algo\": \"FP8\", \"quantized_layers\": {");
    int first = 1;
    char mod[128];
    for (int l = 0; l < n_layers; l++)
        for (int p = 0; p < 7; p++) {
            snprintf(mod, sizeof mod, "model.layers.%d.%s", l, proj[p]);
            const char *a = algo(mod, ctx);
            if (!a || k >= cap) continue;
            k += (size_t)snprintf(buf + k, cap - k, "%s\n  \"%s\": {\"quant_algo\": \"%s\"%s}",
                                  first ? "" : ",", mod, a, strstr(a, "NVFP4") ? ", \"group_size\": 16" : "");
            first = 0;
        }
    if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "}}}\n");
    return k < cap ? 0 : -1;
}
