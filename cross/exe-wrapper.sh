#!/bin/sh
# Stand-in for the tessera binary in cross builds: tests/meson.build points
# TESSERA_BIN here when the cross file sets tessera_exe_wrapper, so test
# scripts (and test programs, which run under qemu themselves and cannot
# exec a foreign binary) start the real one through the emulator.
#   TESSERA_EXE_WRAPPER  e.g. "qemu-aarch64 -cpu max"
#   TESSERA_REAL_BIN     the cross-built tessera
# shellcheck disable=SC2086  # the wrapper is a command line: split it
exec ${TESSERA_EXE_WRAPPER:?TESSERA_EXE_WRAPPER not set} "${TESSERA_REAL_BIN:?TESSERA_REAL_BIN not set}" "$@"
