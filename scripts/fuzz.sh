#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz) with clang and run each for a while.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default 60 s; all targets)
#   FUZZ_JOBS=N   targets run N at a time (default 2)
# The build goes to build-fuzz (CC=clang, -Dfuzz=true); each target's grown
# corpus stays in build-fuzz/fuzz-work/corpus-NAME between runs, findings go
# to build-fuzz/fuzz-work/crash-NAME-*. Add a finding to tests/fuzz/regress/
# NAME/ with its fix: the regular suite then runs it (fuzz_NAME tests).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
dir=build-fuzz
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (scripts/setup.sh installs it)"
  exit 1
fi
if [ ! -d "$dir" ]; then
  CC=clang meson setup "$dir" -Dfuzz=true -Dbuildtype=debugoptimized -Dwerror=false \
    -Dcpu_avx=disabled -Dcpu_neon=disabled -Dvulkan=disabled -Dopencl=disabled >/dev/null || exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(meson introspect "$dir" --targets | python3 -c \
    'import json,sys; print(" ".join(t["name"][5:] for t in json.load(sys.stdin) if t["name"].startswith("fuzz_") and not t["name"].endswith("_regress")))'))
fi
meson compile -C "$dir" "${targets[@]/#/fuzz_}" >/dev/null || { echo "fuzz: build failed"; exit 1; }
export TESSERA_SHARED=${TESSERA_SHARED:-$(cd .. && pwd)/shared}
jobs=${FUZZ_JOBS:-2} status=0 pids=()
for t in "${targets[@]}"; do
  tests/fuzz/run_fuzz.sh "$dir/tests/fuzz/fuzz_$t" "$t" "$dir/fuzz-work" "$seconds" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
