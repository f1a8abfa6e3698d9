#!/usr/bin/env bash
# Set up, build and run the whole test suite; the last line printed is
#   N passed, N failed, N skipped
# Usage: scripts/test.sh [build-dir] [extra meson setup options...]
#   TESSERA_SANITIZE=1   also build and run the suite with ASan+UBSan: less 'slow'
#                        and most GPU tests (scripts/select_tests.py sanitize)
#   TESSERA_AARCH64=1    also cross-build for aarch64 and run the representative
#                        subset under qemu (scripts/test-aarch64.sh --ci)
#   TESSERA_FUZZ=1       also build the libFuzzer targets with clang and run each
#                        for TESSERA_FUZZ_SECONDS (60), two at a time (suite 'fuzz')
#   TESSERA_REPOSITORY=0 skip the second pass that runs where ../shared exists:
#                        the fast CPU tests of suites unit, model and cli on the
#                        repository's own reference files (meson test --setup
#                        repository: tests/data as the build lays it out), as a
#                        clone with nothing beside it runs them
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

scripts/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# Each pass's wall time, for CI's budget (about 45 minutes on 2 cores)
t0=$SECONDS
took() { echo "test.sh: $1 took $((SECONDS - t0)) s"; t0=$SECONDS; }
took setup

configure() {  # dir, options...
  local dir=$1; shift
  if [ -d "$dir" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
  else meson setup "$dir" "$@" >/dev/null; fi
}

run_suite() {  # dir, meson test options...
  local dir=$1; shift
  meson compile -C "$dir" || return 1
  meson test -C "$dir" --print-errorlogs --num-processes "$(nproc)" "$@"
  return 0
}

status=0
configure "$build" "$@" && run_suite "$build" || status=1
logs=("$build/meson-logs/testlog.json")
took "build and suite"

# Without ../shared the pass above already ran on the repository's files.
if [ "${TESSERA_REPOSITORY:-1}" = "1" ] && [ -d ../shared ] && [ -f "$build/build.ninja" ]; then
  # Which tests: scripts/select_tests.py says (the CPU tests of suites
  # unit and model that read reference files).
  repo_tests=$(meson introspect "$build" --tests | python3 scripts/select_tests.py repository)
  # shellcheck disable=SC2086
  meson test -C "$build" --no-rebuild --setup repository --logbase repository --print-errorlogs \
    --num-processes "$(nproc)" $repo_tests
  logs+=("$build/meson-logs/repository-repository.json")
  took "repository pass"
fi

if [ "${TESSERA_SANITIZE:-0}" = "1" ]; then
  configure "$build-sanitize" -Dsanitize=true -Dbuildtype=debugoptimized "$@" &&
    san_tests=$(meson introspect "$build-sanitize" --tests | python3 scripts/select_tests.py sanitize) &&
    # shellcheck disable=SC2086
    run_suite "$build-sanitize" $san_tests || status=1
  logs+=("$build-sanitize/meson-logs/testlog.json")
  took "sanitizer pass"
fi

if [ "${TESSERA_AARCH64:-0}" = "1" ]; then
  scripts/test-aarch64.sh --ci "$build-aarch64" || status=1
  logs+=("$build-aarch64/meson-logs/testlog.json")
  took "aarch64 pass"
fi

if [ "${TESSERA_FUZZ:-0}" = "1" ]; then
  if command -v clang >/dev/null; then
    fz="$build-fuzz"
    CC=clang configure "$fz" -Dfuzz=true -Dbuildtype=debugoptimized -Dwerror=false \
      -Dcpu_avx=disabled -Dcpu_neon=disabled -Dvulkan=disabled -Dopencl=disabled &&
      # test-data-copy: the reference files the targets read without ../shared
      meson compile -C "$fz" test-data-copy $(meson introspect "$fz" --tests | python3 -c \
        'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin) if any(s.split(":")[-1] == "fuzz" for s in t["suite"])))') &&
      meson test -C "$fz" --no-rebuild --print-errorlogs --num-processes 2 --suite fuzz || status=1
    logs+=("$fz/meson-logs/testlog.json")
    took "fuzz pass"
  else
    echo "fuzz: clang missing, fuzz targets not run"
  fi
fi

python3 scripts/test_summary.py "${logs[@]}" || status=1
exit $status
