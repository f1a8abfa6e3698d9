#!/usr/bin/env bash
# tessera devices: lists devices and rejected plugins with their reasons;
# --json is valid JSON; an unknown --device name lists the available ones.
# usage: test_devices_cli.sh PLUGIN_DIR   (TESSERA_BIN from the test env)
set -u
dir=$1
bin=${TESSERA_BIN:?TESSERA_BIN not set}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "not a library" > "$tmp/libtessera-backend-bogus.so"

expect() {  # description, file, fixed string
  if ! grep -qF -- "$3" "$2"; then
    echo "FAIL: $1: '$3' not in output:"; cat "$2"; fail=1
  fi
}

"$bin" devices --help > "$tmp/help" || { echo "FAIL: --help exit status"; fail=1; }
expect "help" "$tmp/help" "usage: tessera devices"

if ! "$bin" devices --plugin-dir "$dir" --plugin-dir "$tmp" > "$tmp/out" 2> "$tmp/err"; then
  echo "FAIL: tessera devices exited non-zero"; cat "$tmp/err"; fail=1
fi
expect "test device" "$tmp/out" "testdev0"
expect "ref device" "$tmp/out" "ref"
expect "ABI" "$tmp/out" "libtessera-backend-testabi.so: rejected: ABI 2.0, host speaks 1.x"
expect "init" "$tmp/out" "libtessera-backend-testfail.so: rejected: init failed"
expect "bogus" "$tmp/out" "libtessera-backend-bogus.so: rejected: not a loadable library"
expect "superseded" "$tmp/out" "libtessera-backend-testdev-old.so: superseded: superseded by"
expect "memory" "$tmp/out" "1024 MiB total"
# ABI 1.1 memory limits: testnew reports them, the 1.0 testdev cannot
expect "max alloc (1.1)" "$tmp/out" "largest allocation: 4096 bytes; tensor alignment: 128 bytes"
expect "max alloc (1.0)" "$tmp/out" "largest allocation: no limit reported; tensor alignment: 256 bytes"

"$bin" devices --json --plugin-dir "$dir" --plugin-dir "$tmp" > "$tmp/json" || fail=1
if ! python3 - "$tmp/json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [x["name"] for x in d["devices"]]
assert "testdev0" in names and names[-1] == "ref", names
states = {p["path"].rsplit("/", 1)[-1]: (p["state"], p["reason"]) for p in d["plugins"]}
assert states["libtessera-backend-testabi.so"][0] == "rejected", states
assert "ABI 2.0" in states["libtessera-backend-testabi.so"][1], states
assert states["libtessera-backend-testdev.so"][0] == "loaded", states
dev = {x["name"]: x for x in d["devices"]}
assert (dev["testnew0"]["max_alloc_size"], dev["testnew0"]["buffer_alignment"]) == (4096, 128), dev["testnew0"]
assert (dev["testdev0"]["max_alloc_size"], dev["testdev0"]["buffer_alignment"]) == (0, 256), dev["testdev0"]
PY
then echo "FAIL: --json"; cat "$tmp/json"; fail=1; fi

# A plugin built for another machine is named with its architecture.
# The host is what tessera runs as (under qemu in a cross build, not uname):
# the e_machine field of its ELF header.
host_machine=$(python3 -c 'import struct,sys; print(struct.unpack("<H", open(sys.argv[1],"rb").read(20)[18:20])[0])' \
  "${TESSERA_REAL_BIN:-$bin}")
case "$host_machine" in
  62) foreign=183; foreign_name=aarch64 ;;  # x86-64 host: an EM_AARCH64 file
  *) foreign=62; foreign_name=x86-64 ;;     # otherwise: an EM_X86_64 file
esac
mkdir "$tmp/foreign"
python3 - "$tmp/foreign/libtessera-backend-alien.so" "$foreign" <<'PY'
import struct, sys
# ELF64 little-endian shared object header for machine argv[2]; the rest zero
h = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHI", 3, int(sys.argv[2]), 1)
open(sys.argv[1], "wb").write(h + bytes(64 - len(h)))
PY
"$bin" devices --plugin-dir "$tmp/foreign" > "$tmp/out" 2>&1 || fail=1
expect "foreign architecture" "$tmp/out" "libtessera-backend-alien.so: rejected: not a loadable library: built for $foreign_name (64-bit), this host is"

# A plugin that crashes is named, in discovery and in supports_op.
TESTDEV_CRASH=device_count "$bin" devices --plugin-dir "$dir" > "$tmp/out" 2> "$tmp/err"
status=$?
[ "$status" -ne 0 ] || { echo "FAIL: crash in device_count: exit 0"; fail=1; }
expect "crash in device_count named" "$tmp/err" "plugin 'testcrash' ($dir/libtessera-backend-testcrash.so) crashed with signal 11 (SIGSEGV) in device_count"
model=${TESSERA_SHARED:-../shared}/models/stories260K.gguf
if [ -f "$model" ]; then
  TESTDEV_CRASH=supports_op "$bin" run -m "$model" -p hi -n 1 --plugin-dir "$dir" --device testcrash0 > "$tmp/out" 2> "$tmp/err"
  status=$?
  [ "$status" -ne 0 ] || { echo "FAIL: crash in supports_op: exit 0"; fail=1; }
  expect "crash in supports_op named" "$tmp/err" "crashed with signal 11 (SIGSEGV) in supports_op on testcrash0 (node '"
fi

# TESSERA_PLUGIN_PATH is searched too (colon-separated).
TESSERA_PLUGIN_PATH="/nonexistent:$dir" "$bin" devices > "$tmp/env" 2>&1 || fail=1
expect "TESSERA_PLUGIN_PATH" "$tmp/env" "testdev0"

if "$bin" devices --plugin-dir "$dir" --device testdev0,nosuch > "$tmp/out" 2> "$tmp/err"; then
  echo "FAIL: unknown --device accepted"; fail=1
fi
expect "unknown device" "$tmp/err" "unknown device 'nosuch' (available: "
expect "lists testdev0" "$tmp/err" "testdev0"

"$bin" devices --plugin-dir "$dir" --device ref,testdev0 > "$tmp/out" || fail=1
if [ "$(grep -cE '^  [0-9]+  ' "$tmp/out")" != 2 ]; then
  echo "FAIL: --device ref,testdev0 should list 2 devices"; cat "$tmp/out"; fail=1
fi

[ $fail = 0 ] && echo "tessera devices: all checks passed"
exit $fail
