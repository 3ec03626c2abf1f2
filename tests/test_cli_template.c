/* test_cli_template.c — `fp4lane template MODEL [--template FILE] --messages CONV.json`: the
 * model's own template (models/tiny's tokenizer_config.json; a chat_template.jinja beside it wins),
 * bos/eos from the config, the text on stdout byte for byte, tools none when absent (as
 * transformers passes them), --now for strftime_now, a raising template exiting 1 with its
 * message, and the refusals (no template, bad CONV.json, a syntax error with its line). */
#include "check.h"
#include "cli_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char bin[512], tmp[512];

static void put(const char *rel, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fputs(text, f), fclose(f);
}

/* runs fp4lane in tmp, stdout and stderr captured */
static int run(const char *args, char **out, char **err) {
    char cmd[4096], fo[600], fe[600];
    snprintf(fo, sizeof fo, "%s/.out", tmp);
    snprintf(fe, sizeof fe, "%s/.err", tmp);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >'%s' 2>'%s' </dev/null", tmp, bin, args, fo, fe);
    return cu_system(cmd, fo, fe, out, err);
}

int main(void) {
    const char *b = getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build";
    char cwd[400];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    if (b[0] == '/')
        snprintf(bin, sizeof bin, "%s/fp4lane", b);
    else
        snprintf(bin, sizeof bin, "%s/%s/fp4lane", cwd, b);
    snprintf(tmp, sizeof tmp, "%s/fp4lane-template-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char *o = NULL, *e = NULL, args[2048];

    put("conv.json", "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
                     " {\"role\": \"user\", \"content\": \"Hi \\u00e9\"}], \"add_generation_prompt\": true}");
    /* models/tiny's own template (ChatML) from its tokenizer_config.json */
    snprintf(args, sizeof args, "template '%s/models/tiny' --messages conv.json", cwd);
    CHECK_EQ_INT(run(args, &o, &e), 0);
    CHECK(o && !strcmp(o, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi \xc3\xa9<|im_end|>\n"
                          "<|im_start|>assistant\n"));

    /* a template of one's own: bos/eos from the config, tools none when absent, extra members,
     * the clock from --now */
    put("t.jinja", "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ flag }}|"
                   "{{ strftime_now('%Y-%m-%d') }}|{{ messages|length }}|{{ add_generation_prompt }}\n");
    put("conv2.json", "{\"messages\": [], \"flag\": 7, \"add_generation_prompt\": false}");
    snprintf(args, sizeof args, "template '%s/models/tiny' --template t.jinja --messages conv2.json --now 0",
             cwd);
    CHECK_EQ_INT(run(args, &o, &e), 0);
    CHECK_MSG(o && !strcmp(o, "<|begin_of_text|>|<|end_of_text|>|true|true|7|1970-01-01|0|false"), "%s", o);

    /* chat_template.jinja beside tokenizer_config.json wins; a directory with only the config */
    snprintf(args, sizeof args, "cp '%s/models/tiny/tokenizer_config.json' '%s/'", cwd, tmp);
    CHECK(system(args) == 0);
    snprintf(args, sizeof args, "template . --messages conv.json");
    CHECK_EQ_INT(run(args, &o, &e), 0);
    CHECK(cu_has(o, "<|im_start|>user\nHi"));
    put("chat_template.jinja", "{% for m in messages %}[{{ m.role }}]{% endfor %}");
    CHECK_EQ_INT(run(args, &o, &e), 0);
    CHECK(o && !strcmp(o, "[system][user]"));

    /* a template that raises: exit 1 with its message */
    put("r.jinja",
        "{% if messages|length > 1 %}\n{{ raise_exception('Only one message, please') }}{% endif %}");
    CHECK_EQ_INT(run("template . --template r.jinja --messages conv.json", &o, &e), 1);
    CHECK(cu_has(e, "Only one message, please") && cu_has(e, "line 2"));
    CHECK(o && !*o);

    /* refusals: a syntax error names its line, CONV.json must hold messages, MODEL needs a template */
    put("s.jinja", "ok\n{% for %}");
    CHECK(run("template . --template s.jinja --messages conv.json", &o, &e) != 0);
    CHECK(cu_has(e, "jinja.syntax") && cu_has(e, "line 2"));
    put("bad.json", "{\"message\": []}");
    CHECK_EQ_INT(run("template . --messages bad.json", &o, &e), 1);
    CHECK(cu_has(e, "\"messages\""));
    CHECK_EQ_INT(run("template . --messages missing.json", &o, &e), 1);
    mkdir((snprintf(args, sizeof args, "%s/empty", tmp), args), 0700);
    CHECK_EQ_INT(run("template empty --messages conv.json", &o, &e), 1);
    CHECK(cu_has(e, "has no chat template"));
    CHECK_EQ_INT(run("template .", &o, &e), 2);
    CHECK(cu_has(e, "usage: fp4lane template"));

    free(o), free(e);
    snprintf(args, sizeof args, "rm -rf '%s'", tmp);
    CHECK(system(args) == 0);
    return check_report();
}
