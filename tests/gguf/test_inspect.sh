#!/usr/bin/env bash
# `tessera inspect`: exit codes, one-line errors, text content, and --json
# that parses and agrees with the file.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
shared=${TESSERA_SHARED:-}
if [ -z "$shared" ] || [ ! -f "$shared/models/stories260K.gguf" ]; then
  echo "skip: ${shared:-TESSERA_SHARED (unset)}/models/stories260K.gguf is missing"; exit 77
fi
command -v python3 >/dev/null || { echo "skip: python3 not found"; exit 77; }
model=$shared/models/stories260K.gguf
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-inspect-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# expect CODE DESCRIPTION -- ARGS...: runs inspect, keeps stdout/stderr in $tmp
expect() {
  local want=$1 what=$2; shift 3
  "$bin" inspect "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] || bad "$what: exit $rc, expected $want ($(head -c 300 "$tmp/err"))"
}
one_error_line() {  # WHAT SUBSTRING
  local n; n=$(wc -l <"$tmp/err")
  [ "$n" = 1 ] || bad "$1: expected one error line, got $n: $(cat "$tmp/err")"
  grep -qF -- "$2" "$tmp/err" || bad "$1: error does not mention '$2': $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && bad "$1: printed to stdout on error"
  return 0
}

expect 0 "--help" -- --help
grep -q "usage: tessera inspect" "$tmp/out" || bad "--help prints no usage"
grep -q -- "--json" "$tmp/out" || bad "--help does not describe --json"
expect 2 "no file" --
one_error_line "no file" "no file"
expect 2 "unknown option" -- --frobnicate "$model"
one_error_line "unknown option" "--frobnicate"
expect 2 "two files" -- "$model" "$model"
one_error_line "two files" "more than one file"
expect 1 "missing file" -- "$tmp/nope.gguf"
one_error_line "missing file" "$tmp/nope.gguf"
printf 'hello, this is not a model\n' >"$tmp/text.gguf"
expect 1 "not gguf" -- "$tmp/text.gguf"
one_error_line "not gguf" "$tmp/text.gguf"
expect 1 "not gguf --json" -- --json "$tmp/text.gguf"
one_error_line "not gguf --json" "not a GGUF file"
head -c 5000 "$model" >"$tmp/cut.gguf"
expect 1 "truncated" -- "$tmp/cut.gguf"
one_error_line "truncated" "byte"

expect 0 "text" -- "$model"
for s in "version      3" "alignment    32" "tensors      48" "general.architecture" '"llama"' \
         "token_embd.weight" "[64, 512]" "array[string; 512]" "(504 more)" "1e-05"; do
  grep -qF -- "$s" "$tmp/out" || bad "text output lacks '$s'"
done
[ "$(grep -c '\.weight' "$tmp/out")" = 48 ] || bad "text output does not list 48 tensors"

expect 0 "json" -- "$model" --json
python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
def check(cond, msg):
    if not cond:
        print("FAIL: json:", msg); sys.exit(1)
check(d["version"] == 3 and d["alignment"] == 32, "header")
check(d["tensor_count"] == 48 == len(d["tensors"]), "tensor count")
check(d["kv_count"] == len(d["metadata"]), "kv count")
m = d["metadata"]
check(m["general.architecture"] == {"type": "string", "value": "llama"}, "architecture")
check(m["llama.block_count"]["value"] == 5, "block_count")
toks = m["tokenizer.ggml.tokens"]
check(toks["count"] == 512 and toks["truncated"] and toks["value"][:3] == ["<unk>", "<s>", "</s>"],
      "tokens summary")
t = {x["name"]: x for x in d["tensors"]}
check(t["token_embd.weight"]["shape"] == [64, 512] and t["token_embd.weight"]["type"] == "F32", "embd")
check(sum(x["bytes"] for x in d["tensors"]) == d["tensor_bytes"], "tensor bytes")
check(d["data_offset"] + max(x["offset"] + x["bytes"] for x in d["tensors"]) <= d["file_size"], "extent")
PY

# every shared file: --json parses and agrees on counts
for f in "$shared"/models/*.gguf "$shared"/vocab/*.gguf; do
  expect 0 "json $f" -- --json "$f"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); assert d["tensor_count"]==len(d["tensors"]) and d["kv_count"]==len(d["metadata"])' "$tmp/out" \
    || bad "--json of $f does not parse or disagrees"
done
if [ -f "$shared/vocab/ggml-vocab-gpt-2.gguf" ]; then
  expect 0 "json --full" -- --json --full "$shared/vocab/ggml-vocab-gpt-2.gguf"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); t=d["metadata"]["tokenizer.ggml.tokens"]; assert len(t["value"])==t["count"]==50257 and not t["truncated"]' "$tmp/out" \
    || bad "--json --full of the gpt-2 vocab does not hold all 50257 tokens"
fi

# hand-made file: long, odd and non-UTF-8 strings, nested arrays, NaN
python3 - "$tmp/odd.gguf" <<'PY'
import struct, sys
def s(b): return struct.pack('<Q', len(b)) + b
kvs = [
    s(b'long.str') + struct.pack('<I', 8) + s(b'x' * 300),
    s(b'odd.str') + struct.pack('<I', 8) + s(b'a"b\\c\n\x01\xff\xc3\xa9'),
    s(b'nested') + struct.pack('<IIQ', 9, 9, 2) + struct.pack('<IQII', 4, 2, 1, 2)
        + struct.pack('<IQ', 4, 0),
    s(b'f.nan') + struct.pack('<I', 6) + struct.pack('<f', float('nan')),
]
open(sys.argv[1], 'wb').write(b'GGUF' + struct.pack('<IQQ', 3, 0, len(kvs)) + b''.join(kvs))
PY
expect 0 "odd text" -- "$tmp/odd.gguf"
for s in "... (300 bytes)" '"a\"b\\c\n\x01\xff' "[[1, 2], []]" "array[array; 2]" " nan"; do
  grep -qF -- "$s" "$tmp/out" || bad "odd text output lacks '$s': $(cat "$tmp/out")"
done
expect 0 "odd json" -- --json "$tmp/odd.gguf"
python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))["metadata"]
ok = (m["long.str"]["truncated"] and m["long.str"]["length"] == 300
      and m["long.str"]["value"] == "x" * 96
      and m["odd.str"]["value"] == 'a"b\\c\n\x01\ufffd\u00e9'
      and m["nested"]["value"] == [[1, 2], []] and m["f.nan"]["value"] == "nan")
if not ok:
    print("FAIL: odd json:", m); sys.exit(1)
PY
expect 0 "odd json --full" -- --json --full "$tmp/odd.gguf"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metadata"]; assert m["long.str"]["value"]=="x"*300 and "truncated" not in m["long.str"]' "$tmp/out" \
  || bad "--full still shortens strings"

[ $fail = 0 ] && echo "tessera inspect: all checks passed"
exit $fail
