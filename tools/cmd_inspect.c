/* cmd_inspect.c — `fp4lane inspect FILE [--json]` and `fp4lane dump FILE TENSOR [--rows A:B]
 * [--raw]`: what a checkpoint holds, and its values. */
#include "cli.h"
#include "fp4lane_runtime.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t tensor_bytes(const fp4_tensor *t) {
    if (t->type != FP4_TYPE_NVFP4_E2M1) return t->nbytes;
    return (uint64_t)(t->nvfp4.n_out * (t->nvfp4.n_in / 2 + t->nvfp4.n_in / 16));
}

static int64_t n_elements(const fp4_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->ne[i];
    return n;
}

static const char *type_name(const fp4_tensor *t) {
    const fp4_type_info *ti = fp4_type_get(t->type);
    return ti ? ti->name : "?";
}

/* 1 when path is a GGUF file (shapes as ne, innermost first); 0 for safetensors (PyTorch order) */
static int gguf_container(const char *path) {
    unsigned char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, 4, f) : 0;
    if (f) fclose(f);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

static json_t *tensor_json(const fp4_tensor *t, int gguf) {
    json_t *ne = json_array(), *shape = json_array();
    for (int i = 0; i < t->n_dims; i++) {
        json_array_append_new(ne, json_integer(t->ne[i]));
        json_array_append_new(shape, json_integer(t->ne[gguf ? i : t->n_dims - 1 - i]));
    }
    double bpw = n_elements(t) ? 8.0 * (double)tensor_bytes(t) / (double)n_elements(t) : 0.0;
    json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:I,s:f}", "name", t->name, "type", type_name(t), "ne", ne,
                          "shape", shape, "bytes", (json_int_t)tensor_bytes(t), "bits_per_weight", bpw);
    if (t->type == FP4_TYPE_NVFP4_E2M1) {
        json_object_set_new(o, "scale2", json_real(t->nvfp4.scale2));
        if (t->nvfp4.input_scale_inv != 0.0f)
            json_object_set_new(o, "input_scale_inv", json_real(t->nvfp4.input_scale_inv));
    }
    if (t->type == FP4_TYPE_F8_E4M3FN) { /* FP8 weight: per-tensor scale, or per-channel */
        char blk[64];
        snprintf(blk, sizeof blk, "blocks %lldx%lld", (long long)t->fp8.block_rows,
                 (long long)t->fp8.block_cols);
        json_object_set_new(o, "fp8_scale",
                            t->fp8.block_scale ? json_string(blk)
                            : t->fp8.row_scale ? json_string("per-channel")
                                               : json_real(t->fp8.scale));
        if (t->fp8.input_scale != 0.0f)
            json_object_set_new(o, "fp8_input_scale", json_real(t->fp8.input_scale));
    }
    return o;
}

/* The architecture an engine would run, every fp4_arch member under its C name (the Python
 * binding's Engine.arch is compared with it member for member); null when the model has none. */
