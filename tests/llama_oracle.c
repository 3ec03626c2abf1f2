/* llama_oracle.c — libllama through dlopen (see llama_oracle.h). */
#include "llama_oracle.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA_ORACLE_DIR "third_party/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
#define LLAMA_LIB "libllama.v0.5.0.so"
#define GGML_LIB "libggml.v0.5.0.so"

/* llama.h (release v0.5.0): the struct llama_batch, by value, field for field */
typedef struct lo_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} lo_batch;

/* llama_model_params / llama_context_params: over-sized opaque blocks (see the header) */
typedef struct lo_params {
    _Alignas(16) unsigned char b[1024];
} lo_params;
enum { CP_N_CTX = 0, CP_N_BATCH = 4, CP_N_UBATCH = 8, CP_N_SEQ_MAX = 12, CP_N_OUT_PER_SEQ = 24,
       CP_N_THREADS = 28, CP_N_THREADS_BATCH = 32 };

/* llama.h (release v0.5.0): struct llama_model_quantize_params, field for field (enums are int) */
typedef struct lo_quant_params {
    int32_t nthread, ftype, output_tensor_type, token_embedding_type;
    _Bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
    const void *imatrix, *kv_overrides, *tt_overrides;
    const int32_t *prune_layers;
    size_t max_buf_size;
} lo_quant_params;
_Static_assert(sizeof(lo_quant_params) == 64, "llama_model_quantize_params is 64 bytes on x86-64");
enum { LO_GGML_TYPE_COUNT = 43, LO_FTYPE_Q8_0 = 7 };

typedef void (*lo_log_fn)(int level, const char *text, void *user);

struct llama_oracle {
    void *ggml, *llama;
    void (*backend_load_all_from_path)(const char *dir);
    void (*backend_init)(void);
    void (*log_set)(lo_log_fn cb, void *user);
    lo_params (*model_default_params)(void);
    lo_params (*context_default_params)(void);
    void *(*model_load_from_file)(const char *path, lo_params p);
    void (*model_free)(void *model);
    void *(*init_from_model)(void *model, lo_params p);
    void (*free_ctx)(void *ctx);
    const void *(*model_get_vocab)(const void *model);
    int32_t (*vocab_n_tokens)(const void *vocab);
    lo_batch (*batch_init)(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
    void (*batch_free)(lo_batch b);
    int32_t (*decode)(void *ctx, lo_batch b);
    float *(*get_logits_ith)(void *ctx, int32_t i);
    int32_t (*tokenize)(const void *vocab, const char *text, int32_t len, int32_t *ids, int32_t n_max,
                        _Bool add_special, _Bool parse_special);
    lo_quant_params (*quantize_default_params)(void);
    uint32_t (*quantize)(const char *in, const char *out, const lo_quant_params *p);
    void *(*get_memory)(const void *ctx);
    void (*memory_clear)(void *mem, _Bool data);
    char log[2048]; /* the tail of llama.cpp's log */
};

static void on_log(int level, const char *text, void *user) {
    (void)level;
    llama_oracle *o = user;
    if (!o || !text) return;
    size_t have = strlen(o->log), add = strlen(text), cap = sizeof o->log - 1;
    if (add >= cap) {
        memcpy(o->log, text + add - cap, cap);
        o->log[cap] = 0;
        return;
    }
    if (have + add > cap) { /* keep the tail */
        size_t drop = have + add - cap;
        memmove(o->log, o->log + drop, have - drop + 1);
        have -= drop;
    }
    memcpy(o->log + have, text, add + 1);
}

static int sym(void *h, const char *name, void *slot, size_t n, char *err, size_t err_len) {
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(err, err_len, "llama oracle: symbol %s not found", name);
        return -1;
    }
    memcpy(slot, &p, n);
    return 0;
}
#define SYM(h, f, name) \
    do { if (sym((h), (name), &o->f, sizeof o->f, err, err_len)) goto fail; } while (0)

