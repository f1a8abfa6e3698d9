#!/usr/bin/env bash
# tessera devices with the Vulkan plugin: the device is listed (GPU kind,
# memory, plugin file) and selectable by name; without a Vulkan loader the
# plugin is listed as rejected with the reason, and nothing crashes.
# Exit 77 when this machine has no Vulkan device.
set -u
bin=${TESSERA_BIN:?TESSERA_BIN not set}
build=${TESSERA_BUILD_ROOT:?TESSERA_BUILD_ROOT not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # description, file, fixed string
  if ! grep -qF -- "$3" "$2"; then
    echo "FAIL: $1: '$3' not in output:"; cat "$2"; fail=1
  fi
}

"$bin" devices --plugin-dir "$build" > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: exit status"; cat "$tmp/err"; exit 1; }
if ! grep -q "vulkan0" "$tmp/out"; then
  if grep -q "libtessera-backend-vulkan.so: rejected: no devices" "$tmp/out"; then
    grep "backend-vulkan" "$tmp/out"
    echo "skip: no Vulkan device on this machine"; exit 77
  fi
  echo "FAIL: vulkan0 not listed and no reason given:"; cat "$tmp/out"; exit 1
fi
cat "$tmp/out"
expect "kind" "$tmp/out" "vulkan0      GPU"
expect "plugin file" "$tmp/out" "plugin: vulkan 0.1.0, $build/libtessera-backend-vulkan.so"
expect "memory" "$tmp/out" "MiB total"
expect "host memory" "$tmp/out" "reads host memory: no"
expect "largest allocation" "$tmp/out" "largest allocation: "
if grep -q "CPU implementation" "$tmp/out"; then
  # lavapipe: named as such, and ranked below the CPU plugins
  grep -A1 "vulkan0" "$tmp/out" | grep -q "priority 10" || { echo "FAIL: lavapipe priority is not 10"; fail=1; }
fi

"$bin" devices --json --plugin-dir "$build" > "$tmp/json" || fail=1
python3 - "$tmp/json" <<'PY' || { echo "FAIL: --json"; cat "$tmp/json"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
dev = [x for x in d["devices"] if x["name"] == "vulkan0"]
assert dev, d["devices"]
assert dev[0]["kind"] == "GPU" and dev[0]["memory_total"] > 0 and not dev[0]["reads_host_memory"], dev
# ABI 1.1 limits: maxStorageBufferRange (at least 2^27 per the spec) and the
# offset alignment (a power of two, never below the host's 64)
a, m = dev[0]["buffer_alignment"], dev[0]["max_alloc_size"]
assert m >= 1 << 27 and a >= 64 and a & (a - 1) == 0, dev
PY

"$bin" devices --plugin-dir "$build" --device vulkan0 > "$tmp/sel" 2>&1 || { echo "FAIL: --device vulkan0"; cat "$tmp/sel"; fail=1; }

TESSERA_VULKAN_LOADER=libtessera-no-such-loader.so.1 "$bin" devices --plugin-dir "$build" > "$tmp/none" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: devices without a loader exited $rc"; fail=1; }
expect "no loader" "$tmp/none" "libtessera-backend-vulkan.so: rejected: no devices: no Vulkan loader: cannot open libtessera-no-such-loader.so.1"
if grep -q "vulkan0" "$tmp/none"; then echo "FAIL: vulkan0 listed without a loader"; fail=1; fi

[ $fail -eq 0 ] && echo "vulkan devices: all checks passed"
exit $fail