static json_t *arch_json(const fp4_model *m) {
    static const char *const source[] = {"hf", "gguf"}, *const scaling[] = {"none", "linear", "llama3",
                                                                            "yarn"};
    fp4_arch a;
    if (fp4_model_arch(m, &a, NULL)) return json_null();
    static const char *const routing[] = {"none", "softmax_topk", "topk_softmax", "sigmoid_group"};
    json_t *eos = json_array(), *dense = json_array();
    for (int32_t i = 0; i < a.n_eos && i < FP4_ARCH_MAX_EOS; i++)
        json_array_append_new(eos, json_integer(a.eos[i]));
    for (int64_t L = 0; L < a.n_layers && L < FP4_ARCH_MAX_LAYERS; L++) /* the layers with a dense MLP */
        if ((a.moe_dense[L / 64] >> (L % 64)) & 1u) json_array_append_new(dense, json_integer(L));
    json_t *o = json_pack("{s:I,s:I,s:I,s:s,s:b,s:o}", "n_experts", (json_int_t)a.n_experts, "n_experts_used",
                          (json_int_t)a.n_experts_used, "moe_ffn", (json_int_t)a.moe_ffn, "moe_routing",
                          routing[(unsigned)a.moe_routing < 4 ? a.moe_routing : 0], "moe_norm_topk",
                          a.moe_norm_topk, "moe_dense", dense);
    json_t *b = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:s,s:f,s:f,s:f,s:I,s:b,s:b,s:b,s:b,"
        "s:b,s:i,s:i,s:o}",
        "family", fp4_arch_family_name(a.family), "source", source[a.source != FP4_ARCH_FROM_HF], "n_layers",
        (json_int_t)a.n_layers, "hidden", (json_int_t)a.hidden, "n_heads", (json_int_t)a.n_heads,
        "n_kv_heads", (json_int_t)a.n_kv_heads, "head_dim", (json_int_t)a.head_dim, "ffn", (json_int_t)a.ffn,
        "vocab", (json_int_t)a.vocab, "n_ctx_train", (json_int_t)a.n_ctx_train, "rms_eps", (double)a.rms_eps,
        "rope_theta", a.rope_theta, "rope_scaling",
        scaling[(unsigned)a.rope_scaling < 4 ? a.rope_scaling : 0], "rope_factor", a.rope_factor,
        "rope_low_freq_factor", a.rope_low_freq_factor, "rope_high_freq_factor", a.rope_high_freq_factor,
        "rope_orig_ctx", (json_int_t)a.rope_orig_ctx, "rope_freq_factors", a.rope_freq_factors, "tied_head",
        a.tied_head, "qkv_bias", a.qkv_bias, "qk_norm", a.qk_norm, "qk_permuted", a.qk_permuted, "bos", a.bos,
        "n_eos", a.n_eos, "eos", eos);
    json_object_update(b, o);
    json_decref(o);
    json_t *swa = json_array(); /* Gemma 3: the local (sliding-window) layers */
    for (int64_t L = 0; L < a.n_layers && L < FP4_ARCH_MAX_LAYERS; L++)
        if (fp4_arch_layer_local(&a, L)) json_array_append_new(swa, json_integer(L));
    static const char *const act[] = {"silu", "gelu_tanh"};
    o = json_pack("{s:I,s:o,s:f,s:f,s:f,s:s,s:b}", "sliding_window", (json_int_t)a.sliding_window,
                  "swa_layers", swa, "rope_local_theta", a.rope_local_theta, "query_pre_attn_scalar",
                  a.query_pre_attn_scalar, "final_softcap", a.final_softcap, "hidden_act",
                  act[(unsigned)a.hidden_act < 2 ? a.hidden_act : 0], "embed_scale", a.embed_scale);
    json_object_update(b, o);
    json_decref(o);
    json_t *ds =
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:b,s:i,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:f}", "q_lora_rank",
                  (json_int_t)a.q_lora_rank, "kv_lora_rank", (json_int_t)a.kv_lora_rank, "qk_nope_dim",
                  (json_int_t)a.qk_nope_dim, "qk_rope_dim", (json_int_t)a.qk_rope_dim, "v_head_dim",
                  (json_int_t)a.v_head_dim, "rope_interleave", a.rope_interleave, "n_nextn", a.n_nextn,
                  "rope_beta_fast", a.rope_beta_fast, "rope_beta_slow", a.rope_beta_slow, "rope_mscale",
                  a.rope_mscale, "rope_mscale_all_dim", a.rope_mscale_all_dim, "moe_n_group",
                  (json_int_t)a.moe_n_group, "moe_topk_group", (json_int_t)a.moe_topk_group,
                  "n_shared_experts", (json_int_t)a.n_shared_experts, "routed_scaling", a.routed_scaling);
    json_object_update(b, ds);
    json_decref(ds);
    return b;
}

/* Gemma 3: which layers attend through the window (L) and which to every position (G) */
static void inspect_layer_types(const fp4_arch *a) {
    int64_t n_local = 0;
    printf("  layer types: ");
    for (int64_t L = 0; L < a->n_layers && L < FP4_ARCH_MAX_LAYERS; L++) {
        n_local += fp4_arch_layer_local(a, L);
        putchar(fp4_arch_layer_local(a, L) ? 'L' : 'G');
    }
    printf(" (%lld local with a window of %lld, rope base %g; %lld global, rope base %g)\n",
           (long long)n_local, (long long)a->sliding_window, a->rope_local_theta,
           (long long)(a->n_layers - n_local), a->rope_theta);
}

