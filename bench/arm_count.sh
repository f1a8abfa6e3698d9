#!/usr/bin/env bash
# Instructions per 32-weight block of each cpu-neon kernel, counted
# dynamically: bench/arm_count.c calls every kernel of every level between
# two marker functions; qemu-aarch64 logs each translation block it runs
# (-d in_asm,exec,nochain) and bench/arm_count.py sums the instructions
# executed between the markers, by class. Needs a cross build
# (meson setup build-aarch64 --cross-file cross/aarch64-linux-gnu.ini &&
# ninja -C build-aarch64). Usage: bench/arm_count.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-aarch64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
aarch64-linux-gnu-gcc -O2 -std=c11 -static -Iplugins-api -Ibackends/cpu-common -Ibackends/cpu-neon \
    bench/arm_count.c backends/cpu-common/cpu_mm_quants.c backends/cpu-common/cpu_quants.c \
    "$b"/backends/libcpu-neon-kernels-{neon,dotprod,i8mm}.a -lm -o "$tmp/arm_count"
qemu-aarch64 -cpu max -d in_asm,exec,nochain -D "$tmp/trace.log" "$tmp/arm_count" > "$tmp/cases.txt"
aarch64-linux-gnu-nm "$tmp/arm_count" > "$tmp/syms.txt"
python3 bench/arm_count.py "$tmp/syms.txt" "$tmp/trace.log" "$tmp/cases.txt"
