#!/usr/bin/env bash
# bench/mtmd.sh [--rounds K] [-t THREADS] [MODEL MMPROJ IMAGE [TEMPLATE]]... —
# the image encoder's time, Tessera and llama.cpp side by side: each round
# runs `tessera bench --mmproj --no-warmup -r 1` and `llama-mtmd-cli`
# ("mtmd batch encoding done in N ms"), each a fresh process encoding the
# image once (so both figures include the first encode's set-up; loading is
# not timed), on the same pair and image, and prints per
# pair the median encode ms of each engine over the rounds with their range
# and the ratio llama.cpp / Tessera (above 1: Tessera faster).
# Default pairs: the synthetic ones the build makes in build/tests/mtmd, a
# row per family: LLaVA on sq56.png, Gemma 3 on sq224.png, SmolVLM
# (idefics3) on wide300.png (7 tiles: both engines' figures are the sum
# over the tiles), Qwen2.5-VL and Qwen2-VL on sq224.png, Ultravox and
# Voxtral on a 3 s sound (tests/data/mm/make_wav.py, as the goldens), and
# any other NAME / mmproj-NAME pair there with a tests/data/mm medium named
# in PAIRS_EXTRA ("NAME:MEDIUM:TEMPLATE ..."). A medium ending in .wav
# goes in with --audio. Only meaningful on an idle machine: print the load
# average beside the figures. TESSERA and MTMD_CLI pick the binaries.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "mtmd.sh: --rounds needs a positive count" >&2; exit 1; }
              rounds=$2; shift 2 ;;
    -t) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "mtmd.sh: -t needs a thread count" >&2; exit 1; }
        threads=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
tessera=${TESSERA:-$root/build/tessera}
cli=${MTMD_CLI:-$HOME/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-mtmd-cli}
[ -x "$tessera" ] || { echo "mtmd.sh: $tessera is missing: build first" >&2; exit 1; }
[ -x "$cli" ] || { echo "mtmd.sh: $cli is missing (../shared/peer/build-more.sh llama-mtmd-cli)" >&2; exit 1; }

mm=$root/build/tests/mtmd data=$root/tests/data/mm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pairs=()
if [ $# -gt 0 ]; then
  while [ $# -ge 3 ]; do
    pairs+=("$1|$2|$3|$([ $# -ge 4 ] && [[ "$4" != *.gguf ]] && echo "$4")")
    shift 3; [ $# -gt 0 ] && [[ "$1" != *.gguf ]] && shift
  done
else
  python3 "$data/make_wav.py" "$tmp/tones3.wav" 3
  pairs+=("$mm/synth-llava-f32.gguf|$mm/mmproj-synth-llava-f32.gguf|$data/sq56.png|vicuna")
  pairs+=("$mm/synth-gemma3-f32.gguf|$mm/mmproj-synth-gemma3-f32.gguf|$data/sq224.png|gemma")
  pairs+=("$mm/synth-idefics3-f32.gguf|$mm/mmproj-synth-idefics3-f32.gguf|$data/wide300.png|chatml")
  pairs+=("$mm/synth-qwen2vl-f32.gguf|$mm/mmproj-synth-qwen2vl-f32.gguf|$data/sq224.png|chatml")
  pairs+=("$mm/synth-qwen2vl-f32.gguf|$mm/mmproj-synth-qwen2vl1-f32.gguf|$data/sq224.png|chatml")
  pairs+=("$mm/synth-ultravox-f32.gguf|$mm/mmproj-synth-ultravox-f32.gguf|$tmp/tones3.wav|vicuna")
  pairs+=("$mm/synth-voxtral-f32.gguf|$mm/mmproj-synth-voxtral-f32.gguf|$tmp/tones3.wav|vicuna")
  for extra in ${PAIRS_EXTRA:-}; do  # NAME:MEDIUM:TEMPLATE
    IFS=: read -r name img tmpl <<<"$extra"
    pairs+=("$mm/$name.gguf|$mm/mmproj-$name.gguf|$data/$img|$tmpl")
  done
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| mmproj | medium | threads | Tessera ms (median, range) | llama.cpp ms (median, range) | llama.cpp / Tessera |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for p in "${pairs[@]}"; do
  IFS='|' read -r model proj img tmpl <<<"$p"
  flag=--image
  [[ "$img" == *.wav ]] && flag=--audio
  ours=() theirs=()
  for ((k = 0; k < rounds; k++)); do
    ours+=("$("$tessera" bench -m "$model" --mmproj "$proj" "$flag" "$img" -p 0 -n 0 -r 1 --no-warmup -t "$threads" -o json \
             | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ms"])')")
    # one line per media chunk (SmolVLM's tiles): their sum
    theirs+=("$("$cli" -m "$model" --mmproj "$proj" "$flag" "$img" -p hi -n 1 -t "$threads" --temp 0 \
               ${tmpl:+--chat-template "$tmpl"} 2>&1 | sed -n 's/.*encoding done in \([0-9.]*\) ms.*/\1/p' \
               | awk '{ s += $1; n++ } END { if (n) print s }')")
  done
  python3 - "$(basename "$proj")" "$(basename "$img")" "$threads" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
name, img, th, ours, theirs = sys.argv[1:6]
o = [float(x) for x in ours.split()]
t = [float(x) for x in theirs.split() if x]
if not t:
    sys.exit(f"mtmd.sh: llama-mtmd-cli printed no encode time for {name}")
mo, mt = statistics.median(o), statistics.median(t)
print(f"| {name} | {img} | {th} | {mo:.2f} ({min(o):.2f}-{max(o):.2f}) | {mt:.2f} ({min(t):.2f}-{max(t):.2f}) "
      f"| {mt / mo:.2f} |")
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
