/* gen_checkpoint.c — writes a Llama-shaped bf16 HF checkpoint of about SIZE_MB megabytes from a
 * seeded generator (for bench/io.sh). Usage: gen_checkpoint DIR SIZE_MB [SHARD_MB]
 * Build: make build/dev/ref/gen_checkpoint (bench/io.sh does). */
#include "fp4lane_io.h"
#include "fp4_rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static uint64_t s = 42;
static float normal(void) { return fp4_rng_normal(&s); }

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: gen_checkpoint DIR SIZE_MB [SHARD_MB]\n"), 2;
    const int64_t H = 2048, F = 5632; /* per layer: q,k,v,o (H×H) + gate,up (F×H) + down (H×F), bf16 */
    const int64_t per_layer = (4 * H * H + 3 * F * H) * 2;
    const int64_t layers = (atoll(argv[2]) << 20) / per_layer + 1;
    const uint64_t shard = argc > 3 ? (uint64_t)atoll(argv[3]) << 20 : 0;
    mkdir(argv[1], 0777);
    fp4_hfdir_writer *w;
    fp4_error e;
    if (fp4_hfdir_writer_create(argv[1], shard, &w, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    static const char *const nm[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    char name[128];
    for (int64_t l = 0; l < layers; l++)
        for (int k = 0; k < 7; k++) {
            int64_t shape[2] = {k < 4 ? H : k < 6 ? F : H, k < 6 ? H : F};
            snprintf(name, sizeof name, "model.layers.%lld.%s.weight", (long long)l, nm[k]);
            if (fp4_hfdir_writer_add_tensor(w, name, FP4_ST_BF16, 2, shape, &e))
                return fprintf(stderr, "%s\n", e.msg), 1;
        }
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)(F * H));
    for (int64_t l = 0; l < layers; l++)
        for (int k = 0; k < 7; k++) {
            int64_t n = (k < 4 ? H : F) * H;
            for (int64_t i = 0; i < n; i++) buf[i] = fp4_f32_to_bf16(normal() * 0.02f);
            if (fp4_hfdir_writer_write(w, buf, (size_t)n * 2, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
        }
    size_t ns;
    if (fp4_hfdir_writer_finish(w, &ns, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    fp4_hfdir_writer_free(w);
    free(buf);
    printf("%lld layers, %.1f MB, %zu shard(s)\n", (long long)layers, (double)(layers * per_layer) / 1e6, ns);
    return 0;
}
