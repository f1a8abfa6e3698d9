#!/usr/bin/env bash
# tessera run --explain with a quantized KV cache on the Vulkan device
# (-ngl 99 -fa on -ctk/-ctv T): the prompt and the generation graphs each run
# as one split on vulkan0 with no fallback — the cache writes (CPY into the
# block type), q's rounding through Q8_0 and FLASH_ATTN all on the device —
# and --verbose puts the KV cache on vulkan0. Exit 77 without a Vulkan device.
# usage: vk_kv_explain.sh MODEL.gguf TYPE (a MODEL without a / is
# $TESSERA_SHARED/models/MODEL: ../shared's or the build's tests/data)
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
build=${TESSERA_BUILD_ROOT:?TESSERA_BUILD_ROOT not set}
model=$1 type=$2
case $model in */*) ;; *) model=${TESSERA_SHARED:?TESSERA_SHARED not set}/models/$model ;; esac
[ -f "$model" ] || { echo "skip: $model is missing (the build makes synth-s from tests/data)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" devices --plugin-dir "$build" > "$tmp/devices" 2>&1
if ! grep -qE "^ +[0-9]+ +vulkan0 " "$tmp/devices"; then echo "skip: no Vulkan device on this machine"; exit 77; fi
"$bin" run --plugin-dir "$build" -m "$model" --device vulkan0 -ngl 99 -fa on -ctk "$type" -ctv "$type" \
  --explain --verbose -n 3 -p "Once upon a time" > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/err"
if [ $rc -ne 0 ]; then echo "FAIL: tessera run exited $rc"; exit 1; fi
fail=0
n=$(grep -c "^split [0-9]*: vulkan0," "$tmp/err")
[ "$n" -eq 2 ] || { echo "FAIL: $n splits on vulkan0, expected 2 (prompt, generation)"; fail=1; }
if grep "^split " "$tmp/err" | grep -vq "^split [0-9]*: vulkan0,"; then echo "FAIL: a split off vulkan0"; fail=1; fi
n=$(grep -cE "^[0-9]+ nodes, 1 splits, [0-9]+ copies, 0 fallbacks" "$tmp/err")
[ "$n" -eq 2 ] || { echo "FAIL: $n graphs in one split without fallbacks, expected 2"; fail=1; }
if grep -q "^fallback:" "$tmp/err"; then echo "FAIL: nodes fell back"; fail=1; fi
if ! grep -qE "memory vulkan0: .*KV $type ([1-9]|0\.[0-9]*[1-9])[0-9.]* MiB" "$tmp/err"; then
  echo "FAIL: no 'KV $type' memory on vulkan0 in --verbose"; fail=1
fi
[ $fail -eq 0 ] && echo "ok: attention with a $type cache runs on vulkan0"
exit $fail