static uint32_t rd32(const lo_params *p, int off) {
    uint32_t v;
    memcpy(&v, p->b + off, 4);
    return v;
}
static void wr32(lo_params *p, int off, uint32_t v) { memcpy(p->b + off, &v, 4); }

int llama_oracle_open(llama_oracle **out, char *err, size_t err_len) {
    *out = NULL;
    llama_oracle *o = calloc(1, sizeof *o);
    if (!o) return snprintf(err, err_len, "out of memory"), -1;
    const char *dir = getenv("FP4_GGML_DIR");
    if (!dir || !*dir) dir = LLAMA_ORACLE_DIR;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, GGML_LIB);
    if (!(o->ggml = dlopen(path, RTLD_NOW | RTLD_GLOBAL))) {
        snprintf(err, err_len, "llama oracle: cannot open %s (%s); run `make oracle`", path, dlerror());
        goto fail;
    }
    snprintf(path, sizeof path, "%s/%s", dir, LLAMA_LIB);
    if (!(o->llama = dlopen(path, RTLD_NOW | RTLD_GLOBAL))) {
        snprintf(err, err_len, "llama oracle: cannot open %s (%s)", path, dlerror());
        goto fail;
    }
    SYM(o->ggml, backend_load_all_from_path, "ggml_backend_load_all_from_path");
    SYM(o->llama, backend_init, "llama_backend_init");
    SYM(o->llama, log_set, "llama_log_set");
    SYM(o->llama, model_default_params, "llama_model_default_params");
    SYM(o->llama, context_default_params, "llama_context_default_params");
    SYM(o->llama, model_load_from_file, "llama_model_load_from_file");
    SYM(o->llama, model_free, "llama_model_free");
    SYM(o->llama, init_from_model, "llama_init_from_model");
    SYM(o->llama, free_ctx, "llama_free");
    SYM(o->llama, model_get_vocab, "llama_model_get_vocab");
    SYM(o->llama, vocab_n_tokens, "llama_vocab_n_tokens");
    SYM(o->llama, batch_init, "llama_batch_init");
    SYM(o->llama, batch_free, "llama_batch_free");
    SYM(o->llama, decode, "llama_decode");
    SYM(o->llama, get_logits_ith, "llama_get_logits_ith");
    SYM(o->llama, tokenize, "llama_tokenize");
    SYM(o->llama, quantize_default_params, "llama_model_quantize_default_params");
    SYM(o->llama, quantize, "llama_model_quantize");
    SYM(o->llama, get_memory, "llama_get_memory");
    SYM(o->llama, memory_clear, "llama_memory_clear");
    o->log_set(on_log, o);
    o->backend_load_all_from_path(dir);
    o->backend_init();
    /* the layout check: release v0.5.0's defaults at the offsets this file writes */
    lo_params cp = o->context_default_params();
    if (rd32(&cp, CP_N_CTX) != 512 || rd32(&cp, CP_N_BATCH) != 2048 || rd32(&cp, CP_N_UBATCH) != 512 ||
        rd32(&cp, CP_N_SEQ_MAX) != 1 || rd32(&cp, CP_N_OUT_PER_SEQ) != 1) {
        snprintf(err, err_len, "llama oracle: llama_context_params is not v0.5.0's layout");
        goto fail;
    }
    *out = o;
    return 0;
fail:
    free(o); /* the libraries stay mapped (ggml registers process-wide state) */
    return -1;
}

void llama_oracle_close(llama_oracle *o) {
    if (o && o->log_set) o->log_set(NULL, NULL);
    free(o);
}

