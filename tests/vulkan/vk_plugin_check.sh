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
# cache's block types (K-quants, Q8_1), which fall back. MUL_MAT and
# MUL_MAT_ID, GET_ROWS and CPY from a block type may decline only the
# ternary types (TQ1_0, TQ2_0: no shader reads them); the grid IQ types
# run in the products' and eltwise's IQ_GRIDS builds (common.glsl).
fams='GET_ROWS ADD MUL SCALE MUL_MAT RMS_NORM NORM ROPE SOFT_MAX SILU GELU SWIGLU SWIGLU_OAI CONCAT ARGMAX FLASH_ATTN
      MUL_MAT_ID TOP_K SUM_ROWS DIV SSM_CONV SSM_SCAN DELTA_NET GELU_ERF'
fams=$(echo $fams) # one space between names
for fam in $fams; do
  if ! grep -qE "^  $fam +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed, [0-9]+ unsupported" "$out"; then
    echo "FAIL: $fam has failures (or no case passed) on the device"; exit 1
  fi
done
unread='(TQ1_0|TQ2_0)'
declined=$(grep -E "unsupported \(falls back\) #[0-9]+ .*: (${fams// /|}) '" "$out" |
           grep -vE ": (GET_ROWS|MUL_MAT|MUL_MAT_ID) '[^']*': src0 \($unread\) has a dtype the shaders do not read")
if [ -n "$declined" ]; then
  echo "FAIL: the device declined cases it must run:"; head -5 <<<"$declined"; exit 1
fi
if ! grep -qE "^  CPY +[0-9]+ cases: +[1-9][0-9]* passed, 0 failed," "$out"; then
  echo "FAIL: CPY: a case failed"; exit 1
fi
kv='(F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|IQ4_NL)'
# (a source no shader reads is another matter: it falls back like MUL_MAT's)
if grep -E "unsupported \(falls back\) #[0-9]+ .* -> $kv \[" "$out" |
   grep -vE ": CPY '[^']*': src0 \($unread\) has a dtype the shaders do not read" | grep -q .; then
  echo "FAIL: CPY into a float or KV cache type fell back"; exit 1
fi
exit 0
