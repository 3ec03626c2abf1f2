/* fp4lane.c — the CLI entry point: parses the verb and hands over to tools/cmd_*.c. */
#include "cli.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const cli_verb cli_verbs[] = {
    {"help", cmd_help, "show this help, or the usage of one verb", "fp4lane help [VERB]"},
    {"demo", cmd_demo, "the main job on an embedded model: quantize, validate, convert, contract",
     "fp4lane demo"},
    {"selftest", cmd_selftest, "prove the codecs and the contract fixtures (exhaustive, ~1 s)",
     "fp4lane selftest [--json]"},
    {"validate", cmd_validate, "check a checkpoint against every loading rule (exit 0 valid, 1 refused)",
     "fp4lane validate FILE|DIR [--json]"},
    {"inspect", cmd_inspect, "metadata, tensors, types, shapes, bits/weight, lanes",
     "fp4lane inspect FILE|DIR [--json]"},
    {"dump", cmd_dump, "dequantized values of one tensor (text, or raw f32 with --raw)",
     "fp4lane dump FILE TENSOR [--rows A:B] [--raw]"},
    {"quantize", cmd_quantize, "quantize f32/f16/bf16 weights to NVFP4 (ModelOpt recipe) or Q4_K",
     "fp4lane quantize IN OUT [--layout modelopt|compressed-tensors|gguf|gguf-ggml] [--to nvfp4|q4_k]\n"
     "       [--scale2-rule gpu|cpu] [--no-fusion] [--quantize-embeddings] [--shard-size N[K|M|G]]\n"
     "       [--metadata KEY=VALUE]... [--force]"},
    {"convert", cmd_convert, "re-layout NVFP4 weights between the four layouts, bit for bit",
     "fp4lane convert IN OUT [--layout modelopt|compressed-tensors|gguf|gguf-ggml]\n"
     "       [--shard-size N[K|M|G]] [--metadata KEY=VALUE]... [--force]"},
    {"run", cmd_run, "decode: text or ids in, the continuation out (CPU, or CUDA through libfp4lane_cuda.so)",
     "fp4lane run [MODEL] [-p TEXT|-p -|-f FILE|--prompt-ids 1,2,3|@FILE] [-n N] [--stop STR]...\n"
     "       [--device cpu|cuda] [--mode exact|native]\n"
     "       [--threads N] [--prefill-chunk N] [--temp T --top-k K --top-p P --seed S]\n"
     "       [--logits-out FILE.npy] [--kv-save F] [--kv-load F] [--batch-file PROMPTS] [--json]\n"
     "       [--force] [--timing]"},
    {"chat", cmd_chat, "interactive chat over MODEL's chat template (default: models/tiny)",
     "fp4lane chat [MODEL] [--system TEXT] [--chat-template NAME|FILE] [-n N] [--temp T] [--seed S] [...]"},
    {"compare", cmd_compare, "the determinism comparator: the same teacher-forced ids, two configurations",
     "fp4lane compare MODEL --a \"OPTIONS\" --b \"OPTIONS\" --prompt-ids ... [--max-drift X] [--json]"},
    {"bench", cmd_bench, "paired timing of two configurations (A B A B ...): mean, CV, ratio, verdict",
     "fp4lane bench MODEL --a \"OPTIONS\" --b \"OPTIONS\" [--pairs 5] [--prefix 66] [--tokens 32]\n"
     "       [--warmup 1] [--seed S] [--seqs N] [--logits] [--order abab|abba] [--json FILE]"},
    {"synth", cmd_synth,
     "a random-weight bf16 or NVFP4 HF checkpoint of a real shape (heavy tails, outliers)",
     "fp4lane synth OUT --shape tiny|llama3-8b|qwen3-8b|llama3-70b|llama-160m|tiny-moe|\n"
     "       qwen3-30b-a3b|tiny-moe16|small-moe|tiny-gemma3|gemma3-27b|tiny-deepseek|deepseek-v3|\n"
     "       qwen3-30b-a3b-l8|tiny-deepseek-nolora\n"
     "       [--arch llama|qwen3|qwen3-moe|mixtral|gemma3|deepseek-v3] [--to bf16|nvfp4] [--seed N]\n"
     "       [--shard-size N[K|M|G]] [--threads N] [--layers N] [--json]"},
    {"tokenize", cmd_tokenize, "text to token ids (HF tokenizer.json or GGUF tokenizer)",
     "fp4lane tokenize MODEL|tokenizer.json [-f FILE | [--] TEXT] [--json] [--add-special]\n"
     "       [--parse-special]"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with continuous batching (docs/SERVE.md)",
     "fp4lane serve [MODEL] [--host 127.0.0.1] [--port 8080] [--api-key KEY|@FILE] [--parallel N]\n"
     "       [--queue N] [--ctx N] [--device cpu|cuda] [--mode exact|native] [--threads N] [--name ID]\n"
     "       [--max-body BYTES] [--prefix-cache N] [--conn-per-ip N]"},
    {"detokenize", cmd_detokenize, "token ids to text",
     "fp4lane detokenize MODEL|tokenizer.json [--] IDS... [--skip-special] [--cleanup]"},
    {"template", cmd_template, "render MODEL's own chat template over a conversation (what the model sees)",
     "fp4lane template MODEL [--template FILE.jinja] --messages CONV.json [--now UNIX_SECONDS]"},
};
const int cli_n_verbs = (int)(sizeof cli_verbs / sizeof cli_verbs[0]);

