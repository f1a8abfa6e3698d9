#!/usr/bin/env bash
# Offloading more than the device holds is one clear error before anything
# is allocated (the fit: how much is needed, how much is available), a
# non-zero exit and no crash; -ngl auto then places no layer. The device's
# memory is capped with TESSERA_VULKAN_MEMORY_LIMIT_MIB. Exit 77 without a
# Vulkan device.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
build=${TESSERA_BUILD_ROOT:?TESSERA_BUILD_ROOT not set}
model=${TESSERA_SHARED:?TESSERA_SHARED not set}/models/stories260K.gguf
[ -f "$model" ] || { echo "skip: $model is missing"; exit 77; }
"$bin" devices --plugin-dir "$build" | grep -q vulkan0 || { echo "skip: no Vulkan device"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
TESSERA_VULKAN_MEMORY_LIMIT_MIB=0.1 "$bin" run -m "$model" -p "Once" -n 2 --plugin-dir "$build" \
  --device vulkan0 -ngl 99 > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/err"
[ $rc -ne 0 ] && [ $rc -lt 128 ] || { echo "FAIL: exit status $rc (want an error, not a crash)"; fail=1; }
grep -qE "device vulkan0: -ngl 99 \(5 layers\) with -c [0-9]+ needs [0-9.]+ MiB \(weights [0-9.]+, KV [0-9.]+, compute [0-9.]+\), 0\.1 MiB available; 0 layers fit" "$tmp/err" ||
  { echo "FAIL: no message with the sizes needed and available"; fail=1; }
TESSERA_VULKAN_MEMORY_LIMIT_MIB=0.1 "$bin" run -m "$model" -p "Once" -n 2 --plugin-dir "$build" \
  --device vulkan0,ref --verbose > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: -ngl auto: exit status $rc"; cat "$tmp/err"; fail=1; }
grep -q "fit: vulkan0: 0 of 5 layers" "$tmp/err" || { echo "FAIL: -ngl auto placed layers"; cat "$tmp/err"; fail=1; }
# With room for the weights the same command works.
TESSERA_VULKAN_MEMORY_LIMIT_MIB=64 "$bin" run -m "$model" -p "Once" -n 2 --plugin-dir "$build" \
  --device vulkan0 -ngl 99 > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: 64 MiB was not enough"; cat "$tmp/err"; fail=1; }
[ $fail -eq 0 ] && echo "vulkan out of memory: all checks passed"
exit $fail
