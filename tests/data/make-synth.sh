#!/bin/sh
# Remakes the synthetic models of synth-models.txt with tessera-synth, the
# quantized ones of quantized-models.txt with llama.cpp's llama-quantize, and
# llama.cpp's goldens of them (../shared/peer's golden_gen, built by
# ../shared/peer/build.sh; llama-quantize by ../shared/peer/build-more.sh
# llama-quantize), then rewrites SHA256SUMS. Only needed when tessera-synth's
# output changes on purpose or a model is added: the build makes the models
# itself (assemble.py; the quantized ones with tessera quantize, which must
# give llama-quantize's bytes) and checks them against SHA256SUMS.
# The committed goldens were made by exactly these commands; run from the
# repository root, PEER_BIN being the peer build's bin folder (golden_gen and
# llama-quantize):
#   tests/data/make-synth.sh BUILD_DIR PEER_BIN
set -eu
build=${1:?usage: make-synth.sh BUILD_DIR PEER_BIN}
peer=${2:?usage: make-synth.sh BUILD_DIR PEER_BIN}
src=tests/data
out=$build/tests/data
names() { sed -e 's/#.*//' -e '/^ *$/d' "$1"; }
python3 $src/assemble.py remake $src "$out" "$build/tools/tessera-synth"
# llama-quantize [--pure] FROM.gguf NAME.gguf TYPE 2 (2 threads)
names $src/quantized-models.txt | while read -r name from type pure; do
    "$peer/llama-quantize" $pure "$out/$from.gguf" "$out/$name.gguf" "$type" 2 >/dev/null
done
# Goldens of the f32 models at the top: three
# prompts; of every model in models/: the two of synth-s-prompts.jsonl, as
# ../shared's goldens of the same names, into golden/.
for name in $(names $src/synth-models.txt | sed 's/ .*//' | grep -- '-f32$' | grep -v /); do
    "$peer/golden_gen" "$out/$name.gguf" "$src/synth-prompts.jsonl" "$src/$name.jsonl" 16 256
done
# gpt-oss's MXFP4 experts dequantized to F32 (exact: powers of two times
# small integers), and llama.cpp's golden of that file: the oracle of
# devices that decode MXFP4 exactly and multiply with f32 activations (the
# GPU plugins), where llama.cpp's CPU rounds the activations to Q8_0.
"$peer/llama-quantize" --allow-requantize "$out/synth-gpt-oss-f32.gguf" "$out/synth-gpt-oss-f32-dequant.gguf" F32 2 \
    >/dev/null
"$peer/golden_gen" "$out/synth-gpt-oss-f32-dequant.gguf" "$src/synth-prompts.jsonl" \
    "$src/synth-gpt-oss-f32-dequant.jsonl" 16 256
for name in $( (names $src/synth-models.txt; names $src/quantized-models.txt) | sed 's/ .*//' | grep '^models/'); do
    "$peer/golden_gen" "$out/$name.gguf" "$src/synth-s-prompts.jsonl" "$src/golden/${name#models/}.jsonl" 16 256
done
python3 $src/assemble.py sums $src "$out"
