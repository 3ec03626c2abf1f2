/* quant_claims.c — every quantization statement a checkpoint makes, checked against its tensors
 * (issue 12 items 7 and 8). Called once by the loader after the tensors are known: a checkpoint
 * whose words and bytes disagree is refused, and so is any text a later verb would parse and fail
 * on (validate runs every check that convert or quantize would run).
 *
 * Statements read:
 *   HF directory: config.json "quantization_config" (as the file says, not as fp4lane restores
 *     it), hf_quant_config.json "quantization"; safetensors metadata fp4lane.hf.quant_config (a
 *     carried hf_quant_config.json) and fp4lane.hf.quantization_config (a carried
 *     quantization_config, or null);
 *   GGUF: fp4lane.hf.config and fp4lane.hf.quant_config (carried JSON texts), and every
 *     fp4lane.st.* key (carried safetensors metadata: a UTF-8 string without NUL).
 * Checks, each with its rule:
 *   claims.json          a carried text is not a JSON object (null allowed for the stash);
 *   claims.quant-method  config.json's quant_method is not the directory's layout (modelopt /
 *                        compressed-tensors), or a quantization method fp4lane does not read;
 *   claims.quant-algo    quant_algo is not NVFP4 / W4A16_NVFP4 / FP8 / FP8_PER_CHANNEL_PER_TOKEN
 *                        / MIXED_PRECISION (whose quantized_layers must name weights of their
 *                        algorithm, and list every FP8 weight), or claims NVFP4 without NVFP4
 *                        tensors (or with FP8 ones), or FP8 without FP8 tensors (or with NVFP4
 *                        ones, or with the other FP8 scale granularity);
 *   claims.group-size    a group_size that is not 16 (top level or in a config group);
 *   claims.weights       config-group weights that are not 4-bit float or 8-bit float (FP8,
 *                        strategy tensor or channel, matching the FP8 tensors both ways);
 *   claims.format        a compressed-tensors format that is not nvfp4-pack-quantized (or
 *                        float-quantized for FP8);
 *   claims.activations   W4A4 claimed (quant_algo NVFP4, input_activations present) without
 *                        input scales on the tensors, or W4A16 claimed with them;
 *   claims.exclude       exclude_modules / ignore names (fnmatch pattern, or "re:" POSIX ERE
 *                        matched from the start) a module whose weight is NVFP4 or FP8;
 *   claims.st-metadata   a GGUF fp4lane.st.* value that is not a UTF-8 string without NUL.
 * Not checkable against tensors, so not checked: kv_cache_quant_algo (a runtime choice), the
 * config groups' "targets" (class names), producer and version fields. */
#include "read_impl.h"
#include "io/st_impl.h"
#include <fnmatch.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>

#define CFAIL(c, code, tensor, rule, ...) fp4_fail(err, (code), (c)->path, (tensor), (rule), __VA_ARGS__)

typedef struct claims {
    const fp4_model *m;
    const char *path;
    const char *src;       /* which statement: "config.json", "hf_quant_config.json", ... */
    int64_t n_nv;
    int w4a4;
    int64_t n_fp8, n_fp8_channel;     /* FP8 weights; those with per-channel scales       */
    const char *first_fp8_tensor, *first_nv;
    int64_t n_fp8_block;              /* block-scaled FP8 weights (DeepSeek's weight_scale_inv) */
} claims;

static int is_fp8(const fp4_tensor *t) {
    return t->type == FP4_TYPE_F8_E4M3FN;
}
/* ModelOpt's FP8 algorithm names (modelopt/torch/export): "FP8" has one weight_scale per tensor,
 * "FP8_PER_CHANNEL_PER_TOKEN" one per output channel (its per-token activation scaling is the
 * producer's W8A8 arithmetic; fp4lane runs FP8 weights with f32 activations). -1: not FP8. */
