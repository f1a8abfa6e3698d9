#!/usr/bin/env python3
"""Count meson test results from testlog.json files; print the summary line.

Exit status is non-zero when a test failed or a log is missing (a build that
failed before any test ran counts as one failure)."""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except OSError:
        print(f"test_summary: {path}: no test log (build failed?)")
        failed += 1
        continue
    for t in lines:
        result = t.get("result", "")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
            print(f"skipped: {t.get('name')}")
        else:
            failed += 1
            print(f"FAILED: {t.get('name')} ({result})")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