int llama_oracle_logits(llama_oracle *o, const char *gguf, const int32_t *ids, int n, int n_threads,
                        float **logits, int *n_vocab, char *err, size_t err_len) {
    *logits = NULL;
    o->log[0] = 0;
    void *model = o->model_load_from_file(gguf, o->model_default_params());
    if (!model) {
        snprintf(err, err_len, "libllama refused %s: %s", gguf, o->log);
        return -1;
    }
    lo_params cp = o->context_default_params();
    const uint32_t n_ctx = (uint32_t)(n < 256 ? 256 : n);
    wr32(&cp, CP_N_CTX, n_ctx);
    wr32(&cp, CP_N_BATCH, n_ctx);
    wr32(&cp, CP_N_UBATCH, n_ctx);
    wr32(&cp, CP_N_OUT_PER_SEQ, 0); /* every position's logits */
    wr32(&cp, CP_N_THREADS, (uint32_t)n_threads);
    wr32(&cp, CP_N_THREADS_BATCH, (uint32_t)n_threads);
    void *ctx = o->init_from_model(model, cp);
    int rc = -1;
    if (!ctx) {
        snprintf(err, err_len, "libllama: no context for %s: %s", gguf, o->log);
        o->model_free(model);
        return -1;
    }
    const int nv = o->vocab_n_tokens(o->model_get_vocab(model));
    lo_batch b = o->batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    int32_t d = o->decode(ctx, b);
    float *out = d == 0 && nv > 0 ? malloc(sizeof(float) * (size_t)n * (size_t)nv) : NULL;
    if (d != 0) snprintf(err, err_len, "llama_decode returned %d: %s", (int)d, o->log);
    else if (!out) snprintf(err, err_len, "out of memory (n_vocab %d)", nv);
    else {
        rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            const float *l = o->get_logits_ith(ctx, i);
            if (!l) rc = -1, snprintf(err, err_len, "no logits for position %d: %s", i, o->log);
            else memcpy(out + (size_t)i * (size_t)nv, l, sizeof(float) * (size_t)nv);
        }
    }
    o->batch_free(b);
    o->free_ctx(ctx);
    o->model_free(model);
    if (rc) free(out), out = NULL;
    *logits = out;
    *n_vocab = nv;
    return rc;
}

int llama_oracle_tokenize(llama_oracle *o, const char *gguf, const char *text, int len, int add_special,
                          int32_t **ids, int *n, char *err, size_t err_len) {
    *ids = NULL;
    *n = 0;
    o->log[0] = 0;
    void *model = o->model_load_from_file(gguf, o->model_default_params());
    if (!model) {
        snprintf(err, err_len, "libllama refused %s: %s", gguf, o->log);
        return -1;
    }
    const void *vocab = o->model_get_vocab(model);
    const int32_t cap = len + 8; /* at most one token per byte, plus BOS/EOS */
    int32_t *out = malloc(sizeof *out * (size_t)cap);
    const int32_t got = out ? o->tokenize(vocab, text, len, out, cap, add_special != 0, 0) : -1;
    o->model_free(model);
    if (got < 0) {
        snprintf(err, err_len, "llama_tokenize returned %d: %s", (int)got, o->log);
        free(out);
        return -1;
    }
    *ids = out;
    *n = got;
    return 0;
}

int llama_oracle_quantize(llama_oracle *o, const char *in, const char *out, int ftype, int n_threads,
                          char *err, size_t err_len) {
    o->log[0] = 0;
    lo_quant_params p = o->quantize_default_params();
    /* the layout check: release v0.5.0's defaults, field for field */
    if (p.nthread != 0 || p.ftype != LO_FTYPE_Q8_0 || p.output_tensor_type != LO_GGML_TYPE_COUNT ||
        p.token_embedding_type != LO_GGML_TYPE_COUNT || p.allow_requantize || !p.quantize_output_tensor ||
        p.only_copy || p.pure || p.keep_split || p.dry_run || p.imatrix || p.kv_overrides || p.tt_overrides ||
        p.prune_layers || p.max_buf_size != 8ull << 30) {
        snprintf(err, err_len, "llama oracle: llama_model_quantize_params is not v0.5.0's layout");
        return -1;
    }
    p.nthread = n_threads;
    p.ftype = ftype;
    uint32_t rc = o->quantize(in, out, &p);
    if (rc)
        snprintf(err, err_len, "llama_model_quantize(%s, ftype %d) returned %u: %s", in, ftype, rc, o->log);
    return rc ? -1 : 0;
}

