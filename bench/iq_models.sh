#!/usr/bin/env bash
# bench/iq_models.sh [DIR] — the IQ4_XS and IQ2_XXS models of bench/IQ.md:
# the TinyLlama-1.1B shape of bench/tinyllama.py from tessera-synth (F16,
# random weights), an importance matrix from llama-imatrix over two
# 512-token chunks of tests/data/golden/gpl3-12k.txt, and llama-quantize
# with it (IQ2_XXS refuses to run without one) to IQ4_XS, and to IQ2_XXS
# (llama-quantize's mix: output Q5_K, token_embd Q2_K, attn_v Q4_K) for
# the same shape cut to 4 layers: on the 2 shared
# cores of 2026-11-29 llama-quantize took 54 minutes for the IQ4_XS one
# and would have taken over an hour for a 22-layer IQ2_XXS. Writes
# DIR/tinyllama-{F16,IQ4_XS}.gguf, DIR/tinyllama.imatrix.gguf,
# DIR/tiny4-{F16,IQ2_XXS}.gguf (DIR default: models/), skipping what is
# already there. LLAMA_BIN picks llama.cpp's bin folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/models}
bin=${LLAMA_BIN:-$HOME/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}
for t in llama-imatrix llama-quantize; do
  [ -x "$bin/$t" ] || { echo "iq_models.sh: $bin/$t is missing (set LLAMA_BIN)" >&2; exit 1; }
done
mkdir -p "$dir"
f16=$dir/tinyllama-F16.gguf imat=$dir/tinyllama.imatrix.gguf
if [ ! -f "$f16" ]; then
  "$root/build/tools/tessera-synth" -o "$f16" --vocab-from "$root/../shared/models/stories260K.gguf" \
    --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --ctx 2048 --type F16
fi
if [ ! -f "$imat" ]; then
  "$bin/llama-imatrix" -m "$f16" -f "$root/tests/data/golden/gpl3-12k.txt" -c 512 --chunks 2 -t 2 \
    -o "$imat" >"$dir/imatrix.log" 2>&1 || { tail -5 "$dir/imatrix.log" >&2; exit 1; }
fi
quantize() { # F16 OUT TYPE [llama-quantize options]
  local in=$1 out=$2 t=$3
  shift 3
  [ -f "$out" ] && return 0
  "$bin/llama-quantize" --imatrix "$imat" "$@" "$in" "$out" "$t" 2 >"$out.log" 2>&1 ||
    { tail -5 "$out.log" >&2; exit 1; }
}
quantize "$f16" "$dir/tinyllama-IQ4_XS.gguf" IQ4_XS
f16_4=$dir/tiny4-F16.gguf
if [ ! -f "$f16_4" ]; then
  "$root/build/tools/tessera-synth" -o "$f16_4" --vocab-from "$root/../shared/models/stories260K.gguf" \
    --dim 2048 --layers 4 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --ctx 2048 --type F16
fi
quantize "$f16_4" "$dir/tiny4-IQ2_XXS.gguf" IQ2_XXS
ls -l "$dir/tinyllama-IQ4_XS.gguf" "$dir/tiny4-IQ2_XXS.gguf"
