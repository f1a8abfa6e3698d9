#!/usr/bin/env bash
# tessera plugin check on the Vulkan plugin: every op family against ref on
# every Vulkan device; exit 77 (skip) when the plugin reports no device.
# usage: vk_plugin_check.sh PLUGIN.so   (TESSERA_BIN from the test env)
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" plugin check "$1" > "$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 77 ]; then echo "skip: no Vulkan device"; exit 77; fi
if [ $rc -ne 0 ]; then echo "FAIL: tessera plugin check exited $rc"; exit 1; fi
# Every op family but CPY (quantized destinations fall back) runs on the
# device; FLASH_ATTN with the KV cache's block types (70 cases) falls back
# too, the F32/F16/BF16 ones run here.
for fam in GET_ROWS ADD MUL SCALE MUL_MAT RMS_NORM NORM ROPE SOFT_MAX SILU GELU SWIGLU CONCAT ARGMAX; do
  if ! grep -qE "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, 0 unsupported" "$out"; then
    echo "FAIL: $fam is not fully supported on the device"; exit 1
  fi
done
if ! grep -qE "^  FLASH_ATTN +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, 70 unsupported" "$out"; then
  echo "FAIL: FLASH_ATTN: not every F32/F16/BF16 case ran on the device, or a block-type one did"; exit 1
fi
exit 0
