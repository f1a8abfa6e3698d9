#!/usr/bin/env bash
# A glslc that compiles every Vulkan shader variant (cooperative matrices,
# NV cooperative matrix 2, integer dot products) for machines whose own is
# too old: Debian 12's glslc (shaderc 2023.2) has none of them. Debian 13's
# glslc and the libraries it needs are downloaded as packages with apt-get
# (a private package list; nothing is installed system-wide), unpacked into
# a private prefix and run through a wrapper script:
#     ${TESSERA_GLSLC_DIR:-~/.cache/tessera-glslc}/glslc
# which the build uses when it runs (backends/vulkan/meson.build; -Dglslc=
# overrides). Idempotent. Never fatal: without network or apt-get it says
# why and exits 0, and the build uses the system glslc.
# usage: setup-glslc.sh [--force]
set -uo pipefail
dir=${TESSERA_GLSLC_DIR:-$HOME/.cache/tessera-glslc}
say() { echo "setup-glslc: $*"; }

probe() { # does the wrapper compile a cooperative-matrix shader?
  "$dir/glslc" --target-env=vulkan1.3 -o /dev/null \
    "$(dirname "$0")/../backends/vulkan/shaders/probe/coopmat.comp" >/dev/null 2>&1
}

if [ "${1:-}" != "--force" ] && [ -x "$dir/glslc" ] && probe; then
  say "present: $dir/glslc ($("$dir/glslc" --version 2>/dev/null | head -1))"
  exit 0
fi
if [ "$(dpkg --print-architecture 2>/dev/null)" != amd64 ]; then
  say "only set up on amd64 hosts; the build uses the system glslc"
  exit 0
fi
command -v apt-get >/dev/null && command -v dpkg >/dev/null || { say "no apt-get/dpkg; the build uses the system glslc"; exit 0; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  > "$work/sources.list"
o=(-oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
   -oDir::State::Lists="$work/lists" -oDir::Cache::archives="$work/debs"
   -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDebug::NoLocking=1)
# (apt-get update can exit 0 having fetched nothing: look for the list)
if ! timeout 600 apt-get "${o[@]}" update -q >"$work/log" 2>&1 || ! ls "$work"/lists/*_Packages* >/dev/null 2>&1; then
  say "could not read Debian 13's package list (offline?); the build uses the system glslc"
  tail -2 "$work/log" | sed 's/^/  /'
  exit 0
fi
if ! (cd "$work/debs" && timeout 600 apt-get "${o[@]}" download glslc libshaderc1 libc6 libgcc-s1 libstdc++6 \
      >>"$work/log" 2>&1); then
  say "could not download Debian 13's glslc; the build uses the system glslc"
  tail -2 "$work/log" | sed 's/^/  /'
  exit 0
fi
for f in "$work"/debs/*.deb; do dpkg -x "$f" "$work/root" || { say "cannot unpack $f"; exit 0; }; done
# Replace the prefix only once the new one is complete.
rm -rf "$dir.new" && mkdir -p "$dir.new" && cp -a "$work/root" "$dir.new/root" || { say "cannot write $dir.new"; exit 0; }
printf '#!/bin/sh\n# Debian 13 glslc with its own libraries (scripts/setup-glslc.sh)\nR=%s/root/usr/lib/x86_64-linux-gnu\nexec "$R/ld-linux-x86-64.so.2" --library-path "$R" %s/root/usr/bin/glslc "$@"\n' \
  "$dir" "$dir" > "$dir.new/glslc"
chmod +x "$dir.new/glslc"
rm -rf "$dir" && mv "$dir.new" "$dir"
if probe; then
  say "installed $dir/glslc ($("$dir/glslc" --version | head -1)); reconfigure the build to use it"
else
  say "$dir/glslc does not compile cooperative matrices; removed, the build uses the system glslc"
  rm -rf "$dir"
fi
exit 0
