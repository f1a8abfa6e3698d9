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
out=$(cd "$build" && pwd)/tests/data # absolute: some steps run in $src
peer=$(cd "$peer" && pwd)
names() { sed -e 's/#.*//' -e '/^ *$/d' "$1"; }
python3 $src/assemble.py remake $src "$out" "$build/tools/tessera-synth"
# synth-iq's importance matrix (stored), over golden/story.txt, run in
# tests/data so that the file records the text's path as golden/story.txt
(cd $src && "$peer/llama-imatrix" -m "$out/models/synth-iq-f32.gguf" -f golden/story.txt \
    -o models/synth-iq-f32.imatrix.gguf -c 128 -t 2 --process-output >/dev/null 2>&1)
# llama-quantize [--pure] [--imatrix FILE] FROM.gguf NAME.gguf TYPE 2 (2
# threads), in tests/data: an imatrix path is written into the file as given
names $src/quantized-models.txt | while read -r name from type opts; do
    (cd $src && "$peer/llama-quantize" $opts "$out/$from.gguf" "$out/$name.gguf" "$type" 2 >/dev/null)
done
# synth-iq's other grid types, stored (tests/data/README.md): every matrix in
# the type; IQ2_S is llama-quantize's IQ2_M; a Q4_K token embedding where the
# type needs the matrix's data for it
for t in IQ3_S IQ2_XXS IQ2_XS IQ2_S IQ1_S IQ1_M; do
    case $t in IQ3_S|IQ1_M) emb= ;; *) emb="--token-embedding-type q4_K" ;; esac
    [ $t = IQ2_S ] && ftype=IQ2_M || ftype=$t
    (cd $src && "$peer/llama-quantize" --pure $emb --imatrix models/synth-iq-f32.imatrix.gguf \
        "$out/models/synth-iq-f32.gguf" models/synth-iq-$t.gguf $ftype 2 >/dev/null)
    "$peer/golden_gen" "$src/models/synth-iq-$t.gguf" "$src/synth-s-prompts.jsonl" "$src/golden/synth-iq-$t.jsonl" 16 256
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
# (synth-iq-f32 is only the grid types' source: no golden of its own)
for name in $( (names $src/synth-models.txt; names $src/quantized-models.txt) | sed 's/ .*//' | grep '^models/' |
               grep -v '^models/synth-iq-f32$'); do
    "$peer/golden_gen" "$out/$name.gguf" "$src/synth-s-prompts.jsonl" "$src/golden/${name#models/}.jsonl" 16 256
done
python3 $src/assemble.py sums $src "$out"
