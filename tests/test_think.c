/* test_think.c — fp4_think_filter: reasoning spans hidden or shown in streamed text, the same
 * output whether the text comes whole, byte by byte or in uneven pieces; a span the prompt opens;
 * tags cut across pieces; text that only looks like the start of a tag; UTF-8 kept whole. */
#include "check.h"
#include "fp4lane_text.h"
#include <stdlib.h>

/* the filter's whole output for text pushed in pieces of step bytes (0: all at once) */
static char *run(int hide, const char *prompt, const char *text, size_t step) {
    fp4_think_filter *f = NULL;
    CHECK_OK(fp4_think_filter_create(hide, prompt, prompt ? strlen(prompt) : 0, &f));
    size_t n = strlen(text), k = 0;
    char *acc = calloc(1, 2 * n + 16);
    const char *o;
    size_t ol;
    for (size_t i = 0; f && i < n;) {
        size_t m = step && step < n - i ? step : n - i;
        CHECK_OK(fp4_think_filter_push(f, text + i, m, &o, &ol));
        memcpy(acc + k, o, ol), k += ol;
        i += m;
    }
    if (f) {
        CHECK_OK(fp4_think_filter_flush(f, &o, &ol));
        memcpy(acc + k, o, ol), k += ol;
    }
    fp4_think_filter_free(f);
    acc[k] = 0;
    return acc;
}

static void same(int hide, const char *prompt, const char *text, const char *want) {
    static const size_t steps[] = {0, 1, 2, 3, 5, 7};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        char *got = run(hide, prompt, text, steps[s]);
        CHECK_MSG(!strcmp(got, want), "hide %d, step %zu: '%s' -> '%s', want '%s'", hide, steps[s], text, got,
                  want);
        free(got);
    }
}

int main(void) {
    check_test_name = "test_think";
    const char *t = "Hi <think>\nplan: 2+2\n</think>\n\nIt is 4.";
    same(1, NULL, t, "Hi It is 4.");
    same(0, NULL, t, t);
    same(0, "<|im_start|>assistant\n<think>\n", t, t);
    /* the template opened the span: the model writes its reasoning, then the closing tag */
    same(1, "<|Assistant|><think>\n", "first, 2+2 = 4\n</think>\n\nFour.", "Four.");
    same(1, "<think>x</think>", "plain", "plain"); /* a prompt whose span is closed */
    /* look-alikes and cut tags */
    same(1, NULL, "<thing> <thinker> </think> a < b <<think>>x</think>y",
         "<thing> <thinker> </think> a < b <y");
    same(1, NULL, "end <thi", "end <thi");
    same(1, NULL, "unclosed <think> never shown", "unclosed ");
    same(1, NULL, "\xe6\x97\xa5<think>\xf0\x9f\x98\x80</think> \xc3\xa9", "\xe6\x97\xa5\xc3\xa9");
    same(1, NULL, "", "");
    fp4_think_filter *f = NULL;
    CHECK(fp4_think_filter_create(1, NULL, 3, &f) == FP4_ERR_INVALID_ARG && !f);
    CHECK_OK(fp4_think_filter_create(1, "a <think> ", 10, &f));
    CHECK(fp4_think_filter_inside(f) == 1);
    const char *o;
    size_t ol;
    CHECK(fp4_think_filter_push(f, NULL, 1, &o, &ol) == FP4_ERR_INVALID_ARG);
    fp4_think_filter_free(f);
    fp4_think_filter_free(NULL);
    return check_report();
}