static int fp8_algo(const char *a) {
    return !strcmp(a, "FP8") ? 0 : !strcmp(a, "FP8_PER_CHANNEL_PER_TOKEN") ? 1 : -1;
}
/* The tensor t (FP8) against an FP8 algorithm: per_channel 0/1. */
static fp4_status fp8_matches(const claims *c, const fp4_tensor *t, const char *who, const char *a,
                              int per_channel, fp4_error *err) {
    if (t->fp8.block_scale)
        return CFAIL(c, FP4_ERR_LANE, who, "claims.quant-algo", "%s says %s, but %s has block scales "
                     "(weight_scale_inv: DeepSeek's quant_method fp8)", c->src, a, t->name);
    if ((t->fp8.row_scale != NULL) != per_channel)
        return CFAIL(c, FP4_ERR_LANE, who, "claims.quant-algo", "%s says %s, but %s has %s weight scales",
                     c->src, a, t->name, t->fp8.row_scale ? "per-channel" : "per-tensor");
    return FP4_OK;
}


/* A module pattern against every NVFP4 weight's module ("<module>.weight"). */
static fp4_status exclude_one(const claims *c, const char *pat, fp4_error *err) {
    regex_t re;
    int is_re = !strncmp(pat, "re:", 3);
    if (is_re) {
        char anchored[1100];
        snprintf(anchored, sizeof anchored, "^(%.1000s)", pat + 3);
        if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0)
            return CFAIL(c, FP4_ERR_UNSUPPORTED, NULL, "claims.exclude",
                         "%s: ignore pattern '%.100s' is not a regular expression fp4lane can check",
                         c->src, pat);
    }
    fp4_status st = FP4_OK;
    char mod[FP4_MAX_NAME + 64];
    for (int64_t i = 0; i < c->m->n && !st; i++) {
        const fp4_tensor *t = &c->m->t[i].t;
        if (t->type != FP4_TYPE_NVFP4_E2M1 && !is_fp8(t)) continue;
        snprintf(mod, sizeof mod, "%s", t->name);
        if (fp4_ends_with(mod, ".weight")) mod[strlen(mod) - 7] = 0;
        int hit = is_re ? regexec(&re, mod, 0, NULL, 0) == 0 : fnmatch(pat, mod, 0) == 0;
        if (hit)
            st = CFAIL(c, FP4_ERR_LANE, t->name, "claims.exclude",
                       "%s excludes '%.100s' from quantization, but this weight is %s", c->src, pat,
                       is_fp8(t) ? "FP8" : "NVFP4");
    }
    if (is_re) regfree(&re);
    return st;
}

static fp4_status exclude_list(const claims *c, const json_t *a, const char *key, fp4_error *err) {
    if (!a || json_is_null(a)) return FP4_OK;
    if (!json_is_array(a)) return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.exclude", "%s: %s is not a list",
                                        c->src, key);
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_string(v)) return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.exclude",
                                             "%s: %s holds a non-string", c->src, key);
        fp4_status st = exclude_one(c, json_string_value(v), err);
        if (st) return st;
    }
    return FP4_OK;
}

static fp4_status group_size(const claims *c, const json_t *g, const char *where, fp4_error *err) {
    if (!g || json_is_null(g)) return FP4_OK;
    if (!json_is_integer(g) || json_integer_value(g) != 16)
        return CFAIL(c, FP4_ERR_LANE, NULL, "claims.group-size",
                     "%s: %s group_size is not 16 (NVFP4 blocks are 16 values)",
                     c->src, where);
    return FP4_OK;
}

/* act: -1 not said, 0 W4A16, 1 W4A4 */
static fp4_status activations(const claims *c, int act, const char *why, fp4_error *err) {
    if (act < 0 || c->n_nv == 0 || act == c->w4a4) return FP4_OK;
    return CFAIL(c, FP4_ERR_LANE, NULL, "claims.activations",
                 "%s says %s (%s), but the tensors %s input scales", c->src,
                 act ? "W4A4" : "W4A16", why, c->w4a4 ? "carry" : "have no");
}

