#!/usr/bin/env python3
"""The cpu-avx plugin's decode dots and float GEMM keep their software
prefetches, at every level.

gcc treats a function whose only effect is __builtin_prefetch as having no
side effects: where such a wrapper was not inlined early, its calls were
deleted as dead code. That silently took the prefetch out of the AVX2 Q4_0
and Q8_0 dots (tg128 of the 1.1B Q4_0/Q8_0 models about 10% slower) and out
of the float GEMM for several sessions, with every output still correct.
So this reads the built plugin's machine code (objdump -d) and asserts that
every copy (one per level: avx2, avx-vnni, avx512, avx512-vnni) of each
function below holds at least one prefetch instruction.

Usage: prefetch_kept.py PLUGIN.so
"""
import re
import shutil
import subprocess
import sys

# the functions that stream weights and prefetch ahead of the hardware
# prefetcher: the decode dots (kernels_impl.h: prefetch_row_ahead, and the
# float dots' own), the K-quant single-column dots (gemv_kq_impl.h) and the
# float GEMM's next-block prefetch (gemm_float_impl.h: gf_prefetch_part),
# and the AVX-512 K-quant decode kernels, one row and many (two copies each)
MUST_PREFETCH = [
    "dot_q4_0_pair", "dot_q8_0_pair", "dot_q4_1_v", "dot_q4_1_y", "dot_q5_1_v",
    "dot_f16_v", "dot_bf16_v", "dot_q4_k_y", "dot_q6_k_y", "gf_run_f16", "gf_run_bf16",
    "dot_q4_k_512", "dot_q6_k_512", "dotr_q4_k_512", "dotr_q6_k_512", "dotx_q4_k",
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: prefetch_kept.py PLUGIN.so")
    objdump = shutil.which("objdump")
    if not objdump:
        print("skipped: objdump (binutils) is not installed")
        sys.exit(77)
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", sys.argv[1]], check=True,
                          capture_output=True, text=True).stdout
    copies = {}  # name -> [prefetch count of each copy]
    name = None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            name = m.group(1)
            copies.setdefault(name, []).append(0)
        elif name and "prefetch" in line:
            copies[name][-1] += 1
    failed = []
    for fn in MUST_PREFETCH:
        counts = copies.get(fn)
        if not counts:
            failed.append(f"{fn}: not in {sys.argv[1]} (renamed? update MUST_PREFETCH)")
        elif min(counts) == 0:
            failed.append(f"{fn}: {counts.count(0)} of its {len(counts)} copies have no prefetch instruction")
        else:
            print(f"ok: {fn}: {len(counts)} copies, prefetches per copy {counts}")
    for f in failed:
        print("FAIL:", f)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
