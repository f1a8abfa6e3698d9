#!/usr/bin/env bash
# bench/compare.sh [--avx2] [--rounds K] [MODEL...] — Tessera and llama.cpp side by side:
# ../shared/peer/cmp_bench.sh runs `tessera bench` and `llama-bench` on each
# model in turn (pp512 and tg128, 2 threads, 3 runs; P, N, TH, R override)
# and prints both figures with the ratio. Only meaningful on an idle machine.
#
#   --rounds K  run the whole comparison K times (each engine 1 repetition a
#            round unless R is set) and print, per model and test, the median
#            of the K ratios with their range: on a VM whose speed drifts
#            from minute to minute (a shared host), one 3-run pass can swing
#            a ratio by 30%; the median of rounds taken the same minute
#            from both engines does not.
#   --avx2   Tessera at TESSERA_AVX_LEVEL=avx2, against the llama.cpp build
#            for AVX2 only (bench/README.md says how to make it; its
#            llama-bench is $LLAMA_BENCH_AVX2, default
#            ~/.cache/tessera-peer/build-avx2/bin/llama-bench).
# Models: the arguments, else SmolLM2-135M-Instruct Q4_1 and the TinyLlama
# shapes that bench/tinyllama.py writes into models/ (those present).
# TESSERA (default build/tessera) and LLAMA_BENCH (default: the bin directory
# ../shared/peer/build.sh prints, without building) pick the binaries.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peer=$root/../shared/peer
avx2=0 rounds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --avx2) avx2=1; shift ;;
    --rounds)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --rounds needs a positive count, not '${2:-}'" >&2; exit 1; }
      rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done

tessera=${TESSERA:-$root/build/tessera}
[ -x "$tessera" ] || { echo "compare.sh: $tessera is missing: build first (meson compile -C build)" >&2; exit 1; }

if [ $avx2 = 1 ]; then
  llama=${LLAMA_BENCH_AVX2:-$HOME/.cache/tessera-peer/build-avx2/bin/llama-bench}
  export TESSERA_AVX_LEVEL=avx2
else
  # build.sh prints its bin directory; it builds only when nothing is there,
  # so look for the binary first and never start a build from here
  dir=${TESSERA_PEER_DIR:-$HOME/.cache/tessera-peer}
  llama=${LLAMA_BENCH:-$dir/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-bench}
fi
[ -x "$llama" ] || { echo "compare.sh: llama-bench not found at $llama (see bench/README.md)" >&2; exit 1; }

models=("$@")
if [ ${#models[@]} = 0 ]; then
  for m in "$HOME/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
           "$root"/models/tinyllama-{Q4_0,Q8_0,Q4_K_M}.gguf; do
    [ -f "$m" ] && models+=("$m")
  done
fi
[ ${#models[@]} -gt 0 ] || { echo "compare.sh: no model given and none found" >&2; exit 1; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg), Tessera level ${TESSERA_AVX_LEVEL:-best}"
[ $rounds = 0 ] && exec "$peer/cmp_bench.sh" "$tessera" "$llama" "${models[@]}"

export R=${R:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for i in $(seq "$rounds"); do
  "$peer/cmp_bench.sh" "$tessera" "$llama" "${models[@]}" | sed "s/^/round $i: /" | tee -a "$log"
done
echo "# $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
python3 - "$log" <<'PY'
import re, statistics, sys
ratios = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+: (\S+)\s+pp: .*?×([0-9.]+) \| tg: .*?×([0-9.]+)", line)
    if m:
        r = ratios.setdefault(m.group(1), ([], []))
        r[0].append(float(m.group(2)))
        r[1].append(float(m.group(3)))
for model, (pp, tg) in ratios.items():
    print("%-34s pp ×%.2f median (%.2f-%.2f) | tg ×%.2f median (%.2f-%.2f), %d rounds"
          % (model, statistics.median(pp), min(pp), max(pp), statistics.median(tg), min(tg), max(tg), len(pp)))
PY