/* One layer of MIXED_PRECISION's quantized_layers: its algorithm against its weight. */
static fp4_status layer_algo(const claims *c, const char *name, const char *la, fp4_error *err) {
    char w[FP4_MAX_NAME + 16];
    snprintf(w, sizeof w, "%.256s.weight", name);
    const fp4_tensor *t = fp4_model_find(c->m, w);
    const int f8 = la ? fp8_algo(la) : -1;
    if (!la || (strcmp(la, "NVFP4") && strcmp(la, "W4A16_NVFP4") && f8 < 0))
        return CFAIL(c, FP4_ERR_LANE, name, "claims.quant-algo",
                     "%s: layer quant_algo %.64s is not NVFP4, W4A16_NVFP4, FP8 or FP8_PER_CHANNEL_PER_TOKEN",
                     c->src, la ? la : "(none)");
    if (f8 >= 0) {
        if (!t || !is_fp8(t))
            return CFAIL(c, FP4_ERR_LANE, name, "claims.quant-algo", "%s lists this layer as %s, but %s",
                         c->src, la, t ? "its weight is not FP8" : "it has no weight");
        return fp8_matches(c, t, name, la, f8, err);
    }
    if (!t || t->type != FP4_TYPE_NVFP4_E2M1)
        return CFAIL(c, FP4_ERR_LANE, name, "claims.quant-algo", "%s lists this layer as %s, but %s", c->src,
                     la,
                     !t          ? "it has no weight"
                     : is_fp8(t) ? "its weight is FP8"
                                 : "its weight is not NVFP4");
    const int w4a4 = !strcmp(la, "NVFP4"), has_in = t->nvfp4.input_scale_inv != 0.0f;
    if (w4a4 != has_in) /* per layer: NVFP4 is W4A4 (an input scale), W4A16_NVFP4 has none */
        return CFAIL(c, FP4_ERR_LANE, name, "claims.activations",
                     "%s lists this layer as %s, but its weight %s", c->src, la,
                     has_in ? "carries an input scale" : "has no input scale");
    return FP4_OK;
}

static fp4_status algo(const claims *c, const json_t *q, const char *a, fp4_error *err) {
    const int f8 = fp8_algo(a);
    if (!strcmp(a, "NVFP4") || !strcmp(a, "W4A16_NVFP4")) {
        if (c->n_nv == 0)
            return CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-algo",
                         "%s says quant_algo %s, but no tensor is NVFP4", c->src, a);
        if (c->n_fp8) /* FP8 tensors the statement does not claim */
            return CFAIL(c, FP4_ERR_LANE, c->first_fp8_tensor, "claims.quant-algo",
                         "%s says quant_algo %s, but this weight is FP8 (a mix is MIXED_PRECISION)", c->src,
                         a);
        return activations(c, !strcmp(a, "NVFP4"), a, err);
    }
    if (f8 >= 0) {
        if (c->n_fp8 == 0 || c->n_nv)
            return CFAIL(c, FP4_ERR_LANE, c->first_nv, "claims.quant-algo", "%s says quant_algo %s, but %s",
                         c->src, a, c->n_fp8 == 0 ? "no tensor is FP8" : "this weight is NVFP4");
        for (int64_t i = 0; i < c->m->n; i++) {
            const fp4_tensor *t = &c->m->t[i].t;
            fp4_status st = is_fp8(t) ? fp8_matches(c, t, t->name, a, f8, err) : FP4_OK;
            if (st) return st;
        }
        return FP4_OK;
    }
    if (strcmp(a, "MIXED_PRECISION"))
        return CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-algo",
                     "%s says quant_algo %.64s, but the tensors are %s", c->src, a,
                     c->n_nv ? "NVFP4" : c->n_fp8 ? "FP8" : "not quantized");
    const json_t *layers = json_object_get(q, "quantized_layers");
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)layers, name, v) {
        fp4_status st = layer_algo(c, name, json_string_value(json_object_get(v, "quant_algo")), err);
        if (st) return st;
    }
    char mod[FP4_MAX_NAME + 16];
    for (int64_t i = 0; i < c->m->n; i++) { /* the other way: every FP8 weight is a listed layer */
        const fp4_tensor *t = &c->m->t[i].t;
        if (!is_fp8(t)) continue;
        snprintf(mod, sizeof mod, "%.*s", (int)strlen(t->name) - (fp4_ends_with(t->name, ".weight") ? 7 : 0),
                 t->name);
        if (!json_object_get(layers, mod))
            return CFAIL(c, FP4_ERR_LANE, t->name, "claims.quant-algo",
                         "%s: MIXED_PRECISION does not list %s in quantized_layers, but its weight is FP8",
                         c->src, mod);
    }
    return FP4_OK;
}

/* config_groups: weights 4-bit float in groups of 16; input_activations present <=> W4A4 */
/* mixed: quant_algo MIXED_PRECISION, whose groups (one per per-layer algorithm, ModelOpt's
 * convert_hf_config.py) may differ in activations: quantized_layers is checked per layer instead */
