/* fuzz_request.c — libFuzzer target for the server's request bodies (src/server/api.c). Byte 0
 * picks the endpoint (chat, completions, tokenize, detokenize); the rest is the body. A body is
 * accepted with every field within its bounds, or refused with a 4xx/5xx status, an error type
 * and a message, whose OpenAI error JSON is built.
 *   make fuzz-build && build-fuzz/fuzz_request fuzz/corpus/fuzz_request */
#include "server/server.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void refused(const srv_fail *f) {
    if (f->status < 400 || f->status > 599 || !f->type[0] || !f->msg[0]) __builtin_trap();
    char *js = fp4_server_error_json(f);
    if (js && !strstr(js, "\"error\"")) __builtin_trap();
    free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    srv_fail f = {0};
    switch (data[0] % 4) {
    case 0:
    case 1: {
        srv_gen *g = malloc(sizeof *g);
        if (!g) return 0;
        if (fp4_server_parse_gen(body, n, data[0] % 2 == 0, "tiny", g, &f))
            refused(&f);
        else {
            if (g->chat && (!g->n_msgs || g->n_msgs > SRV_MAX_MESSAGES)) __builtin_trap();
            for (size_t i = 0; g->chat && i < g->n_msgs; i++)
                if (!g->msgs[i].role || !g->msgs[i].content) __builtin_trap();
            if (!g->chat && (!g->prompt || !g->prompt_len)) __builtin_trap();
            if (g->n_stops > SRV_MAX_STOPS || g->top_logprobs < 0 || g->top_logprobs > 20) __builtin_trap();
            if (!(g->sp.temperature >= 0 && g->sp.temperature <= 2) || g->max_tokens == 0) __builtin_trap();
        }
        fp4_server_gen_free(g);
        free(g);
        break;
    }
    case 2: {
        char *text = NULL;
        size_t len = 0;
        int add = 0;
        if (fp4_server_parse_tokenize(body, n, &text, &len, &add, &f))
            refused(&f);
        else if (!text || text[len] != 0)
            __builtin_trap();
        free(text);
        break;
    }
    default: {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (fp4_server_parse_detokenize(body, n, &ids, &n_ids, &f))
            refused(&f);
        else
            for (size_t i = 0; i < n_ids; i++)
                if (ids[i] < 0) __builtin_trap();
        free(ids);
    }
    }
    return 0;
}
