#!/usr/bin/env bash
# The whole graph on the GPU device at -ngl 99, weights resident: the prompt
# and the generation graphs each run as one split on DEVICE with no
# fallback, no weight is copied per step (token embedding, output norm and
# output projection included: they are uploaded once at load), and
# --verbose reports one submission per decoding step. The same holds with a
# CPU device also chosen (-dev DEVICE,cpu-avx0 or ref): the output
# projection stays on DEVICE. On vulkan0 the reused step graph's command
# buffer is replayed (ABI 1.3 queue stats), and --profile prints device time
# per op type (timestamp queries). Exit 77 without the device or the model.
#
# usage: gpu_whole_graph.sh DEVICE MODEL
#   MODEL: a GGUF path, a file name looked up in TESSERA_MODEL_CACHE (or
#   ~/.cache/tessera/models), or "tinyllama-s": a TinyLlama-1.1B-shaped model
#   (llama, 8 query heads per KV head, Q4_0, a 32000-token vocabulary) made
#   small with tessera-synth so that it runs in seconds on a software GPU.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
build=${TESSERA_BUILD_ROOT:?TESSERA_BUILD_ROOT not set}
shared=${TESSERA_SHARED:?TESSERA_SHARED not set}
dev=$1 model=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" devices --plugin-dir "$build" > "$tmp/devices" 2>&1
if ! grep -qE "^ +[0-9]+ +$dev " "$tmp/devices"; then echo "skip: no device $dev on this machine"; exit 77; fi
if [ "$model" = tinyllama-s ]; then
  "$build/tools/tessera-synth" -q -o "$tmp/tinyllama-s.gguf" --vocab-from "$shared/models/stories260K.gguf" \
    --type Q4_0 --dim 256 --layers 2 --heads 8 --kv-heads 1 --ffn 704 --vocab 32000 ||
    { echo "FAIL: tessera-synth could not make the model"; exit 1; }
  model=$tmp/tinyllama-s.gguf
elif [ ! -f "$model" ]; then
  cache=${TESSERA_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/models}
  [ -f "$cache/$model" ] || { echo "skip: $model is not in $cache"; exit 77; }
  model=$cache/$model
fi
cpu=$(grep -oE "^ +[0-9]+ +cpu-[a-z]+0 " "$tmp/devices" | awk '{print $2}' | head -1)
[ -n "$cpu" ] || cpu=ref
fail=0
# check DEVICES: one run, then the assertions on its --explain/--verbose
check() {
  local devs=$1
  "$bin" run --plugin-dir "$build" -m "$model" --device "$devs" -ngl 99 --explain --verbose --temp 0 \
    -n 4 -p "Once upon a time" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ]; then cat "$tmp/err"; echo "FAIL: -dev $devs: tessera run exited $rc"; fail=1; return; fi
  grep -E "^(devices|[0-9]+ nodes|split|  copy|fallback|per decoding step)" "$tmp/err" | sed "s/^/[$devs] /"
  local n
  n=$(grep -cE "^[0-9]+ nodes, 1 splits, [0-9]+ copies, 0 fallbacks" "$tmp/err")
  [ "$n" -eq 2 ] || { echo "FAIL: -dev $devs: $n graphs in one split without fallbacks, expected 2"; fail=1; }
  if grep "^split " "$tmp/err" | grep -vq "^split [0-9]*: $dev,"; then
    echo "FAIL: -dev $devs: a split off $dev"; fail=1
  fi
  if grep -qE "^  copy '[^']*\.weight'" "$tmp/err"; then echo "FAIL: -dev $devs: a weight is copied per step"; fail=1; fi
  if ! grep -qE "^per decoding step: 1\.00 submissions .*; 1 splits;" "$tmp/err"; then
    echo "FAIL: -dev $devs: not one submission in one split per decoding step"; fail=1
  fi
  case $dev in vulkan*)
    grep -qE "^per decoding step: .*computes, 0\.[0-9]*[1-9][0-9]* replayed\)" "$tmp/err" ||
      { echo "FAIL: -dev $devs: no decoding step replayed its command buffer"; fail=1; } ;;
  esac
}
# --profile: a row per op type with device time, the products among them
profile() {
  "$bin" run --plugin-dir "$build" -m "$model" --device "$dev" -ngl 99 --profile --temp 0 -n 2 -p "Once" \
    > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ]; then cat "$tmp/err"; echo "FAIL: --profile: tessera run exited $rc"; fail=1; return; fi
  sed -n '/^profile of/,$p' "$tmp/err"
  # device ms is the third column; any positive figure (1615.000 included)
  awk '$1 == "MUL_MAT" && $3 + 0 > 0 { found = 1 } END { exit !found }' "$tmp/err" ||
    { echo "FAIL: --profile: no device time for MUL_MAT"; fail=1; }
  grep -qE "^total +[0-9]+ " "$tmp/err" || { echo "FAIL: --profile: no total row"; fail=1; }
}
check "$dev"
check "$dev,$cpu"
case $dev in vulkan*) profile ;; esac
[ $fail -eq 0 ] && echo "ok: the whole graph of $(basename "$model") runs on $dev in one submission per step"
exit $fail