int cli_isatty_stderr(void) { return isatty(2); }

int cli_usage(const char *verb) {
    for (int i = 0; i < cli_n_verbs; i++)
        if (!strcmp(verb, cli_verbs[i].name)) fprintf(stderr, "usage: %s\n", cli_verbs[i].usage);
    return 2;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "phase [#####     ]  40%  ETA 0m12s": the phase is what the library names (quantize, write);
 * the ETA is the phase's elapsed time scaled by what is left; redrawn at most 10 times a second. */
void cli_progress(const char *what, int64_t done, int64_t total) {
    static char phase[32];
    static double t0, last;
    static int64_t last_done;
    if (!cli_isatty_stderr()) return;
    if (total <= 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        phase[0] = 0;
        return;
    }
    double t = now_s();
    if (strncmp(phase, what, sizeof phase - 1) || done < last_done) {
        snprintf(phase, sizeof phase, "%s", what);
        t0 = t, last = 0;
    }
    last_done = done;
    if (t - last < 0.1 && done < total) return;
    last = t;
    int pct = (int)(done * 100 / total), bar = pct / 4;
    double el = t - t0, eta = done > 0 ? el * (double)(total - done) / (double)done : -1;
    fprintf(stderr, "\r\033[K%-12.12s [%.*s%*s] %3d%%", what, bar, "#########################", 25 - bar, "",
            pct);
    if (eta >= 0 && el >= 0.5) fprintf(stderr, "  ETA %dm%02ds", (int)eta / 60, (int)eta % 60);
    else fprintf(stderr, "  ETA --");
    fflush(stderr);
}

static void usage_all(FILE *f) {
    fprintf(f, "fp4lane %s — NVFP4 weights: load, validate, quantize, run\n\nusage: fp4lane VERB [ARGS]\n\n",
            fp4_version());
    for (int i = 0; i < cli_n_verbs; i++) fprintf(f, "  %-10s %s\n", cli_verbs[i].name, cli_verbs[i].summary);
    fprintf(f, "\n  --version  print the version\n\nexit status: 0 ok, 1 refused or failed, 2 usage error\n");
}

int cmd_help(int argc, char **argv) {
    if (argc < 2) {
        usage_all(stdout);
        return 0;
    }
    for (int i = 0; i < cli_n_verbs; i++)
        if (!strcmp(argv[1], cli_verbs[i].name)) {
            const char *opt = cli_verb_options(cli_verbs[i].name);
            printf("usage: %s\n\n%s\n", cli_verbs[i].usage, cli_verbs[i].summary);
            if (opt) printf("\noptions:\n%s", opt);
            return 0;
        }
    fprintf(stderr, "fp4lane: no verb '%s'\n", argv[1]);
    return 2;
}

static int run_verb(int argc, char **argv);

int main(int argc, char **argv) {
    cli_stdio_guard();
    return cli_stdout_finish(run_verb(argc, argv));
}

static int run_verb(int argc, char **argv) {
    if (argc < 2) {
        usage_all(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("fp4lane %s\n", fp4_version());
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return cmd_help(1, argv);
    for (int i = 0; i < cli_n_verbs; i++)
        if (!strcmp(argv[1], cli_verbs[i].name)) /* VERB ... --help: the verb's full help */
            return cli_wants_help(argc - 1, argv + 1) ? cmd_help(2, argv)
                                                      : cli_verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "fp4lane: unknown verb '%s' (try: fp4lane help)\n", argv[1]);
    return 2;
}
