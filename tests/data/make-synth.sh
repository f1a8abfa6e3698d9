#!/bin/sh
# Makes the synthetic models of this folder with tessera-synth and their
# goldens with llama.cpp (../shared/peer/golden_gen, built by
# ../shared/peer/build.sh). The committed files were made by exactly these
# commands (golden_gen compiled from ../shared/peer/golden_gen.cpp against
# the peer build's libllama, as build.sh does); run from the repository root:
#   tests/data/make-synth.sh BUILD_DIR GOLDEN_GEN
set -eu
build=${1:?usage: make-synth.sh BUILD_DIR GOLDEN_GEN}
golden_gen=${2:?usage: make-synth.sh BUILD_DIR GOLDEN_GEN}
vocab=${TESSERA_SHARED:-../shared}/models/stories260K.gguf
out=tests/data
shape="--dim 128 --layers 4 --heads 4 --kv-heads 2 --ffn 192 --ctx 256"

synth() { # NAME ARGS...: model NAME.gguf, then its golden NAME.jsonl
    name=$1
    shift
    "$build/tools/tessera-synth" -q -o "$out/$name.gguf" --vocab-from "$vocab" $shape "$@"
    "$golden_gen" "$out/$name.gguf" "$out/synth-prompts.jsonl" "$out/$name.jsonl" 16 256
}

# No rope in layer 3 (of 0..3).
synth synth-smollm3-f32 --arch smollm3 --seed 11
# Multipliers other than 1 and 1/sqrt(D) everywhere, so each one shows.
synth synth-granite-f32 --arch granite --seed 12 --set granite.embedding_scale=4.0 \
    --set granite.residual_scale=0.5 --set granite.attention.scale=0.25 --set granite.logit_scale=3.0
# Head size 48 (not 128/4); YaRN stretch 16 from an original context of 8,
# so the prompts pass 8, 16 and 24 positions: the query temperature (0.1)
# steps there, and YaRN's ramp is in play.
synth synth-mistral3-f32 --arch mistral3 --seed 13 --head-dim 48 \
    --set mistral3.rope.scaling.original_context_length=8