struct llama_oracle_session {
    llama_oracle *o;
    void *model, *ctx;
    lo_batch b;
};

int llama_oracle_session_open(llama_oracle *o, const char *gguf, int n_ctx, int n_threads,
                              llama_oracle_session **out, int *n_vocab, char *err, size_t err_len) {
    *out = NULL;
    o->log[0] = 0;
    llama_oracle_session *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, err_len, "out of memory"), -1;
    s->o = o;
    s->model = o->model_load_from_file(gguf, o->model_default_params());
    if (!s->model) {
        snprintf(err, err_len, "libllama refused %s: %s", gguf, o->log);
        free(s);
        return -1;
    }
    lo_params cp = o->context_default_params();
    wr32(&cp, CP_N_CTX, (uint32_t)n_ctx);
    wr32(&cp, CP_N_BATCH, (uint32_t)n_ctx);
    wr32(&cp, CP_N_UBATCH, (uint32_t)n_ctx);
    wr32(&cp, CP_N_THREADS, (uint32_t)n_threads);
    wr32(&cp, CP_N_THREADS_BATCH, (uint32_t)n_threads);
    s->ctx = o->init_from_model(s->model, cp);
    if (!s->ctx) {
        snprintf(err, err_len, "libllama: no context for %s: %s", gguf, o->log);
        o->model_free(s->model);
        free(s);
        return -1;
    }
    *n_vocab = o->vocab_n_tokens(o->model_get_vocab(s->model));
    s->b = o->batch_init(1, 0, 1);
    *out = s;
    return 0;
}

int llama_oracle_session_decode(llama_oracle_session *s, int32_t token, int32_t pos, const float **logits,
                                char *err, size_t err_len) {
    *logits = NULL;
    s->b.n_tokens = 1;
    s->b.token[0] = token;
    s->b.pos[0] = pos;
    s->b.n_seq_id[0] = 1;
    s->b.seq_id[0][0] = 0;
    s->b.logits[0] = 1;
    int32_t d = s->o->decode(s->ctx, s->b);
    if (d != 0) return snprintf(err, err_len, "llama_decode returned %d: %s", (int)d, s->o->log), -1;
    *logits = s->o->get_logits_ith(s->ctx, 0);
    if (!*logits) return snprintf(err, err_len, "no logits at position %d: %s", (int)pos, s->o->log), -1;
    return 0;
}

int llama_oracle_session_prefill(llama_oracle_session *s, const int32_t *ids, int n, const float **logits,
                                 char *err, size_t err_len) {
    *logits = NULL;
    if (n < 1) return snprintf(err, err_len, "an empty prefill"), -1;
    lo_batch b = s->o->batch_init(n, 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == n - 1;
    }
    int32_t d = s->o->decode(s->ctx, b);
    s->o->batch_free(b);
    if (d != 0)
        return snprintf(err, err_len, "llama_decode (%d tokens) returned %d: %s", n, (int)d, s->o->log), -1;
    *logits = s->o->get_logits_ith(s->ctx, -1);
    if (!*logits) return snprintf(err, err_len, "no logits after the prefill: %s", s->o->log), -1;
    return 0;
}

void llama_oracle_session_clear(llama_oracle_session *s) {
    s->o->memory_clear(s->o->get_memory(s->ctx), 1);
}

void llama_oracle_session_close(llama_oracle_session *s) {
    if (!s) return;
    s->o->batch_free(s->b);
    s->o->free_ctx(s->ctx);
    s->o->model_free(s->model);
    free(s);
}
