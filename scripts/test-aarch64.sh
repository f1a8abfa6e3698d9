#!/usr/bin/env bash
# Cross-build Tessera for aarch64 Linux and run its tests under qemu-user
# (cross/aarch64-linux-gnu.ini: qemu-aarch64 -cpu max, so the cpu-neon
# plugin's three kernel levels all run, each forced by TESSERA_NEON_LEVEL).
# The last line printed is
#   N passed, N failed, N skipped
# Usage: scripts/test-aarch64.sh [--ci] [build-dir] [extra meson test options...]
#   --ci   only the representative subset (meson suite 'aarch64-ci': core
#          unit tests, cpu-neon op conformance at every level, the
#          stories260K and synth-s goldens); sized for .ci/run
#   default: every test except the 'slow' suite
# Tests run one at a time per core; qemu is ~10-50x slower than native.
set -uo pipefail
cd "$(dirname "$0")/.."

suite_args=(--no-suite slow)
if [ "${1:-}" = "--ci" ]; then
  suite_args=(--suite aarch64-ci)
  shift
fi
build=${1:-build-aarch64}
shift || true

scripts/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

cross=cross/aarch64-linux-gnu.ini
if [ -d "$build" ]; then
  meson setup --reconfigure "$build" --cross-file "$cross" >/dev/null
else
  meson setup "$build" --cross-file "$cross" >/dev/null
fi || { echo "test-aarch64: meson setup failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

status=0
rm -f "$build/meson-logs/testlog.json"
if meson compile -C "$build"; then
  # meson wraps each test program in qemu (the cross file's exe_wrapper);
  # scripts that start tessera themselves get cross/exe-wrapper.sh as
  # TESSERA_BIN (tests/meson.build).
  meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" \
      --timeout-multiplier 3 "${suite_args[@]}" "$@" || true
else
  status=1
fi
python3 scripts/test_summary.py "$build/meson-logs/testlog.json" || status=1
exit $status