static fp4_status groups(const claims *c, const json_t *cg, int ct, int mixed, fp4_error *err) {
    if (!cg || json_is_null(cg)) return FP4_OK;
    if (!json_is_object(cg)) return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.weights",
                                          "%s: config_groups is not an object", c->src);
    const char *gname;
    const json_t *g;
    int any_act = -1, fp8_group[2] = {0, 0}; /* FP8 groups with strategy tensor / channel */
    json_object_foreach((json_t *)cg, gname, g) {
        const json_t *wt = json_object_get(g, "weights"), *ia = json_object_get(g, "input_activations");
        if (json_is_object(wt)) {
            const json_t *nb = json_object_get(wt, "num_bits"), *ty = json_object_get(wt, "type");
            const char *tys = json_string_value(ty);
            if (nb && json_integer_value(nb) == 8 && tys && !strcmp(tys, "float")) {
                /* compressed-tensors FP8 (float-quantized); its input_activations (W8A8) are the
                 * producer's arithmetic: fp4lane runs the weights with f32 activations */
                const char *sg = json_string_value(json_object_get(wt, "strategy")); /* none: tensor */
                const int ch = sg && !strcmp(sg, "channel");
                if (sg && !ch && strcmp(sg, "tensor"))
                    return CFAIL(c, FP4_ERR_LANE, NULL, "claims.weights",
                                 "%s: group %.64s FP8 weights with strategy %.32s (fp4lane reads tensor and "
                                 "channel FP8, not block-scaled)",
                                 c->src, gname, sg ? sg : "(none)");
                if (!c->n_fp8)
                    return CFAIL(c, FP4_ERR_LANE, NULL, "claims.weights",
                                 "%s: group %.64s says FP8 weights, but no tensor is FP8", c->src, gname);
                const char *f8f = json_string_value(json_object_get(g, "format"));
                if (f8f && strcmp(f8f, "float-quantized"))
                    return CFAIL(c, FP4_ERR_LANE, NULL, "claims.format",
                                 "%s: FP8 group %.64s format %.64s is not float-quantized", c->src, gname,
                                 f8f);
                fp8_group[ch] = 1;
                continue;
            }
            if ((nb && json_integer_value(nb) != 4) || (ty && (!tys || strcmp(tys, "float"))))
                return CFAIL(c, FP4_ERR_LANE, NULL, "claims.weights",
                             "%s: group %.64s weights are not 4-bit float", c->src, gname);
            fp4_status st = group_size(c, json_object_get(wt, "group_size"), "a config group's", err);
            if (st) return st;
        }
        const char *f = json_string_value(json_object_get(g, "format"));
        if (ct && f && strcmp(f, "nvfp4-pack-quantized"))
            return CFAIL(c, FP4_ERR_LANE, NULL, "claims.format",
                         "%s: group %.64s format %.64s is not nvfp4-pack-quantized",
                         c->src, gname, f);
        int act = ia && !json_is_null(ia);
        if (mixed) continue;
        if (any_act >= 0 && act != any_act)
            return CFAIL(c, FP4_ERR_LANE, NULL, "claims.activations",
                         "%s: config groups disagree on input activations", c->src);
        any_act = act;
    }
    for (int ch = 0; ch < 2; ch++) { /* the other way: every FP8 weight's kind has its group */
        const int64_t n = ch ? c->n_fp8_channel : c->n_fp8 - c->n_fp8_channel;
        if (n && !fp8_group[ch])
            return CFAIL(c, FP4_ERR_LANE, c->first_fp8_tensor, "claims.weights",
                         "%s: %lld FP8 weights with per-%s scales, but no config group says FP8 weights with "
                         "strategy %s",
                         c->src, (long long)n, ch ? "channel" : "tensor", ch ? "channel" : "tensor");
    }
    return activations(c, any_act, "config_groups input_activations", err);
}