typedef struct inspect_ctx {
    const fp4_model *m;
    int gguf;
} inspect_ctx;

static json_t *tensor_item(const void *ctx, int64_t i) {
    const inspect_ctx *c = ctx;
    return tensor_json(fp4_model_tensor(c->m, i), c->gguf);
}

/* The container's own metadata: GGUF key/values, or safetensors __metadata__ (first shard). */
static json_t *gguf_value(const fp4_gguf *g, int64_t i) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64;
            int64_t i64; float f; double d; int b; } v;
    const char *s;
    uint64_t len;
    switch (fp4_gguf_kv_type(g, i)) {
    case FP4_GGUF_UINT8: fp4_gguf_get_u8(g, i, &v.u8); return json_integer(v.u8);
    case FP4_GGUF_INT8: fp4_gguf_get_i8(g, i, &v.i8); return json_integer(v.i8);
    case FP4_GGUF_UINT16: fp4_gguf_get_u16(g, i, &v.u16); return json_integer(v.u16);
    case FP4_GGUF_INT16: fp4_gguf_get_i16(g, i, &v.i16); return json_integer(v.i16);
    case FP4_GGUF_UINT32: fp4_gguf_get_u32(g, i, &v.u32); return json_integer(v.u32);
    case FP4_GGUF_INT32: fp4_gguf_get_i32(g, i, &v.i32); return json_integer(v.i32);
    case FP4_GGUF_UINT64: fp4_gguf_get_u64(g, i, &v.u64); return json_integer((json_int_t)v.u64);
    case FP4_GGUF_INT64: fp4_gguf_get_i64(g, i, &v.i64); return json_integer(v.i64);
    case FP4_GGUF_FLOAT32: fp4_gguf_get_f32(g, i, &v.f); return json_real(v.f);
    case FP4_GGUF_FLOAT64: fp4_gguf_get_f64(g, i, &v.d); return json_real(v.d);
    case FP4_GGUF_BOOL: fp4_gguf_get_bool(g, i, &v.b); return json_boolean(v.b);
    case FP4_GGUF_STRING: {
        fp4_gguf_get_str(g, i, &s, &len);
        json_t *j = json_stringn(s, (size_t)(len > 4096 ? 4096 : len)); /* NULL when not valid UTF-8 */
        return j ? j : json_string("(not UTF-8)");
    }
    case FP4_GGUF_ARRAY: {
        int64_t n = 0;
        const void *d;
        if (fp4_gguf_arr_type(g, i) == FP4_GGUF_STRING) fp4_gguf_get_arr_str_count(g, i, &n);
        else fp4_gguf_get_arr(g, i, fp4_gguf_arr_type(g, i), &d, &n);
        char buf[64];
        snprintf(buf, sizeof buf, "[%s × %lld]", fp4_gguf_type_name(fp4_gguf_arr_type(g, i)), (long long)n);
        return json_string(buf);
    }
    default: return json_null();
    }
}

