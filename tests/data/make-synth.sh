#!/bin/sh
# Remakes the synthetic models of synth-models.txt with tessera-synth and
# their goldens with llama.cpp (../shared/peer/golden_gen, built by
# ../shared/peer/build.sh), then rewrites SHA256SUMS. Only needed when
# tessera-synth's output changes on purpose or a model is added: the build
# makes the models itself (assemble.py) and checks them against SHA256SUMS.
# The committed goldens were made by exactly these commands (golden_gen
# compiled from ../shared/peer/golden_gen.cpp against the peer build's
# libllama, as build.sh does); run from the repository root:
#   tests/data/make-synth.sh BUILD_DIR GOLDEN_GEN
set -eu
build=${1:?usage: make-synth.sh BUILD_DIR GOLDEN_GEN}
golden_gen=${2:?usage: make-synth.sh BUILD_DIR GOLDEN_GEN}
src=tests/data
out=$build/tests/data
python3 $src/assemble.py remake $src "$out" "$build/tools/tessera-synth"
# Goldens of the made f32 models (not of synth-llama-Q4_0).
for name in $(sed -e 's/#.*//' -e '/^ *$/d' -e 's/ .*//' $src/synth-models.txt | grep -- '-f32$'); do
    "$golden_gen" "$out/$name.gguf" "$src/synth-prompts.jsonl" "$src/$name.jsonl" 16 256
done
python3 $src/assemble.py sums $src "$out"
