/* test_cli_tp.c — `fp4lane run --tp N` (docs/SCALE.md) on models/tiny (4 query heads of 64 over 2
 * KV heads): the split runs in native mode with each rank's memory plan on stderr; exact mode's
 * refusal names the super-block boundary (tp.exact-split), three ranks the heads (tp.heads), CUDA
 * its route (route.tp-cuda), Gemma 3 and DeepSeek-V3 their family (tp.arch), and --tp 0 is a usage
 * error (exit 2). */
#include "check.h"
#include "cli_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char bin[512], tmp[512];

static int cli(const char *args, char **out, char **err) {
    return cu_run(bin, tmp, NULL, args, out, err);
}

int main(void) {
    snprintf(bin, sizeof bin, "%s/fp4lane", getenv("FP4_BUILD") ? getenv("FP4_BUILD") : "build");
    snprintf(tmp, sizeof tmp, "%s/fp4lane-clitp-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) return perror("mkdtemp"), 1;
    char *o = NULL, *e = NULL;
    const char *m = "run models/tiny --prompt-ids 1,2,3 -n 3";
    char a[1024];
    snprintf(a, sizeof a, "%s --tp 2 --mode native", m);
    CHECK(cli(a, &o, &e) == 0 && cu_has(e, "memory plan on cpu tp rank 0/2") &&
          cu_has(e, "memory plan on cpu tp rank 1/2") && cu_has(o, "cpu-tp"));
    snprintf(a, sizeof a, "%s --tp 2", m);
    CHECK(cli(a, &o, &e) == 1 && cu_has(e, "tp.exact-split") && cu_has(e, "o_proj"));
    snprintf(a, sizeof a, "%s --tp 3 --mode native", m);
    CHECK(cli(a, &o, &e) == 1 && cu_has(e, "tp.heads") && cu_has(e, "2 KV heads"));
    snprintf(a, sizeof a, "%s --tp 2 --device cuda", m);
    CHECK(cli(a, &o, &e) == 1 && cu_has(e, "route.tp-cuda"));
    snprintf(a, sizeof a, "%s --tp 0", m);
    CHECK(cli(a, &o, &e) == 2 && cu_has(e, "--tp 0"));
    /* Gemma 3 (its ring cache, GeGLU, extra norms) is not split: refused by name */
    snprintf(a, sizeof a, "synth %s/g3 --shape tiny-gemma3 --threads 1", tmp);
    CHECK(cli(a, &o, &e) == 0);
    snprintf(a, sizeof a, "run %s/g3 --prompt-ids 1,2 -n 1 --tp 2 --mode native", tmp);
    CHECK(cli(a, &o, &e) == 1 && cu_has(e, "tp.arch") && cu_has(e, "Gemma 3"));
    /* nor DeepSeek-V3 (its latent cache and absorbed attention) */
    snprintf(a, sizeof a, "synth %s/ds --shape tiny-deepseek --threads 1", tmp);
    CHECK(cli(a, &o, &e) == 0);
    snprintf(a, sizeof a, "run %s/ds --prompt-ids 1,2 -n 1 --tp 2 --mode native", tmp);
    CHECK(cli(a, &o, &e) == 1 && cu_has(e, "tp.arch") && cu_has(e, "DeepSeek-V3"));
    free(o), free(e);
    snprintf(a, sizeof a, "rm -rf '%s'", tmp);
    if (system(a) != 0) fprintf(stderr, "cannot remove %s\n", tmp);
    return check_report();
}
