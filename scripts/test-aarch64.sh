#!/usr/bin/env bash
# Cross-build Tessera for aarch64 Linux and run its tests under qemu-user
# (cross/aarch64-linux-gnu.ini: qemu-aarch64 -cpu max, so the cpu-neon
# plugin's three kernel levels all run, each forced by TESSERA_NEON_LEVEL).
# The last line printed is
#   N passed, N failed, N skipped
# Usage: scripts/test-aarch64.sh [--ci] [build-dir] [extra meson test options...]
#        scripts/test-aarch64.sh --help   (this text)
#   --ci   only the representative subset (ci_tests below plus the meson
#          suite 'aarch64-ci' of tests/cpu-neon, tests/model and tests/mtmd:
#          core unit tests, op conformance of cpu-neon at every level, the
#          stories260K and synth-s goldens, issue 43's expert products
#          (qwen3moe Q4_K_M and gpt-oss MXFP4 at each level, qwen3next and
#          qwen35moe at i8mm), the image encoders' rows on cpu-neon against
#          libmtmd's); sized for .ci/run
#   default: every test except the 'slow' suite (the architectures'
#          goldens on cpu-neon0 at each level among them)
# Tests run one at a time per core; qemu is ~10-50x slower than native.
set -uo pipefail
cd "$(dirname "$0")/.."

# The --ci subset, ~7 minutes of tests under qemu on 2 cores (plus the
# build): the core's fast unit tests, op conformance of ref and of cpu-neon
# at every level (tests/cpu-neon's cpu_neon_check_<level>; the unforced
# conformance-cpu-neon repeats the best level's, and
# conformance_detects_bugs, 6 minutes under qemu, tests the harness, which
# no architecture changes: both run in the default list), tessera devices,
# and model goldens (stories260K strict and
# synth-s F32/F16/BF16 and four quantized types on ref and cpu-neon at its
# best level, plus the level-forced goldens of tests/cpu-neon), and
# clip_cpu-neon0 (tests/mtmd, ~30 s: every image pair's rows on cpu-neon).
# The default run adds the rest of tests/mtmd: clip and mtmd_api on ref and
# cpu-neon, clip_audio_cpu-neon0 and clip_audio_voxtral_cpu-neon0 (the two
# audio families, ~3 min each); clip_audio itself (a 31 s sound on both
# devices) is in 'slow' under qemu. They need scripts/setup.sh's
# arm64 libpng and libsndfile, without which they skip.
ci_tests=(
  gguf_roundtrip gguf_shared gguf_corrupt quant_roundtrip vec_dot quant_policy fp16_bf16
  graph_build graph_alloc host_sched ref_ops sample chat
  vocab_vectors vocab_load vocab_goldens model-load model-api devices_cli
  conformance-ref
  golden-stories260K golden-synth-s-f32 golden-synth-s-F16 golden-synth-s-BF16
  golden-synth-s-Q4_0 golden-synth-s-Q8_0 golden-synth-s-Q6_K golden-synth-s-Q4_K_M-mix
)
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
fi
suite_args=(--no-suite slow)
if [ "${1:-}" = "--ci" ]; then
  suite_args=()
  ci=1
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
  names=()
  if [ "${ci:-0}" = 1 ]; then
    # plus every test of the aarch64-ci suite (tests/cpu-neon)
    mapfile -t ours < <(meson test -C "$build" --list --suite aarch64-ci 2>/dev/null | sed -n 's|^.* / ||p')
    names=("${ci_tests[@]}" "${ours[@]}")
  fi
  meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" \
      --timeout-multiplier 3 "${suite_args[@]}" "$@" "${names[@]}" || true
else
  status=1
fi
python3 scripts/test_summary.py "$build/meson-logs/testlog.json" || status=1
exit $status
