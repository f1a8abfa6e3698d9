#!/usr/bin/env bash
# Run one libFuzzer target for a while on its corpus.
#   run_fuzz.sh FUZZER NAME WORKDIR [SECONDS]   (default: $TESSERA_FUZZ_SECONDS, else 60)
# The committed seeds (tests/fuzz/corpus/NAME) and past findings
# (regress/NAME) are read; new inputs go to WORKDIR/corpus-NAME (kept
# between runs), a crash to WORKDIR/crash-NAME-*. Prints libFuzzer's final
# stats (execs/s, coverage); exits non-zero on a finding.
set -uo pipefail
fuzzer=$1 name=$2 work=$3 seconds=${4:-${TESSERA_FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus-$name"
seeds=("$here/corpus/$name")
[ -d "$here/regress/$name" ] && seeds+=("$here/regress/$name")
dict=()
[ -f "$here/$name.dict" ] && dict=(-dict="$here/$name.dict")
log="$work/$name.log"
# rss/malloc limits: a hostile length must be refused, not allocated.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -print_final_stats=1 -artifact_prefix="$work/crash-$name-" "${dict[@]}" \
  "$work/corpus-$name" "${seeds[@]}" >"$log" 2>&1
rc=$?
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
speed=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}')
echo "fuzz $name: ${seconds}s, ${execs:-?} runs, ${speed:-?} exec/s; ${done_line:-no DONE line}"
if [ $rc -ne 0 ]; then
  echo "fuzz $name: FINDING (exit $rc); the input is in $work/crash-$name-*; log $log:"
  grep -E 'ERROR|SUMMARY|runtime error|abort|fuzz_' "$log" | head -20
  exit 1
fi
