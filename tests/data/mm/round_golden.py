#!/usr/bin/env python3
"""round_golden.py IN.json OUT.json [ROWS] — a smaller copy of an mtmd_ref
golden: floats to 6 significant digits, and with ROWS only the first ROWS
embedding rows of each media chunk (n_tokens still says how many it has)."""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    j = json.load(open(sys.argv[1]))
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else None
    n = j["n_embd"]
    for c in j["chunks"]:
        if "embd" in c:
            e = c["embd"] if rows is None else c["embd"][: rows * n]
            c["embd"] = [float("%.6g" % v) for v in e]
    if "logits0" in j:
        j["logits0"] = [float("%.6g" % v) for v in j["logits0"]]
    with open(sys.argv[2], "w") as f:
        json.dump(j, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
