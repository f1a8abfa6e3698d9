#!/usr/bin/env bash
# tessera plugin check of FLASH_ATTN and GRAPH (rope then attention over
# permuted views) with the flash attention kernel the environment forces
# (TESSERA_VULKAN_FLASH_ATTN=workgroup|split: backends/vulkan/vk_fused.c).
# Every case must pass and none may be declined.
# usage: vk_flash_check.sh PLUGIN.so   (exit 77 when there is no device)
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
plugin=$1
echo "TESSERA_VULKAN_FLASH_ATTN=${TESSERA_VULKAN_FLASH_ATTN:-}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for fam in FLASH_ATTN GRAPH; do
  "$bin" plugin check "$plugin" --op "$fam" > "$out" 2>&1
  rc=$?
  cat "$out"
  if [ $rc -eq 77 ]; then echo "skip: no Vulkan device"; exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAIL: plugin check --op $fam exited $rc"; exit 1; fi
  if ! grep -qE "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, 0 unsupported" "$out"; then
    echo "FAIL: $fam is not fully supported with this kernel"; exit 1
  fi
done
exit 0
