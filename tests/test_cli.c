/* test_cli.c — the fp4lane CLI as a user meets it: exit codes (0 ok, 1 refused, 2 usage, never a
 * signal), the one-line summaries, --json output, errors that name file, tensor and rule. */
#include "check.h"
#include "cli_util.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[512], tmp[512];

/* Runs the CLI with args; returns the exit status (-1 for a signal); out/err captured. */
static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-cli-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char *o = NULL, *e = NULL, args[1600];
#define RUN(a) (free(o), free(e), o = e = NULL, cli(a, &o, &e))
    CHECK(RUN("--version") == 0 && cu_has(o, "fp4lane 0.1.0"));
    CHECK(RUN("") == 2 && cu_has(e, "usage"));
    CHECK(RUN("frobnicate") == 2);
    CHECK(RUN("help validate") == 0 && cu_has(o, "validate"));
    CHECK(RUN("selftest") == 0 && cu_has(o, "selftest passed"));
    CHECK(RUN("selftest --json") == 0 && cu_has(o, "\"ok\":true"));
    CHECK(RUN("selftest --bogus") == 2);
    const char *golden = check_data("modelopt-golden/modelopt_cuda.safetensors");
    const char *input = check_data("modelopt-golden/input.safetensors");
    snprintf(args, sizeof args, "validate %s", golden);
    CHECK(RUN(args) == 0 && cu_has(o, "valid:") && cu_has(o, "modelopt layout"));
    /* one NaN scale byte: model.layers.0.mlp.down_proj.weight_scale starts at 8 + 4688 + 66104 */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmp);
    FILE *in = fopen(golden, "rb"), *out = fopen(bad, "wb");
    CHECK(in && out);
    int c;
    long pos = 0;
    while (in && out && (c = fgetc(in)) != EOF) fputc(pos++ == 8 + 4688 + 66104 + 37 ? 0xFF : c, out);
    if (in) fclose(in);
    if (out) fclose(out);
    snprintf(args, sizeof args, "validate %s", bad);
    CHECK(RUN(args) == 1 && cu_has(e, "nvfp4.scale-nan") &&
          cu_has(e, "model.layers.0.mlp.down_proj.weight") && cu_has(e, bad) && !cu_has(o, "valid:"));
    snprintf(args, sizeof args, "validate --json %s", bad);
    CHECK(RUN(args) == 1 && cu_has(o, "\"valid\":false") && cu_has(o, "nvfp4.scale-nan"));
    snprintf(args, sizeof args, "validate %s/nonexistent", tmp);
    CHECK(RUN(args) == 1 && cu_has(e, "io.open"));
    CHECK(RUN("validate") == 2);
    snprintf(args, sizeof args, "validate --frob %s", golden);
    CHECK(RUN(args) == 2);
    /* every truncation of a small valid file is refused with status 1, never a signal */
    snprintf(args, sizeof args, "quantize %s %s/q.gguf --layout gguf", input, tmp);
    CHECK(RUN(args) == 0 && cu_has(o, "quantized"));
    char q[600];
    snprintf(q, sizeof q, "%s/q.gguf", tmp);
    FILE *f = fopen(q, "rb");
    static uint8_t buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    int signals = 0, accepted = 0;
    for (size_t cut = 0; cut < n; cut += (cut < 4096 ? 97 : 7919)) {
        char t[600];
        snprintf(t, sizeof t, "%s/cut.gguf", tmp);
        FILE *g = fopen(t, "wb");
        if (g) fwrite(buf, 1, cut, g), fclose(g);
        snprintf(args, sizeof args, "validate %s", t);
        int rc = RUN(args);
        signals += rc < 0;
        accepted += rc == 0;
    }
    CHECK(signals == 0 && accepted == 0);
    snprintf(args, sizeof args, "validate %s", q);
    CHECK(RUN(args) == 0 && cu_has(o, "gguf layout"));
    /* inspect --json: valid JSON, NVFP4 at exactly 4.5 bits/weight */
    snprintf(args, sizeof args, "inspect --json %s", q);
    CHECK(RUN(args) == 0);
    json_t *j = json_loads(o ? o : "", 0, NULL);
    CHECK(j && !strcmp(json_string_value(json_object_get(j, "layout")), "gguf"));
    size_t i;
    json_t *t;
    int n_nv = 0;
    json_array_foreach(json_object_get(j, "tensor_list"), i, t) {
        if (strcmp(json_string_value(json_object_get(t, "type")), "nvfp4_e2m1")) continue;
        n_nv++;
        CHECK(json_real_value(json_object_get(t, "bits_per_weight")) == 4.5);
    }
    CHECK(n_nv == 14);
    CHECK(!strcmp(
        json_string_value(json_object_get(json_object_get(j, "metadata"), "fp4lane.weight_precision")),
        "nvfp4"));
    json_decref(j);
    snprintf(args, sizeof args, "inspect %s", q);
    CHECK(RUN(args) == 0 && cu_has(o, "nvfp4_e2m1") && cu_has(o, "scale2="));
    /* dump: text rows and raw f32 */
    snprintf(args, sizeof args, "dump %s model.layers.9.self_attn.q_proj.weight --rows 2:4", q);
    CHECK(RUN(args) == 0);
    int lines = 0, words = 0;
    for (char *p = o; p && *p; p++) lines += *p == '\n', words += *p == ' ' || *p == '\n';
    CHECK(lines == 2 && words == 2 * 256);
    snprintf(args, sizeof args, "dump %s model.layers.9.self_attn.q_proj.weight --rows 0:1 --raw", q);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "%s/out", tmp);
    FILE *r = fopen(args, "rb");
    long sz = -1;
    if (r) fseek(r, 0, SEEK_END), sz = ftell(r), fclose(r);
    CHECK(sz == 256 * 4);
    snprintf(args, sizeof args, "dump %s no.such.tensor", q);
    CHECK(RUN(args) == 1 && cu_has(e, "no tensor"));
    CHECK(RUN("dump") == 2);
    /* conversions and their usage errors */
    snprintf(args, sizeof args, "convert %s %s/ct", q, tmp);
    CHECK(RUN(args) == 2 && cu_has(e, "--layout"));
    snprintf(args, sizeof args, "convert %s %s/ct --layout compressed-tensors", q, tmp);
    CHECK(RUN(args) == 0 && cu_has(o, "compressed-tensors"));
    snprintf(args, sizeof args, "convert %s %s/g.gguf --layout gguf-ggml", q, tmp);
    CHECK(RUN(args) == 1 && cu_has(e, "ggml.n_in")); /* the golden set has a 16-wide tensor */
    snprintf(args, sizeof args, "convert %s %s/x --layout fp5", q, tmp);
    CHECK(RUN(args) == 2);
    CHECK(RUN("quantize") == 2);
    snprintf(args, sizeof args, "quantize %s %s/again.gguf --layout gguf", q, tmp);
    CHECK(RUN(args) == 1 && cu_has(e, "quantize.already"));
    /* sharded output: a 40 KB shard limit splits the golden set; it loads and converts to the same GGUF */
    snprintf(args, sizeof args, "quantize %s %s/sh --shard-size 40000", input, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "%s/sh/model.safetensors.index.json", tmp);
    FILE *ix = fopen(args, "rb");
    CHECK(ix != NULL);
    if (ix) fclose(ix);
    snprintf(args, sizeof args, "validate %s/sh", tmp);
    CHECK(RUN(args) == 0 && cu_has(o, "modelopt layout"));
    snprintf(args, sizeof args, "quantize %s %s/one", input, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "convert %s/sh %s/sh.gguf --layout gguf", tmp, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "convert %s/one %s/one.gguf --layout gguf", tmp, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "cmp -s %s/sh.gguf %s/one.gguf", tmp, tmp);
    CHECK(system(args) == 0);
    /* a bf16 GGUF is a quantize input too: safetensors -> GGUF (plain) -> quantize = ModelOpt's file */
    snprintf(args, sizeof args, "convert %s %s/in.gguf --layout gguf", input, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "validate %s/in.gguf", tmp);
    CHECK(RUN(args) == 0 && cu_has(o, "none layout"));
    snprintf(args, sizeof args,
             "quantize %s/in.gguf %s/fromgguf --layout modelopt --metadata device=cuda --metadata "
             "torch=2.11.0+cu130 "
             "--metadata 'producer=modelopt a2fbac7 NVFP4QTensor.quantize'",
             tmp, tmp);
    CHECK(RUN(args) == 0);
    snprintf(args, sizeof args, "cmp -s %s/fromgguf/model.safetensors %s", tmp, golden);
    CHECK(system(args) == 0);
    CHECK(RUN("demo") == 0 && cu_has(o, "demo passed"));
    free(o);
    free(e);
    snprintf(args, sizeof args, "rm -rf '%s'", tmp);
    if (!check_failed && system(args) != 0) fprintf(stderr, "cannot remove %s\n", tmp);
    return check_report();
}
