#!/usr/bin/env bash
# tessera plugin check: usage, exit statuses and error messages.
#   0 all passed, 1 failures, 2 bad usage / not loadable, 77 no device
# usage: test_plugin_cli.sh BROKEN_PLUGIN   (TESSERA_BIN from the test env)
set -u
broken=$1
bin=${TESSERA_BIN:?TESSERA_BIN not set}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # want-status, description, args...
  local want=$1 what=$2; shift 2
  "$bin" plugin "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, want $want"; cat "$tmp/out" "$tmp/err"; fail=1
  else
    echo "ok   $what (exit $got)"
  fi
}

expect() {  # description, file, fixed string
  if ! grep -qF -- "$3" "$2"; then
    echo "FAIL: $1: '$3' not in:"; cat "$2"; fail=1
  fi
}

run 0 "--help" --help
expect "help" "$tmp/out" "usage: tessera plugin check PATH"
expect "help lists families" "$tmp/out" "FLASH_ATTN"
run 2 "no action"
run 2 "unknown action" frobnicate ref
expect "unknown action" "$tmp/err" "unknown action 'frobnicate'"
run 2 "no path" check
run 2 "missing file" check /nonexistent/libtessera-backend-x.so
expect "missing file named" "$tmp/err" "/nonexistent/libtessera-backend-x.so"
run 2 "not a library" check "$0"
expect "not a library named" "$tmp/err" "$0"
expect "not an ELF file" "$tmp/err" "not an ELF shared object"
run 2 "device out of range" check ref --device 5
expect "device range" "$tmp/err" "--device 5"
run 2 "bad device number" check ref --device x
run 2 "unknown op family" check ref --op NOPE
expect "unknown family" "$tmp/err" "unknown op family 'NOPE'"
run 2 "unknown option" check ref --frob
run 0 "ref, one family, case insensitive" check ref --op rms_norm --verbose
expect "verbose lines" "$tmp/out" "RMS_NORM [17, 3, 1, 1]"
expect "verbose seed" "$tmp/out" "(seed "
expect "summary" "$tmp/out" "summary: 18 cases: 18 passed, 0 failed, 0 unsupported (falls back)"
run 1 "broken plugin fails" check "$broken" --op MUL
expect "failure shown" "$tmp/out" "FAIL #0 MUL"
expect "re-run command" "$tmp/out" "re-run one case: tessera plugin check $broken --device 0 --op MUL --case 0"
run 1 "one case" check "$broken" --op MUL --case 0
expect "one case" "$tmp/out" "1 cases: "
run 2 "--case without --op" check "$broken" --case 3
BROKEN_PLUGIN_NO_DEVICE=1 run 77 "no device is a skip" check "$broken"
expect "skip reason" "$tmp/out" "skipped: plugin 'broken' reports no devices"

exit $fail
