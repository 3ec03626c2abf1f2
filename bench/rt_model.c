/* rt_model.c — writes the seeded bf16 Llama-shaped checkpoint that bench/runtime.sh decodes
 * (tests/rt_fixture.c's writer). usage: rt_model DIR HIDDEN HEADS KV_HEADS FFN VOCAB LAYERS CTX */
#include "rt_fixture.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 9)
        return fprintf(stderr, "usage: rt_model DIR HIDDEN HEADS KV_HEADS FFN VOCAB LAYERS CTX\n"), 2;
    rtfx_spec s = rtfx_default("llama");
    s.hidden = atoi(argv[2]), s.heads = atoi(argv[3]), s.kv_heads = atoi(argv[4]), s.ffn = atoi(argv[5]);
    s.vocab = atoi(argv[6]), s.layers = atoi(argv[7]), s.ctx = atoi(argv[8]);
    s.head_dim = s.hidden / s.heads;
    return rtfx_write_hf(argv[1], &s, 1) ? 1 : 0;
}
