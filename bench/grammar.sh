#!/usr/bin/env bash
# Tokens/s and sampler cost with and without a grammar on SmolLM2-135M-Instruct
# (docs/grammar.md "Cost"). Usage: bench/grammar.sh [BUILD_DIR] [N_TOKENS]
# One line per configuration: tokens, wall time of the generation loop, and
# the wall and thread-CPU time spent inside tessera_sampler_sample.
set -euo pipefail
build=${1:-build}
n=${2:-48}
gen=$build/tests/grammar/grammar_gen
model=${TESSERA_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[ -x "$gen" ] || { echo "grammar.sh: $gen missing: build first" >&2; exit 1; }
[ -f "$model" ] || { echo "grammar.sh: $model missing: run scripts/fetch-models.sh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite a short story about a cat named Tom, then describe Tom as JSON.<|im_end|>\n<|im_start|>assistant\n' >"$tmp/prompt"
# Allows any text: the same tokens as no grammar, so it shows the per-token check alone.
printf 'root ::= [^\\x00]*\n' >"$tmp/any.gbnf"
echo '{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"color":{"type":"string"},"friends":{"type":"array","items":{"type":"string"}}},"required":["name","age","color","friends"],"additionalProperties":false}' >"$tmp/cat.json"
for cfg in "none - 0" "gbnf $tmp/any.gbnf 0" "json - 0" "schema $tmp/cat.json 0" "none - 0.8" "json - 0.8"; do
  set -- $cfg
  stats=$("$gen" "$model" "$tmp/prompt" "$1" "$2" "$3" 5 "$n" 2>&1 >/dev/null | tail -1)
  printf '%-7s temp %-4s %s\n' "$1" "$3" "$stats" | awk '{
    for (i = 4; i < NF; i += 2) v[$i] = $(i + 1);
    printf "%-7s temp %-4s %3d tokens  %7.2f tokens/s  sampler %.3f ms/token (cpu %.3f)  attach %.1f ms\n",
      $1, $3, v["tokens"], v["tokens"] * 1000 / v["gen_ms"], v["sample_ms"] / v["tokens"],
      v["sample_cpu_ms"] / v["tokens"], v["attach_ms"] }'
done
