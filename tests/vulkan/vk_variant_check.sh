#!/usr/bin/env bash
# tessera plugin check of the matrix products (MUL_MAT and GRAPH families)
# with one gpu kernel variant forced (the environment the test sets:
# TESSERA_VULKAN_MATMUL, TESSERA_VULKAN_NO_SUBGROUPS, TESSERA_VULKAN_NO_IDOT;
# or TESSERA_VULKAN_FLASH_ATTN with VK_CHECK_FAMILIES="FLASH_ATTN GRAPH").
# Every case of each family must pass, and the variant may decline only
# what the default kernels decline too (weight types no shader reads, which
# fall back to the CPU): the same count, taken without the variant's
# environment.
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
  line=$(grep -E "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, [0-9]+ unsupported" "$out")
  if [ -z "$line" ]; then echo "FAIL: $fam has failures with this variant"; exit 1; fi
  declined=$(sed -E 's/.* ([0-9]+) unsupported.*/\1/' <<<"$line")
  if [ "$declined" != 0 ]; then
    base=$(env -u TESSERA_VULKAN_MATMUL -u TESSERA_VULKAN_NO_SUBGROUPS -u TESSERA_VULKAN_NO_IDOT \
           -u TESSERA_VULKAN_FLASH_ATTN "$bin" plugin check "$plugin" --op "$fam" 2>&1 |
           grep -E "^  $fam +[0-9]+ cases:" | sed -E 's/.* ([0-9]+) unsupported.*/\1/')
    if [ "$declined" != "$base" ]; then
      echo "FAIL: $fam: this variant declines $declined cases, the default kernels ${base:-?}"; exit 1
    fi
    echo "$fam: $declined cases declined, as by the default kernels (types no shader reads)"
  fi
done
exit 0
