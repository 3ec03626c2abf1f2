#!/usr/bin/env bash
# dev/gpu/slim.sh on|off — a device call sends the checkout's tracked and untracked-not-ignored files plus the
# carried paths, 64 MiB at most; the repository's tracked files alone are above that since transformers' MoE,
# Gemma 3 and DeepSeek reference checkpoints landed (tests/data/hf) beside the fuzzing corpus. `on` takes
# what no device run reads out of the index (git rm --cached, the files stay on disk) and ignores it
# (info/exclude, between two marker lines), so it does not travel; `off` puts both back. Kept:
# tests/data/hf/{qwen3,llama31,llama} (the device calls' CLI compares, test_gpu_runtime and
# test_gpu_generate read them).
# Run `off` right after the call: `on` refuses while the index holds staged changes, and so does a
# commit made while it is on (a pre-commit check would be the next step; git status shows the deletions).
set -eu
cd "$(git rev-parse --show-toplevel)"
EX=$(git rev-parse --git-path info/exclude)
P="fuzz/corpus tests/data/hf/mistral tests/data/hf/qwen2 tests/data/hf/qwen3_moe
   tests/data/hf/qwen3_moe_fused tests/data/hf/mixtral tests/data/hf/gemma3 tests/data/hf/deepseek_v3
   tests/data/hf/deepseek_v3_nolora"
case "${1:-}" in
on)
    if ! git diff --cached --quiet; then
        echo "slim: the index holds staged changes; commit or unstage them" >&2; exit 1
    fi
    grep -q '^# slim.sh begin$' "$EX" 2>/dev/null && { echo "slim: already on" >&2; exit 1; }
    mkdir -p "$(dirname "$EX")"
    git rm -r -q --cached $P
    { echo '# slim.sh begin'; for p in $P; do echo "/$p/"; done; echo '# slim.sh end'; } >> "$EX"
    mib=$(git ls-files -z | xargs -0 du -cb | awk '/total$/{s+=$1} END {printf "%.1f", s/1048576}')
    echo "slim: on ($mib MiB tracked)";;
off)
    git reset -q -- $P
    sed -i '/^# slim.sh begin$/,/^# slim.sh end$/d' "$EX"
    echo "slim: off";;
*) echo "usage: dev/gpu/slim.sh on|off" >&2; exit 2;;
esac
