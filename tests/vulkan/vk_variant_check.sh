#!/usr/bin/env bash
# tessera plugin check of the matrix products (MUL_MAT and GRAPH families)
# with one gpu kernel variant forced (the environment the test sets:
# TESSERA_VULKAN_MATMUL, TESSERA_VULKAN_NO_SUBGROUPS, TESSERA_VULKAN_NO_IDOT;
# or TESSERA_VULKAN_FLASH_ATTN with VK_CHECK_FAMILIES="FLASH_ATTN GRAPH").
# Every case of each family must pass and none may be declined.
# usage: vk_variant_check.sh PLUGIN.so [FEATURE]
# FEATURE (e.g. integer-dot): the device must report it in `tessera devices`
# (the plugin built with that variant and the device has it), else skip.
# Exit 77 (skip) when the plugin reports no device.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
plugin=$1
feature=${2:-}
if [ -n "$feature" ]; then
  feats=$("$bin" devices --plugin-dir "$(dirname "$plugin")" 2>/dev/null | grep -A4 ' vulkan0 ' | grep 'features:')
  if [ -z "$feats" ]; then echo "skip: no Vulkan device"; exit 77; fi
  # the word itself or with its detail, "coopmat(f32)": not "coopmat-off(f32)"
  if ! grep -qE -- " $feature(\(| |\$)" <<<"$feats"; then
    echo "skip: vulkan0 does not offer '$feature' (the device lacks it or glslc could not build the variant):$feats"
    exit 77
  fi
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for fam in ${VK_CHECK_FAMILIES:-MUL_MAT GRAPH}; do
  "$bin" plugin check "$plugin" --op "$fam" > "$out" 2>&1
  rc=$?
  cat "$out"
  if [ $rc -eq 77 ]; then echo "skip: no Vulkan device"; exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAIL: plugin check --op $fam exited $rc"; exit 1; fi
  if ! grep -qE "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, 0 unsupported" "$out"; then
    echo "FAIL: $fam is not fully supported with this variant"; exit 1
  fi
done
exit 0
