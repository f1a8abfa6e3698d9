#!/usr/bin/env bash
# `tessera devices` on aarch64 lists cpu-neon0 with the features the plugin
# detected and the kernel level it runs; TESSERA_NEON_LEVEL lowers the level
# and an unknown level is a warning, not a failure.
# TESSERA_BIN from the test env (cross builds: cross/exe-wrapper.sh -> qemu).
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

check() {  # description, fixed string expected in $out
  if grep -qF -- "$2" "$out"; then echo "ok   $1"
  else echo "FAIL: $1: '$2' not in:"; cat "$out"; fail=1; fi
}

"$bin" devices > "$out" 2>&1 || { echo "FAIL: tessera devices exited $?"; cat "$out"; exit 1; }
check "cpu-neon0 listed as a CPU device" "cpu-neon0    CPU"
check "baseline feature reported" "features: asimd"
# qemu -cpu max (and any ARMv8.6+ core) has both; real older cores may not
if grep -q "asimddp" "$out"; then check "dotprod level picked when present" "kernels)"; fi

for lvl in neon dotprod i8mm; do
  TESSERA_NEON_LEVEL=$lvl "$bin" devices > "$out" 2>&1
  feats=$(grep -A3 "cpu-neon0" "$out" | grep "features:")
  case $lvl in
    dotprod) need=asimddp ;;
    i8mm) need=i8mm ;;
    *) need=asimd ;;
  esac
  if [[ "$feats" == *"$need"* ]]; then
    check "TESSERA_NEON_LEVEL=$lvl runs the $lvl kernels" "($lvl kernels)"
  else
    echo "ok   TESSERA_NEON_LEVEL=$lvl: this CPU lacks $need (not checked)"
  fi
done

TESSERA_NEON_LEVEL=avx512 "$bin" devices > "$out" 2>&1
check "unknown level still lists the device" "cpu-neon0"
exit $fail
