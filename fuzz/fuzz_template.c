/* fuzz_template.c — libFuzzer target for the Jinja engine (fp4_template_compile / _render). The
 * input is the template; it is rendered with a fixed conversation (system, user, assistant with a
 * tool call, tool result, reasoning_content), tools and bos/eos, under small caps so that every
 * input ends fast. It must compile or be refused with a jinja.* rule and a message; a render must
 * give NUL-terminated output within the output cap, or a refusal with a jinja.* rule and a message
 * (raise_exception() alone raises an empty one, as the reference does).
 *   make fuzz-build && build-fuzz/fuzz_template -dict=fuzz/fuzz_template.dict fuzz/corpus/fuzz_template */
#include "fp4lane_text.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char MESSAGES[] = "[{\"role\":\"system\",\"content\":\"Be "
                               "brief.\"},{\"role\":\"user\",\"content\":\"Weather in Paris? caf\\u00e9\"},"
                               "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Use the "
                               "tool.\",\"tool_calls\":[{\"id\":"
                               "\"call12345\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                               "\"arguments\":{\"city\":\"Paris\"}}}]},"
                               "{\"role\":\"tool\",\"tool_call_id\":\"call12345\",\"content\":\"21 "
                               "C\"},{\"role\":\"user\",\"content\":\"ok\"}]";
static const char EXTRA[] =
    "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
    "\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]"
    "}";

static void check_err(fp4_status st, const fp4_error *e) {
    if (st == FP4_OK) return;
    /* raise_exception() without a message raises "" (as the reference does) */
    if (e->code != st || strncmp(e->rule, "jinja.", 6) || (!e->msg[0] && strcmp(e->rule, "jinja.raise")))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fp4_template *t = NULL;
    fp4_error e;
    fp4_status st = fp4_template_compile((const char *)data, size, &t, &e);
    check_err(st, &e);
    if (st) return 0;
    fp4_template_opts o = {0};
    o.fixed_clock = 1, o.now = 1765000000;
    o.max_steps = 200000, o.max_output = 1 << 20, o.max_memory = 32u << 20;
    for (int agp = 0; agp < 2; agp++) {
        char *out = NULL;
        size_t len = 0;
        st = fp4_template_render(t, MESSAGES, agp, EXTRA, &o, &out, &len, &e);
        check_err(st, &e);
        if (st == FP4_OK && (!out || out[len] != 0 || len > o.max_output)) __builtin_trap();
        free(out);
    }
    fp4_template_free(t);
    return 0;
}
