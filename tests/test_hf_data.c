/* test_hf_data.c — the reference data in tests/data/hf/ (made by HF transformers, see its README)
 * stays what the runtime's tests expect: every checkpoint and its nvfp4/ twin load, the NVFP4
 * weights dequantize close to the bf16 ones and everything else is byte-identical, ids.txt holds
 * 24 ids in range, and both logit files are float64 [24, vocab] .npy arrays of finite values. */
#include "check.h"
#include "fp4lane.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const models[] = {"llama", "llama31", "qwen2", "qwen3", "mistral"};
enum { T = 24 };

/* A version-1 .npy of little-endian float64, C order, shape (rows, cols): the values, or NULL. */
static double *load_npy(const char *p, int rows, int cols) {
    size_t size = 0;
    unsigned char *d = check_slurp(p, &size);
    const long n = d ? (long)size : -1;
    char want[96];
    snprintf(want, sizeof want, "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    int ok = n > 10 && !memcmp(d, "\x93NUMPY\x01\x00", 8);
    long hl = ok ? d[8] | (d[9] << 8) : 0;
    ok = ok && 10 + hl + (long)rows * cols * 8 == n && !strncmp((const char *)d + 10, want, strlen(want));
    double *v = ok ? malloc(sizeof *v * (size_t)rows * (size_t)cols) : NULL;
    if (v) memcpy(v, d + 10 + hl, sizeof *v * (size_t)rows * (size_t)cols); /* x86/arm: little-endian hosts */
    free(d);
    return v;
}

static void check_logits(const char *dir, const char *file, int vocab) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    double *l = load_npy(p, T, vocab);
    CHECK_MSG(l != NULL, "%s: not a float64 [%d, %d] .npy", p, T, vocab);
    if (!l) return;
    int finite = 1;
    double min_std = 1e30;
    for (int t = 0; t < T; t++) {
        double m = 0, s = 0;
        for (int k = 0; k < vocab; k++) finite &= isfinite(l[t * vocab + k]), m += l[t * vocab + k] / vocab;
        for (int k = 0; k < vocab; k++) s += (l[t * vocab + k] - m) * (l[t * vocab + k] - m) / vocab;
        if (sqrt(s) < min_std) min_std = sqrt(s);
    }
    CHECK_MSG(finite && min_std > 1.0, "%s: finite %d, smallest std over the vocabulary %g", p, finite,
              min_std);
    free(l);
}

static void check_model(const char *name) {
    char dir[128], q[160], p[256];
    snprintf(dir, sizeof dir, "tests/data/hf/%s", name);
    snprintf(q, sizeof q, "%s/nvfp4", dir);
    fp4_error e;
    fp4_model *m = NULL, *mq = NULL;
    CHECK_OK(fp4_model_open(dir, NULL, &m, &e));
    CHECK_OK(fp4_model_open(q, NULL, &mq, &e));
    if (!m || !mq) {
        fp4_model_close(m);
        fp4_model_close(mq);
        return;
    }
    json_error_t je;
    json_t *cfg = json_loads(fp4_model_config_json(m), 0, &je);
    int vocab = cfg ? (int)json_integer_value(json_object_get(cfg, "vocab_size")) : 0;
    CHECK_EQ_INT(vocab, 512);
    json_decref(cfg);
    CHECK(fp4_model_layout(mq) == FP4_LAYOUT_MODELOPT && fp4_model_weight_precision(mq) == FP4_WP_NVFP4);
    CHECK_EQ_INT(fp4_model_n_tensors(mq), fp4_model_n_tensors(m));
    int n_nvfp4 = 0;
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *b = fp4_model_tensor(m, i), *x = fp4_model_find(mq, b->name);
        CHECK_MSG(x != NULL, "%s: %s missing from nvfp4/", name, b->name);
        if (!x) continue;
        if (x->type != FP4_TYPE_NVFP4_E2M1) { /* embeddings, head, norms, biases: the same bytes */
            CHECK_MSG(x->nbytes == b->nbytes && !memcmp(x->data, b->data, b->nbytes), "%s: %s differs", name,
                      b->name);
            continue;
        }
        n_nvfp4++;
        const int64_t rows = b->ne[1], cols = b->ne[0];
        float *w = malloc(sizeof *w * (size_t)(rows * cols));
        CHECK_OK(fp4_tensor_dequant_rows(x, 0, rows, w));
        double num = 0, den = 0;
        for (int64_t k = 0; k < rows * cols; k++) {
            uint16_t h;
            memcpy(&h, b->data + 2 * k, 2);
            double ref = fp4_bf16_to_f32(h);
            num += (w[k] - ref) * (w[k] - ref), den += ref * ref;
        }
        double rel = sqrt(num / den); /* NVFP4 on these Gaussian weights: ~0.095 (README) */
        CHECK_MSG(rel > 0.05 && rel < 0.12, "%s: %s relative error %g", name, b->name, rel);
        free(w);
    }
    CHECK_EQ_INT(n_nvfp4, 14);
    size_t ids_size = 0;
    snprintf(p, sizeof p, "%s/ids.txt", dir);
    unsigned char *ids = check_slurp(p, &ids_size);
    CHECK(ids && ids_size > 0);
    int n_ids = 0, in_range = 1;
    for (char *s = (char *)ids, *end; s && *s && *s != '\n'; s = *end == ',' ? end + 1 : NULL, n_ids++) {
        long id = strtol(s, &end, 10);
        in_range &= end != s && id >= 0 && id < vocab;
        if (end == s) break;
    }
    CHECK_MSG(n_ids == T && in_range, "%s: %d ids, in range %d", p, n_ids, in_range);
    free(ids);
    check_logits(dir, "logits_bf16.npy", vocab);
    check_logits(dir, "logits_nvfp4.npy", vocab);
    fp4_model_close(m);
    fp4_model_close(mq);
}

int main(void) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i]);
    return check_report();
}
