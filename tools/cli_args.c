/* cli_args.c — what every verb shares when it reads its arguments: the per-verb option help
 * (with defaults) that `fp4lane help VERB` and `fp4lane VERB --help` print after the verb's usage
 * line from cli_verbs, the strict size parser, and the output-path check for "-". */
#include "cli.h"
#include "fp4lane_runtime.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Every option a verb's parser accepts, with its default; the usage line stays in cli_verbs. */
static const struct {
    const char *verb, *text;
} verb_options[] = {
    {"selftest", "  --json                 one JSON object on stdout\n"},
    {"validate", "  --json                 the verdict and the error as JSON\n"},
    {"inspect",
     "  --json                 the listing as JSON (\"shape\" in the container's order, \"ne\" innermost\n"
     "                         first)\n"
     "shapes: safetensors in PyTorch order (outermost first), GGUF as ne (innermost first); the listing\n"
     "labels which\n"},
    {"dump",
     "  --rows A:B             rows A (inclusive) to B (exclusive) of the dequantized tensor (default: all)\n"
     "  --raw                  raw little-endian f32 on stdout instead of text\n"},
    {"quantize",
     "  --layout L             modelopt, compressed-tensors, gguf, gguf-ggml (default: gguf-ggml when OUT\n"
     "                         ends in .gguf, else modelopt). modelopt and compressed-tensors write a\n"
     "                         directory\n"
     "  --to nvfp4|q4_k        weight format (default nvfp4; q4_k writes GGUF only)\n"
     "  --scale2-rule gpu|cpu  per-tensor scale rule (default gpu: ModelOpt's amax/(6*448))\n"
     "  --no-fusion            no shared scale2 across q/k/v and gate/up (default: fused like ModelOpt)\n"
     "  --quantize-embeddings  quantize embed_tokens and lm_head too (default: kept as they are)\n"
     "  --shard-size N[K|M|G]  largest safetensors shard in bytes (default 0: one file)\n"
     "  --metadata KEY=VALUE   a safetensors metadata entry (repeatable, at most 32; HF layouts only)\n"
     "  --force                replace an existing OUT file, or the checkpoint in a non-empty OUT\n"
     "                         directory (default: refuse, nothing written)\n"
     "OUT's missing parent directories are created. The input directory's other files (tokenizer,\n"
     "generation_config.json, chat template; never weight files or their index) are copied into OUT\n"},
    {"convert",
     "  --layout L             modelopt, compressed-tensors, gguf, gguf-ggml (default: gguf-ggml when OUT\n"
     "                         ends in .gguf, else required)\n"
     "  --shard-size N[K|M|G]  largest safetensors shard in bytes (default 0: one file)\n"
     "  --metadata KEY=VALUE   a safetensors metadata entry (repeatable, at most 32; HF layouts only)\n"
     "  --force                replace an existing OUT file, or the checkpoint in a non-empty OUT\n"
     "                         directory (default: refuse, nothing written)\n"},
    {"run",
     "  MODEL                  (default: $FP4LANE_MODEL, else models/tiny beside the executable)\n"
     "  -p TEXT | -p - | -f FILE  a text prompt through MODEL's tokenizer (stdin with -p -); without\n"
     "                         any prompt: \"This section describes\", sampled with a fixed seed\n"
     "  --prompt-ids 1,2,3|@FILE  token ids instead of text (ids out, summary on stdout)\n"
     "  --stop STR             stop when the text contains STR (repeatable; not printed)\n"
     "  -n N                   tokens to generate (default 16 with ids, 128 with text)\n"
     "  --device cpu|cuda      (default cpu)      --mode exact|native (default exact)\n"
     "  --threads N            CPU threads (default 1)\n"
     "  --tp N                 split the CPU engine over N in-process ranks (default 1; docs/SCALE.md)\n"
     "  --prefill-chunk N      prompt tokens per step (default 0: the whole prompt)\n"
     "  --ctx N                context length (default: the model's)\n"
     "  --temp T (default 0: greedy)  --top-k K (default 0: off)  --top-p P (default 1)\n"
     "  --min-p P (default 0)  --repeat-penalty X (default 1)  --presence-penalty X (default 0)\n"
     "  --penalty-last-n N (default 0)  --seed S (default 0)  --ignore-eos\n"
     "  --logits-out F.npy  --kv-save F  --kv-load F  --batch-file PROMPTS  --cuda-lib PATH\n"
     "                         (outputs are files: '-' and two outputs naming one file are refused)\n"
     "  --json                 one object at the end; with text, \"stopped_by\": stop (a --stop string),\n"
     "                         eos, length (-n, or the context) or interrupted\n"
     "  --force                replace an existing --logits-out / --kv-save file (default: refuse)\n"
     "  --draft DRAFT          speculative decoding: DRAFT (same tokenizer) proposes, MODEL verifies in one\n"
     "                         step; the output is plain decoding's bit for bit (exact mode, kquant lane;\n"
     "                         refused elsewhere: docs/ROUTES.md). Not with --batch-file or --kv-load\n"
     "  --draft-n K            tokens drafted per verify step, 1..32 (default 4)\n"
     "  --timing               load and first-token times and memory, on stderr\n"
     "text out: stdout holds the continuation alone (the prompt is not echoed; without a prompt the\n"
     "default one is printed first); on a terminal it ends with a newline, into a file or a pipe it is\n"
     "exactly the generated text; the summary goes to stderr\n"},
    {"chat",
     "  MODEL                  (default: as run)   --system TEXT\n"
     "  --chat-template NAME|FILE  a built-in template or a Jinja file (default: MODEL's own)\n"
     "  -n N                   tokens per answer (default 256)\n"
     "  --temp T (default 0.7)  --top-k K (default 40)  --top-p P (default 1)  --min-p P (default 0)\n"
     "  --repeat-penalty R (default 1.1)  --penalty-last-n N (default 64)  --presence-penalty X (default 0)\n"
     "  --seed S (default 0); every value in run's ranges (the library's one table, as Python's)\n"
     "  --device, --mode, --threads, --ctx as run; /reset and /exit in the session; Ctrl-C ends an answer\n"},
    {"serve",
     "  MODEL                  (default: as run)\n"
     "  --name ID              the model's id in the API (default: MODEL's folder or file name)\n"
     "  --host ADDR            IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
     "  --port N               (default 8080; 0: any free port, named in the log)\n"
     "  --api-key KEY|@FILE    require \"Authorization: Bearer KEY\" (default: none)\n"
     "  --parallel N           requests decoded together (default 4)\n"
     "  --queue N              requests waiting beyond those (default 64; then 429)\n"
     "  --max-body BYTES       request body cap (default 1048576)\n"
     "  --prefix-cache N       KV blocks of prompt prefixes kept for reuse (default: one context's worth;\n"
     "                         0: none)\n"
     "  --conn-per-ip N        connections one client address may hold (default 64, at most 256)\n"
     "  --device, --mode, --threads, --ctx, --tp, --cuda-lib as run (its --prefill-chunk is refused:\n"
     "                         the scheduler splits prompts); SIGTERM or Ctrl-C drains and exits 0\n"},
    {"bench",
     "  --a \"OPTIONS\" --b \"OPTIONS\"  the two configurations (run's engine options); NAME=VALUE words in\n"
     "                         OPTIONS are environment variables set while that side's engine is created\n"
     "                         and while its cells run (FP4LANE_CUDA_ATT_CLUSTER, _ATT_CLUSTER_WIDE,\n"
     "                         _ATT_GEMM, _NO_FUSE, _MEM_LIMIT, _NO_QIN, _FRAG, _NO_FRAG; a knob a\n"
     "                         process reads once follows the first side)\n"
     "  --pairs N (default 5)  --prefix N prompt tokens (default 66)  --tokens N decode steps (default 32)\n"
     "  --warmup N pairs discarded (default 1)  --seed S (default 1)  --json FILE the receipt\n"
     "  --logits               decode steps bring every logit to the host (default: greedy steps,\n"
     "                         fp4_rt_step_greedy, as a greedy run decodes)\n"
     "  --seqs N               sequences decoded together in each cell, 1..64 (default 1): tok/s counts\n"
     "                         every sequence's tokens\n"
     "  --order abab|abba      cells A B A B ... (default) or A B B A ...: pairs alternate which side\n"
     "                         runs first, so an advantage of running first cancels\n"},
    {"compare",
     "  --a \"OPTIONS\" --b \"OPTIONS\"  the two runtime configurations (run's options)\n"
     "  --max-drift X          exit 1 when the largest logit difference is above X (default: report only)\n"
     "  --json                 the comparison as JSON\n"},
    {"synth",
     "  --shape S              required: tiny, llama3-8b, qwen3-8b, llama3-70b, llama-160m, tiny-moe,\n"
     "                         qwen3-30b-a3b, tiny-moe16, small-moe, tiny-gemma3, gemma3-27b,\n"
     "                         tiny-deepseek, deepseek-v3, qwen3-30b-a3b-l8 (its widths, 8 layers),\n"
     "                         tiny-deepseek-nolora (q_lora_rank null)\n"
     "  --arch A               llama, qwen3, qwen3-moe, mixtral, gemma3, deepseek-v3 (default: the\n"
     "                         shape's own)\n"
     "  --to bf16|nvfp4        nvfp4: the ModelOpt NVFP4 checkpoint, quantized while it is made (the\n"
     "                         bf16 model is never written; the bytes of synth + quantize --layout\n"
     "                         modelopt)\n"
     "  --seed N               (default 1)\n"
     "  --shard-size N[K|M|G]  largest shard in bytes (default 4G; 0: one file)\n"
     "  --threads N            0..256 (default 0: one per core)\n"
     "  --json                 the summary as JSON\n"},
    {"tokenize",
     "  -f FILE                read the text from FILE (default: TEXT, or standard input)\n"
     "  --                     the end of the options: a TEXT that starts with '-' follows\n"
     "  --json                 {\"ids\": [...], \"tokens\": [...]}\n"
     "  --add-special          add BOS/EOS as the tokenizer says (default: none added)\n"
     "  --parse-special        match special tokens written in the text (default: plain text)\n"},
    {"detokenize",
     "  IDS                    at least one token id (commas or spaces between them)\n"
     "  --skip-special         leave special tokens out of the text\n"
     "  --cleanup              HF's clean_up_tokenization_spaces\n"},
    {"template",
     "  --messages CONV.json   required: {\"messages\": [...], \"tools\": [...],\n"
     "                         \"add_generation_prompt\": true, ...}\n"
     "  --template FILE.jinja  this template instead of MODEL's own\n"
     "  --now UNIX_SECONDS     strftime_now's clock, read as UTC (default: the local clock)\n"},
};