/* One quantization object. layout_word: 1 when its quant_method must name the layout. */
static fp4_status quant_object(const claims *c, const json_t *q, int layout_word, fp4_error *err) {
    if (!q || json_is_null(q)) return FP4_OK;
    if (!json_is_object(q)) return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.json",
                                         "%s: the quantization entry is not an object", c->src);
    const json_t *jm = json_object_get(q, "quant_method"), *ja = json_object_get(q, "quant_algo");
    if (jm && !json_is_string(jm)) return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.quant-method",
                                                "%s: quant_method is not a string", c->src);
    const char *method = json_string_value(jm);
    if (method && !strcmp(method, "fp8")) { /* DeepSeek's block-scaled FP8: every weight FP8 in blocks */
        if (c->n_nv || !c->n_fp8 || c->n_fp8_block != c->n_fp8)
            return CFAIL(c, FP4_ERR_LANE, c->n_nv ? c->first_nv : c->first_fp8_tensor, "claims.quant-method",
                         "%s says quant_method fp8 (block-scaled FP8), but the file has %lld NVFP4 and %lld "
                         "FP8 weights, %lld of them block-scaled",
                         c->src, (long long)c->n_nv, (long long)c->n_fp8, (long long)c->n_fp8_block);
        return FP4_OK;
    }
    if (c->n_fp8_block)
        return CFAIL(c, FP4_ERR_LANE, c->first_fp8_tensor, "claims.quant-method",
                     "%s says quant_method %.64s, but the weights are block-scaled FP8 (quant_method fp8)",
                     c->src, method ? method : "(none)");
    int ct = method && !strcmp(method, "compressed-tensors");
    if (method && strcmp(method, "modelopt") && !ct)
        return CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-method",
                     "%s says quant_method %.64s, which is not NVFP4 (%s)", c->src,
                     method, c->n_nv ? "the tensors are NVFP4" : "fp4lane does not read it");
    if (method && layout_word && c->n_nv) { /* FP8 weights use either convention's names */
        fp4_layout want = ct ? FP4_LAYOUT_CT : FP4_LAYOUT_MODELOPT;
        if (c->m->layout != want)
            return CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-method",
                         "%s says quant_method %s, but the tensors are in the %s layout",
                         c->src, method, fp4_layout_name(c->m->layout));
    }
    if (method && c->n_nv + c->n_fp8 == 0)
        return CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-method",
                     "%s says quant_method %s, but no tensor is NVFP4 or FP8", c->src, method);
    fp4_status st = FP4_OK;
    if (ja && !json_is_null(ja)) {
        if (!json_is_string(ja))
            return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.quant-algo", "%s: quant_algo is not a string",
                         c->src);
        st = algo(c, q, json_string_value(ja), err);
    } else if (ja && (c->n_nv || c->n_fp8)) {
        st = CFAIL(c, FP4_ERR_LANE, NULL, "claims.quant-algo",
                   "%s says quant_algo null, but the tensors are %s", c->src, c->n_nv ? "NVFP4" : "FP8");
    }
    if (!st) st = group_size(c, json_object_get(q, "group_size"), "the", err);
    const char *f = json_string_value(json_object_get(q, "format"));
    if (!st && ct && f && strcmp(f, "nvfp4-pack-quantized") && strcmp(f, "mixed-precision") &&
        (strcmp(f, "float-quantized") || c->n_nv))
        st = CFAIL(c, FP4_ERR_LANE, NULL, "claims.format", "%s: format %.64s is not nvfp4-pack-quantized",
                   c->src, f);
    const char *algo_s = json_string_value(ja);
    if (!st)
        st = groups(c, json_object_get(q, "config_groups"), ct, algo_s && !strcmp(algo_s, "MIXED_PRECISION"),
                    err);
    if (!st) st = exclude_list(c, json_object_get(q, "exclude_modules"), "exclude_modules", err);
    if (!st) st = exclude_list(c, json_object_get(q, "ignore"), "ignore", err);
    return st;
}

/* A JSON text: the whole object's member key (NULL: the text itself is the quantization object;
 * allow_null: "null" is a valid text). */
static fp4_status json_text(claims *c, const char *src, const char *text, size_t len, const char *key,
                            int layout_word, int allow_null, fp4_error *err) {
    c->src = src;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    fp4_status st = FP4_OK;
    if (!root || !(json_is_object(root) || (allow_null && json_is_null(root))))
        st = CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.json", "%s is not a JSON object%s%.200s", src,
                   root ? "" : ": ",
                   root ? "" : je.text);
    else if (json_is_object(root))
        st = quant_object(c, key ? json_object_get(root, key) : root, layout_word, err);
    json_decref(root);
    return st;
}

