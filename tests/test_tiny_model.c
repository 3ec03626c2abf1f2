/* test_tiny_model.c — the embedded default model, models/tiny (models/tiny/MODEL_CARD.md): it loads
 * through the fail-closed loader as a ModelOpt W4A16 NVFP4 checkpoint of the documented shape, every
 * NVFP4 projection has an exact-mode CPU route (n_in a multiple of 256), and its dequantized weights
 * are the ones the card's quality figures were measured with: a digest of every 2-D tensor's f32
 * values equals the one dev/tiny/tiny_dequant.py's independent numpy decoder gives for the same files. */
#include "check.h"
#include "fp4lane_io.h"
#include <stdlib.h>
#include <string.h>

#define TINY_DIR "models/tiny"

/* FNV-1a 64 over the tensor's name, then its f32 values (little-endian bytes, row-major). The
 * per-tensor digests are combined with XOR, so the order of tensors in the file does not matter. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Computed with numpy (dev/tiny/tiny_dequant.py's decoder) over the 57 2-D tensors of models/tiny. */
#define TINY_DIGEST 0x5fe6221c74eac305ull

static void test_tiny_model(void) {
    fp4_model *m = NULL;
    fp4_error err;
    memset(&err, 0, sizeof err);
    fp4_status st = fp4_model_open(TINY_DIR, NULL, &m, &err);
    CHECK_MSG(st == FP4_OK, "%s: %s", fp4_status_str(st), err.msg);
    if (st != FP4_OK)
        return;
    CHECK(fp4_model_layout(m) == FP4_LAYOUT_MODELOPT);
    CHECK(fp4_model_weight_precision(m) == FP4_WP_NVFP4);
    CHECK(fp4_model_act_precision(m) == FP4_AP_A16);
    CHECK_EQ_INT(fp4_model_n_tensors(m), 74);

    CHECK(fp4_model_config_json(m) != NULL);
    fp4_hfdir *d = NULL;
    CHECK_OK(fp4_hfdir_open(TINY_DIR, &d, &err));
    if (d) {
        static const struct { const char *key; int64_t want; } shape[] = {
            {"hidden_size", 256}, {"intermediate_size", 1024}, {"num_hidden_layers", 8},
            {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64},
            {"vocab_size", 4096}, {"max_position_embeddings", 512}, {"bos_token_id", 0}, {"eos_token_id", 1}};
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
            int64_t v = -1;
            CHECK_OK(fp4_hfdir_json_int(d, FP4_HF_CONFIG, shape[i].key, &v));
            CHECK_MSG(v == shape[i].want, "%s = %lld, want %lld", shape[i].key, (long long)v,
                      (long long)shape[i].want);
        }
        char buf[16];
        CHECK_OK(fp4_hfdir_json_dump(d, FP4_HF_CONFIG, "tie_word_embeddings", buf, sizeof buf, NULL));
        CHECK(strcmp(buf, "true") == 0);
        fp4_hfdir_close(d);
    }

    int n_nvfp4 = 0, n_2d = 0;
    uint64_t digest = 0;
    for (int64_t i = 0; i < fp4_model_n_tensors(m); i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (t->type == FP4_TYPE_NVFP4_E2M1) {
            n_nvfp4++;
            CHECK_MSG(t->ne[0] % 256 == 0, "%s: n_in %lld", t->name, (long long)t->ne[0]);
            CHECK_MSG(strcmp(fp4_cpu_route_name(t, FP4_MODE_EXACT), "none") != 0, "%s: no exact route",
                      t->name);
        }
        if (t->n_dims != 2)
            continue;
        n_2d++;
        size_t n = (size_t)(t->ne[0] * t->ne[1]);
        float *w = malloc(n * sizeof *w);
        CHECK(w != NULL);
        if (!w)
            break;
        CHECK_OK(fp4_tensor_dequant_rows(t, 0, t->ne[1], w));
        uint64_t h = fnv1a(0xcbf29ce484222325ull, t->name, strlen(t->name));
        for (size_t k = 0; k < n; k++) {
            uint8_t le[4];
            uint32_t u = f32_bits(w[k]);
            le[0] = (uint8_t)u, le[1] = (uint8_t)(u >> 8), le[2] = (uint8_t)(u >> 16),
            le[3] = (uint8_t)(u >> 24);
            h = fnv1a(h, le, 4);
        }
        digest ^= h;
        free(w);
    }
    CHECK_EQ_INT(n_nvfp4, 56); /* 8 layers x (q, k, v, o, gate, up, down) */
    CHECK_EQ_INT(n_2d, 57);    /* and the bf16 embedding, tied to the head */
    CHECK_MSG(digest == TINY_DIGEST, "digest %016llx, want %016llx", (unsigned long long)digest,
              (unsigned long long)TINY_DIGEST);
    CHECK(fp4_model_find(m, "lm_head.weight") == NULL); /* tied: the head is the embedding */
    fp4_model_close(m);
}

int main(void) {
    test_tiny_model();
    return check_report();
}
