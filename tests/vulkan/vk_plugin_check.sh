#!/usr/bin/env bash
# tessera plugin check on the Vulkan plugin: every op family against ref on
# every Vulkan device; exit 77 (skip) when the plugin reports no device.
# usage: vk_plugin_check.sh PLUGIN.so   (TESSERA_BIN from the test env)
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" plugin check "$1" --verbose > "$out" 2>&1
rc=$?
grep -v "^    ok " "$out"
if [ $rc -eq 77 ]; then echo "skip: no Vulkan device"; exit 77; fi
if [ $rc -ne 0 ]; then echo "FAIL: tessera plugin check exited $rc"; exit 1; fi
# Every op family runs on the device, FLASH_ATTN with every KV cache type
# included; CPY too, but for quantized destinations other than the KV
# cache's block types (K-quants, Q8_1), which fall back.
for fam in GET_ROWS ADD MUL SCALE MUL_MAT RMS_NORM NORM ROPE SOFT_MAX SILU GELU SWIGLU CONCAT ARGMAX FLASH_ATTN; do
  if ! grep -qE "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, 0 unsupported" "$out"; then
    echo "FAIL: $fam is not fully supported on the device"; exit 1
  fi
done
if ! grep -qE "^  CPY +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed," "$out"; then
  echo "FAIL: CPY: a case failed"; exit 1
fi
kv='(F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|IQ4_NL)'
if grep -E "unsupported \(falls back\) #[0-9]+ .* -> $kv \[" "$out" | grep -q .; then
  echo "FAIL: CPY into a float or KV cache type fell back"; exit 1
fi
exit 0