static json_t *container_metadata(const char *path) {
    json_t *o = json_object();
    fp4_gguf *g = NULL;
    fp4_st *st = NULL;
    fp4_hfdir *d = NULL;
    if (!fp4_gguf_open(path, &g, NULL)) {
        for (int64_t i = 0; i < fp4_gguf_n_kv(g); i++)
            json_object_set_new(o, fp4_gguf_key(g, i), gguf_value(g, i));
    } else {
        const fp4_st *s = NULL;
        if (!fp4_st_open(path, &st, NULL)) s = st;
        else if (!fp4_hfdir_open(path, &d, NULL) && fp4_hfdir_n_shards(d)) s = fp4_hfdir_shard(d, 0);
        for (int64_t i = 0; s && i < fp4_st_n_metadata(s); i++) {
            const char *k, *v;
            if (!fp4_st_metadata_at(s, i, &k, &v)) json_object_set_new(o, k, json_string(v));
        }
    }
    fp4_gguf_close(g);
    fp4_st_close(st);
    fp4_hfdir_close(d);
    return o;
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] == '-' || path) return cli_usage("inspect");
        else path = argv[i];
    }
    if (!path) return cli_usage("inspect");
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    if (st) return cli_report_error("inspect", st, &e);
    int64_t n = fp4_model_n_tensors(m);
    const int gguf = gguf_container(path);
    uint64_t wbytes = 0, welems = 0;
    for (int64_t i = 0; i < n; i++) {
        const fp4_tensor *t = fp4_model_tensor(m, i);
        if (t->n_dims >= 2) wbytes += tensor_bytes(t), welems += (uint64_t)n_elements(t);
    }
    if (json) { /* streamed: one tensor's JSON at a time, whatever the tensor count */
        json_t *o = json_pack(
            "{s:s,s:s,s:s,s:s,s:I,s:I,s:f}", "file", path, "layout", fp4_layout_name(fp4_model_layout(m)),
            "weight_precision", fp4_weight_precision_name(fp4_model_weight_precision(m)),
            "activation_precision", fp4_act_precision_name(fp4_model_act_precision(m)), "bytes",
            (json_int_t)fp4_model_file_bytes(m), "tensors", (json_int_t)n, "weight_bits_per_weight",
            welems ? 8.0 * (double)wbytes / (double)welems : 0.0);
        json_object_set_new(o, "shape_order", json_string(gguf ? "gguf-ne" : "pytorch"));
        json_object_set_new(o, "arch", arch_json(m));
        json_t *md = container_metadata(path);
        inspect_ctx ic = {m, gguf};
        cli_json_stream(stdout, o, "tensor_list", tensor_item, &ic, n, "metadata", md);
        json_decref(md);
        json_decref(o);
    } else {
        char esc[1200];
        printf("%s\n  layout %s, weights %s, activations %s, %llu bytes, %lld tensors, 2-D weights %.3f "
               "bits/weight\n",
               cli_escaped(path, esc, sizeof esc), fp4_layout_name(fp4_model_layout(m)),
               fp4_weight_precision_name(fp4_model_weight_precision(m)),
               fp4_act_precision_name(fp4_model_act_precision(m)),
               (unsigned long long)fp4_model_file_bytes(m), (long long)n,
               welems ? 8.0 * (double)wbytes / (double)welems : 0.0);
        json_t *md = container_metadata(path);
        const char *k;
        json_t *v;
        json_object_foreach(md, k, v) {
            char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
            printf("  %-48s %.100s%s\n", cli_escaped(k, esc, sizeof esc), txt ? txt : "?",
                   txt && strlen(txt) > 100 ? "..." : "");
            free(txt);
        }
        json_decref(md);
        fp4_arch a;
        if (!fp4_model_arch(m, &a, NULL) && a.n_experts) {
            int64_t nd = 0;
            for (int64_t L = 0; L < a.n_layers && L < FP4_ARCH_MAX_LAYERS; L++)
                nd += !fp4_arch_layer_moe(&a, L);
            printf("  mixture of experts: %s, %lld experts, %lld per token (%s%s), expert ffn %lld, "
                   "%lld of %lld layers dense\n",
                   fp4_arch_family_name(a.family), (long long)a.n_experts, (long long)a.n_experts_used,
                   a.moe_routing == FP4_MOE_TOPK_SOFTMAX     ? "top-k, then softmax"
                   : a.moe_routing == FP4_MOE_SIGMOID_GROUP ? "sigmoid, group-limited top-k"
                                                             : "softmax, then top-k",
                   a.moe_norm_topk ? ", renormalized" : "", (long long)a.moe_ffn, (long long)nd,
                   (long long)a.n_layers);
            if (a.n_shared_experts) printf("  shared experts: %lld\n", (long long)a.n_shared_experts);
        }
        if (!fp4_model_arch(m, &a, NULL) && a.sliding_window) inspect_layer_types(&a);
        if (!fp4_model_arch(m, &a, NULL) && a.kv_lora_rank)
            printf("  latent attention: q_lora_rank %lld, kv_lora_rank %lld, cache %lld values per token and "
                   "layer\n",
                   (long long)a.q_lora_rank, (long long)a.kv_lora_rank,
                   (long long)(a.kv_lora_rank + a.qk_rope_dim));
        for (int32_t i = 0; !fp4_model_arch(m, &a, NULL) && i < a.n_nextn; i++)
            printf("  multi-token prediction: layer %lld is in the file and not run "
                   "(num_nextn_predict_layers)\n",
                   (long long)(a.n_layers + i));
        printf("  shapes: %s\n", gguf ? "GGUF ne, innermost (contiguous) dimension first"
                                     : "PyTorch order, outermost dimension first");
        for (int64_t i = 0; i < n; i++) {
            const fp4_tensor *t = fp4_model_tensor(m, i);
            char shape[96] = "";
            for (int d = 0; d < t->n_dims; d++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? " x " : "",
                         (long long)t->ne[gguf ? d : t->n_dims - 1 - d]);
            printf("  %-48s %-10s [%s] %.3f bpw", cli_escaped(t->name, esc, sizeof esc), type_name(t),
                   t->n_dims ? shape : "scalar",
                   n_elements(t) ? 8.0 * (double)tensor_bytes(t) / (double)n_elements(t) : 0.0);
            if (t->type == FP4_TYPE_NVFP4_E2M1) {
                printf(" scale2=%.9g", t->nvfp4.scale2);
                if (t->nvfp4.input_scale_inv != 0.0f)
                    printf(" input_scale_inv=%.9g", t->nvfp4.input_scale_inv);
            }
            if (t->type == FP4_TYPE_F8_E4M3FN && t->fp8.block_scale)
                printf(" scale=blocks %lldx%lld (weight_scale_inv)", (long long)t->fp8.block_rows,
                       (long long)t->fp8.block_cols);
            else if (t->type == FP4_TYPE_F8_E4M3FN && t->fp8.row_scale) printf(" scale=per-channel");
            else if (t->type == FP4_TYPE_F8_E4M3FN) printf(" scale=%.9g", t->fp8.scale);
            if (t->type == FP4_TYPE_F8_E4M3FN && t->fp8.input_scale != 0.0f)
                printf(" input_scale=%.9g (not applied: weight-only)", t->fp8.input_scale);
            printf("\n");
        }
    }
    fp4_model_close(m);
    return 0;
}

