/* model.c — the model handle (SPEC §7–8). Opens any container through checkpoint.c, hands it
 * to the container's reader (read_gguf.c / read_hf.c), which folds every NVFP4 weight and its
 * companions into one logical tensor and checks each (validate.c); then checks the whole: no two
 * tensors with one logical name, the lane metadata paired with the tensor types, and every
 * quantization statement of the checkpoint against its tensors (quant_claims.c). No handle exists
 * before all of it has passed. */
#include "read_impl.h"
#include <stdlib.h>

static int cmp_mt(const void *a, const void *b) {
    return strcmp(((const fp4_mtensor *)a)->t.name, ((const fp4_mtensor *)b)->t.name);
}

/* Sorts the reader's tensors by name and checks the whole; the model takes them over. */
static fp4_status model_build(fp4_model *m, fp4_read *r, fp4_error *err) {
    m->t = r->t;
    m->n = r->n;
    r->t = NULL;
    m->layout = r->layout;
    qsort(m->t, (size_t)m->n, sizeof *m->t, cmp_mt);
    for (int64_t i = 1; i < m->n; i++)
        if (!strcmp(m->t[i - 1].t.name, m->t[i].t.name))
            return fp4_fail(err, FP4_ERR_DUPLICATE, m->ck->path, m->t[i].t.name, "nvfp4.logical-dup",
                            "two tensors resolve to the same logical name");
    return fp4_check_lane(m->ck->path, m->t, m->n, &r->keys, &m->wp, &m->ap, err);
}

static void free_tensors(fp4_mtensor *t, int64_t n) {
    for (int64_t i = 0; t && i < n; i++) {
        free(t[i].owned);
        free(t[i].name_owned);
    }
    free(t);
}

static fp4_status model_open(const char *path, const void *mem, size_t size, const fp4_load_opts *opts,
                             fp4_model **out, fp4_error *err) {
    fp4_error_clear(err);
    if ((!path && !mem) || !out) return FP4_ERR_INVALID_ARG;
    *out = NULL;
    fp4_model *m = calloc(1, sizeof *m);
    if (!m) return FP4_ERR_NOMEM;
    const uint64_t cap = opts ? opts->max_file_bytes : 0;
    fp4_status st = mem ? fp4_ckpt_open_memory(mem, size, path, cap, &m->ck, err)
                        : fp4_ckpt_open(path, cap, &m->ck, err);
    fp4_read r = {0};
    if (!st) {
        r.cap = m->ck->is_gguf ? fp4_read_gguf_cap(m->ck) : m->ck->n;
        r.flags = opts ? opts->flags : 0;
        r.t = calloc((size_t)r.cap + 1, sizeof *r.t);
        if (!r.t) st = fp4_fail(err, FP4_ERR_NOMEM, m->ck->path, NULL, "alloc", "out of memory");
    }
    if (!st) st = m->ck->is_gguf ? fp4_read_gguf(m->ck, &r, err) : fp4_read_hf(m->ck, &r, err);
    if (!st) st = model_build(m, &r, err);
    if (!st) st = fp4_quant_claims_check(m, err); /* what the checkpoint says vs what it holds */
    free_tensors(r.t, r.n); /* NULL once the model has taken them */
    if (st) {
        fp4_model_close(m);
        return st;
    }
    *out = m;
    return FP4_OK;
}

fp4_status fp4_model_open(const char *path, const fp4_load_opts *opts, fp4_model **out, fp4_error *err) {
    return model_open(path, NULL, 0, opts, out, err);
}

fp4_status fp4_model_open_memory(const void *data, size_t size, const char *name, const fp4_load_opts *opts,
                                 fp4_model **out, fp4_error *err) {
    if (!data) return FP4_ERR_INVALID_ARG;
    return model_open(name ? name : "(memory)", data, size, opts, out, err);
}

void fp4_model_close(fp4_model *m) {
    if (!m) return;
    free_tensors(m->t, m->n);
    fp4_ckpt_close(m->ck);
    free(m);
}

fp4_layout fp4_model_layout(const fp4_model *m) { return m ? m->layout : FP4_LAYOUT_NONE; }
fp4_weight_precision fp4_model_weight_precision(const fp4_model *m) { return m ? m->wp : FP4_WP_F32; }
fp4_act_precision fp4_model_act_precision(const fp4_model *m) { return m ? m->ap : FP4_AP_A16; }
int64_t fp4_model_n_tensors(const fp4_model *m) { return m ? m->n : 0; }
const fp4_tensor *fp4_model_tensor(const fp4_model *m, int64_t i) {
    return (m && i >= 0 && i < m->n) ? &m->t[i].t : NULL;
}
const fp4_tensor *fp4_model_find(const fp4_model *m, const char *name) {
    if (!m || !name) return NULL;
    int64_t lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(m->t[mid].t.name, name);
        if (!r) return &m->t[mid].t;
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}
uint64_t fp4_model_file_bytes(const fp4_model *m) { return m ? m->ck->file_bytes : 0; }
const char *fp4_model_config_json(const fp4_model *m) { return m ? m->ck->config_json : NULL; }
const char *fp4_model_quant_config_json(const fp4_model *m) { return m ? m->ck->quant_config_json : NULL; }
const fp4_gguf *fp4_model_gguf(const fp4_model *m) { return m && m->ck->is_gguf ? m->ck->gguf : NULL; }
