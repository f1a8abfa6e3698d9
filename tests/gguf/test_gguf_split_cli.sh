#!/usr/bin/env bash
# `tessera gguf-split`: split stories260K in 3 (names, count), inspect and
# run the first file (every tensor, the same greedy text), --merge gives the
# original bytes back, --dry-run writes nothing, and bad flags or a missing
# shard are one error line each with llama-gguf-split's exit codes.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
shared=${TESSERA_SHARED:-}
if [ -z "$shared" ] || [ ! -f "$shared/models/stories260K.gguf" ]; then
  echo "skip: ${shared:-TESSERA_SHARED (unset)}/models/stories260K.gguf is missing"; exit 77
fi
model=$shared/models/stories260K.gguf
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-split-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$bin" gguf-split --help | grep -q -- "--split-max-tensors" || bad "--help lists no --split-max-tensors"
"$bin" gguf-split --split-max-tensors 16 "$model" "$tmp/s" >"$tmp/out" 2>"$tmp/err" || bad "split: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = "$(printf '%s\n' "$tmp"/s-0000{1,2,3}-of-00003.gguf)" ] || bad "split printed: $(cat "$tmp/out")"
for k in 1 2 3; do [ -f "$tmp/s-0000$k-of-00003.gguf" ] || bad "no file $k of 3"; done

"$bin" inspect "$tmp/s-00001-of-00003.gguf" >"$tmp/ins" 2>&1 || bad "inspect: $(cat "$tmp/ins")"
grep -q "s-00003-of-00003.gguf (shard 3 of 3)" "$tmp/ins" || bad "inspect does not list shard 3"
grep -q "^tensors      48 " "$tmp/ins" || bad "inspect: $(grep '^tensors' "$tmp/ins"), expected 48 tensors"

want=$("$bin" run -m "$model" -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
got=$("$bin" run -m "$tmp/s-00001-of-00003.gguf" -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
[ -n "$want" ] && [ "$got" = "$want" ] || bad "greedy text: '$got', expected '$want'"
got=$("$bin" run --no-mmap -m "$tmp/s-00001-of-00003.gguf" -p "Once upon a time" -n 24 --temp 0 2>/dev/null)
[ "$got" = "$want" ] || bad "greedy text with --no-mmap: '$got', expected '$want'"

"$bin" gguf-split --merge "$tmp/s-00001-of-00003.gguf" "$tmp/m.gguf" 2>"$tmp/err" || bad "merge: $(cat "$tmp/err")"
cmp -s "$tmp/m.gguf" "$model" || bad "merged file differs from the original"

"$bin" gguf-split --dry-run --split-max-size 300K "$model" "$tmp/d" >"$tmp/out" 2>&1 || bad "dry run failed"
grep -q "would write .*d-00001-of-0000" "$tmp/out" || bad "dry run printed: $(cat "$tmp/out")"
ls "$tmp"/d-* >/dev/null 2>&1 && bad "a dry run wrote files"

# expect CODE NEEDLE ARGS...: one error line naming NEEDLE, exit CODE
expect() {
  local want=$1 needle=$2; shift 2
  "$bin" gguf-split "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] || bad "$*: exit $rc, expected $want"
  [ "$(wc -l <"$tmp/err")" = 1 ] || bad "$*: expected one error line: $(cat "$tmp/err")"
  grep -qF -- "$needle" "$tmp/err" || bad "$*: error does not name '$needle': $(cat "$tmp/err")"
}
expect 2 "--split-max-size" --split-max-size 12X "$model" "$tmp/x"
expect 2 "--split-max-tensors" --split-max-tensors 0 "$model" "$tmp/x"
expect 2 "not both" --split --merge "$model" "$tmp/x"
expect 2 "IN and OUT" "$model"
expect 1 "nope.gguf" "$tmp/nope.gguf" "$tmp/x"
rm "$tmp/s-00002-of-00003.gguf"
expect 1 "s-00002-of-00003.gguf" --merge "$tmp/s-00001-of-00003.gguf" "$tmp/m2.gguf"
"$bin" run -m "$tmp/s-00001-of-00003.gguf" -p hi -n 1 >/dev/null 2>"$tmp/err" && bad "run with a shard missing succeeded"
grep -q "s-00002-of-00003.gguf" "$tmp/err" || bad "run's error does not name the missing shard: $(cat "$tmp/err")"
[ $fail = 0 ] && echo "ok: gguf-split CLI"
exit $fail