static fp4_status hf_file(claims *c, fp4_hf_json which, const char *src, const char *key, int layout_word,
                          fp4_error *err) {
    const fp4_ckpt *k = c->m->ck;
    size_t need = 0;
    if (!k->hf || !fp4_hfdir_has_json(k->hf, which)) return FP4_OK;
    fp4_status st = fp4_hfdir_json_dump(k->hf, which, "", NULL, 0, &need);
    if (st != FP4_ERR_LIMIT && st != FP4_OK)
        return CFAIL(c, st, NULL, "claims.json", "%s cannot be read back", src);
    char *text = malloc(need + 1);
    if (!text) return CFAIL(c, FP4_ERR_NOMEM, NULL, "alloc", "out of memory");
    st = fp4_hfdir_json_dump(k->hf, which, "", text, need + 1, NULL);
    if (!st) st = json_text(c, src, text, strlen(text), key, layout_word, 0, err);
    free(text);
    return st;
}

static fp4_status gguf_claims(claims *c, fp4_error *err) {
    const fp4_gguf *g = c->m->ck->gguf;
    static const struct { const char *key, *inner; } carried[] = {
        {"fp4lane.hf.config", "quantization_config"}, {"fp4lane.hf.quant_config", "quantization"}};
    for (size_t i = 0; i < 2; i++) {
        int64_t k = fp4_gguf_n_kv(g) - 1; /* by name through the key list: stable across the API's renames */
        while (k >= 0 && strcmp(fp4_gguf_key(g, k), carried[i].key)) k--;
        if (k < 0) continue;
        const char *s;
        uint64_t len;
        c->src = carried[i].key;
        if (fp4_gguf_get_str(g, k, &s, &len) || memchr(s, 0, (size_t)len))
            return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.json", "%s is not a JSON text", carried[i].key);
        fp4_status st = json_text(c, carried[i].key, s, (size_t)len, carried[i].inner, 0, 0, err);
        if (st) return st;
    }
    for (int64_t k = 0; k < fp4_gguf_n_kv(g); k++) { /* carried safetensors metadata */
        const char *key = fp4_gguf_key(g, k), *s;
        uint64_t len;
        if (strncmp(key, "fp4lane.st.", 11)) continue;
        if (fp4_gguf_get_str(g, k, &s, &len) || memchr(s, 0, (size_t)len) ||
            !fp4_st_utf8_valid((const uint8_t *)s, (size_t)len))
            return CFAIL(c, FP4_ERR_FORMAT, NULL, "claims.st-metadata",
                         "%.100s must be a UTF-8 string without NUL (it becomes safetensors metadata)", key);
    }
    return FP4_OK;
}

fp4_status fp4_quant_claims_check(const fp4_model *m, fp4_error *err) {
    claims c = {m, m->ck->path, "", 0, m->ap == FP4_AP_NVFP4, 0, 0, NULL, NULL, 0};
    for (int64_t i = 0; i < m->n; i++) {
        const fp4_tensor *t = &m->t[i].t;
        if (t->type == FP4_TYPE_NVFP4_E2M1 && !c.n_nv++) c.first_nv = t->name;
        if (is_fp8(t) && !c.n_fp8++) c.first_fp8_tensor = t->name;
        c.n_fp8_channel += is_fp8(t) && t->fp8.row_scale;
        c.n_fp8_block += is_fp8(t) && t->fp8.block_scale;
    }
    if (m->ck->is_gguf) return gguf_claims(&c, err);
    fp4_status st = hf_file(&c, FP4_HF_CONFIG, "config.json", "quantization_config", 1, err);
    if (!st) st = hf_file(&c, FP4_HF_QUANT_CONFIG, "hf_quant_config.json", "quantization", 0, err);
    const char *q = fp4_ckpt_meta(m->ck, FP4_META_QUANT_CONFIG);
    const char *stash = fp4_ckpt_meta(m->ck, FP4_META_QCFG_STASH);
    if (!st && q) st = json_text(&c, FP4_META_QUANT_CONFIG, q, strlen(q), "quantization", 0, 0, err);
    if (!st && stash) st = json_text(&c, FP4_META_QCFG_STASH, stash, strlen(stash), NULL, 0, 1, err);
    return st;
}
