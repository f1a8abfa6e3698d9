#!/usr/bin/env bash
# Install the Debian 12 packages Tessera builds, tests and runs with.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config python3
  libpcre2-dev libutf8proc-dev libcjson-dev libcmocka-dev libedit-dev
  libmicrohttpd-dev
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