int cmd_dump(int argc, char **argv) {
    const char *path = NULL, *name = NULL;
    long long a = 0, b = -1;
    int raw = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--raw")) raw = 1;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lld:%lld", &a, &b) != 2 || a < 0 || b < a)
                return fprintf(stderr, "fp4lane dump: --rows A:B with 0 <= A <= B\n"), 2;
        } else if (argv[i][0] == '-')
            return fprintf(stderr, "fp4lane dump: unknown option '%s'\n", argv[i]), 2;
        else if (!path) path = argv[i];
        else if (!name) name = argv[i];
        else return 2;
    }
    if (!path || !name) return cli_usage("dump");
    fp4_model *m = NULL;
    fp4_error e;
    fp4_status st = fp4_model_open(path, NULL, &m, &e);
    if (st) return cli_report_error("dump", st, &e);
    const fp4_tensor *t = fp4_model_find(m, name);
    if (!t) {
        char en[1200], ep[1200];
        fprintf(stderr, "fp4lane dump: no tensor '%s' in %s\n", cli_escaped(name, en, sizeof en),
                cli_escaped(path, ep, sizeof ep));
        fp4_model_close(m);
        return 1;
    }
    int64_t rows = 1;
    for (int i = 1; i < t->n_dims; i++) rows *= t->ne[i];
    if (b < 0 || b > rows) b = rows;
    if (a > b) a = b;
    int64_t n_in = t->n_dims ? t->ne[0] : 1;
    float *buf = malloc(sizeof(float) * (size_t)(n_in > 0 ? n_in : 1));
    int rc = buf ? 0 : 1;
    for (long long r = a; r < b && !rc; r++) {
        st = fp4_tensor_dequant_rows(t, r, r + 1, buf);
        if (st) {
            char en[1200];
            fprintf(stderr, "fp4lane dump: %s: %s\n", cli_escaped(name, en, sizeof en), fp4_status_str(st));
            rc = 1;
            break;
        }
        if (raw) fwrite(buf, sizeof(float), (size_t)n_in, stdout);
        else
            for (int64_t k = 0; k < n_in; k++) printf("%.9g%c", buf[k], k + 1 == n_in ? '\n' : ' ');
        if (cli_stdout_failed()) rc = 1; /* stop at the first lost write; main reports it */
    }
    free(buf);
    fp4_model_close(m);
    return rc;
}