const char *cli_verb_options(const char *verb) {
    for (size_t i = 0; i < sizeof verb_options / sizeof verb_options[0]; i++)
        if (!strcmp(verb, verb_options[i].verb)) return verb_options[i].text;
    return NULL;
}

int cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) return 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    }
    return 0;
}

/* The library's "shard_size" argument (fp4_arg_parse, the Python binding's shard_size alike):
 * digits, then nothing or one of K, M, G (powers of 1024); at most 2^62. */
int cli_parse_size(const char *s, uint64_t *out) {
    fp4_arg_val v;
    if (fp4_arg_parse("shard_size", NULL, s, &v, NULL)) return -1;
    *out = v.u;
    return 0;
}

int cli_output_path_ok(const char *verb, const char *out) {
    if (out && strcmp(out, "-")) return 1;
    fprintf(stderr, "fp4lane %s: '-' cannot take a checkpoint (it is written atomically under a file "
                    "name, not streamed): name a file or directory\n", verb);
    return 0;
}

/* dir (".", or everything before the last '/', "/" for the root) and the last component of path */
static void split_path(const char *path, char *dir, size_t n, const char **base) {
    const char *sl = strrchr(path, '/');
    *base = sl ? sl + 1 : path;
    if (!sl) snprintf(dir, n, ".");
    else snprintf(dir, n, "%.*s", sl == path ? 1 : (int)(sl - path), path);
}

int cli_same_path(const char *a, const char *b) {
    struct stat sa, sb;
    if (!strcmp(a, b)) return 1;
    const int ea = !stat(a, &sa), eb = !stat(b, &sb);
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return 0; /* one exists and the other does not */
    char da[4096], db[4096];
    const char *ba, *bb;
    split_path(a, da, sizeof da, &ba);
    split_path(b, db, sizeof db, &bb);
    return !strcmp(ba, bb) && !stat(da, &sa) && !stat(db, &sb) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
