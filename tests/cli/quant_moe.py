"""tessera quantize's mixtures on mixture-of-experts, hybrid and fused-QKV
models against llama-quantize (skipped when the peer's llama-quantize is
not built):

- per-tensor types: for one model per family made here by tessera-synth
  (8 layers, so the first-eighth and use_more_bits rules show; rows of
  256, so no fallback hides a rule), every mixture llama-quantize names,
  with a synthetic importance matrix and (for the mixtures whose rules
  depend on having one) without: `tessera quantize --dry-run` names the
  type `llama-quantize --dry-run` does for every tensor;
- whole files: the build's small synthetic MoE and hybrid models (rows of
  48-128, so the fallback table is in play), quantized by both tools with
  the same matrix, byte-identical (metadata included), every mixture on
  the hybrid qwen35moe and a few on each other family;
- --dry-run writes nothing, its types are the ones the real run writes,
  and bad arguments are one clear error.

docs/quantize.md lists the rules these models show."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import STORIES, Checker, run, test_data  # noqa: E402
from quant_files import compare_files, quantize_tools, read_tensors, write_synthetic_imatrix  # noqa: E402

# every mixture llama-quantize names that Tessera produces
MIXES = ["Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
         "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS",
         "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0"]
# their rules differ without a matrix (and they run without one)
NO_MATRIX = ["IQ4_NL", "IQ4_XS", "IQ3_XXS", "Q4_0", "Q5_0", "Q4_K_M"]
NEEDS_MATRIX = {"Q2_K_S", "IQ3_XXS", "IQ3_XS", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS"}

ATTN = ["--dim", "256", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--ctx", "256", "--layers", "8"]
HYBRID = ["--rope-dims", "32", "--ssm-groups", "2", "--ssm-state", "64", "--ssm-head-dim", "64",
          "--attn-every", "4"]
# one model a family: (name, tessera-synth options, extra quantize flags)
FAMILIES = [
    ("qwen3moe-8", ["--arch", "qwen3moe"] + ATTN + ["--ffn", "512", "--expert-ffn", "256", "--experts", "8"], []),
    ("qwen3moe-4", ["--arch", "qwen3moe"] + ATTN + ["--ffn", "512", "--expert-ffn", "256", "--experts", "4"], []),
    ("mixtral-8", ["--arch", "llama", "--dim", "256", "--heads", "8", "--kv-heads", "2", "--ctx", "256",
                   "--layers", "8", "--ffn", "256", "--experts", "8", "--tied"], []),
    ("qwen2moe-8", ["--arch", "qwen2moe"] + ATTN + ["--ffn", "512", "--expert-ffn", "256", "--shared-ffn", "256",
                                                  "--experts", "8"], []),
    ("qwen35moe-8", ["--arch", "qwen35moe"] + ATTN + HYBRID + ["--ffn", "512", "--expert-ffn", "256",
                                                             "--shared-ffn", "256", "--experts", "8"], []),
    ("granitehybrid-moe-4", ["--arch", "granitehybrid", "--dim", "256", "--heads", "4", "--kv-heads", "2",
                             "--ctx", "256", "--layers", "8", "--ssm-head-dim", "64", "--attn-every", "4",
                             "--ffn", "256", "--experts", "4", "--shared-ffn", "256"], []),
    # gpt-oss's experts are MXFP4 in the file: both tools requantize them
    ("gpt-oss-8", ["--arch", "gpt-oss"] + ATTN + ["--ffn", "256", "--expert-ffn", "256", "--experts", "8"],
     ["--allow-requantize"]),
    # dense, for the rules MoE files share: phi3's fused attn_qkv ruled as
    # attn_v, and rows of 320 for the fallback table
    ("phi3", ["--arch", "phi3", "--dim", "256", "--heads", "8", "--kv-heads", "2", "--ctx", "256", "--layers", "8",
              "--ffn", "320"], []),
]
# whole files: the build's small models (tests/data/synth-models.txt)
WHOLE = [
    ("synth-qwen35moe-f32.gguf", MIXES),
    ("synth-qwen2moe-f32.gguf", ["Q4_K_M", "IQ2_XXS", "IQ4_XS", "Q5_0"]),
    ("synth-granitehybrid-moe-f32.gguf", ["Q4_K_M", "IQ3_M", "Q2_K"]),
    ("synth-mixtral-f32.gguf", ["IQ3_S", "IQ2_M", "TQ1_0"]),
    ("synth-qwen3next-split-f32.gguf", ["Q4_K_M", "IQ2_S"]),
]


def main():
    lq, synth = quantize_tools()
    for name, _ in WHOLE:
        if not os.path.exists(test_data(name)):
            print(f"skip: {test_data(name)} is missing (made by the build)")
            sys.exit(77)
    c = Checker("quant_moe")
    tmp = tempfile.mkdtemp(prefix="tessera-quant-moe-")
    try:
        t0 = time.time()
        check_plans(c, tmp, lq, synth)
        t1 = time.time()
        check_files(c, tmp, lq)
        t2 = time.time()
        check_dry_run(c, tmp)
        print(f"quant_moe: {t1 - t0:.1f} s for the dry runs, {t2 - t1:.1f} s for the whole files")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


LLAMA_LINE = re.compile(r"^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- .*type =\s+(\w+),.*?(?:\((\w+)\))?\s*$")
OUR_LINE = re.compile(r"^\[\s*\d+/\s*\d+\]\s+(\S+)\s+type = (\w+)\s.*?(?:\((\w+)\))?\s*$")


def plan_of(text, pattern):
    """{tensor: output type} from a dry run's lines (a tensor kept as is:
    its own type)."""
    out = {}
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            out[m.group(1)] = (m.group(3) or m.group(2)).upper()
    return out


def dry_runs(lq, model, mix, matrix, extra):
    m = ["--imatrix", matrix] if matrix else []
    p = subprocess.run([lq, "--dry-run"] + extra + m + [model, mix], capture_output=True, text=True, timeout=120)
    want = plan_of(p.stdout + p.stderr, LLAMA_LINE)
    rc, out, err = run(["quantize", "--dry-run"] + extra + m + [model, mix], timeout=120)
    return want, plan_of(out, OUR_LINE), rc, err


def check_plans(c, tmp, lq, synth):
    jobs = []
    for name, opts, extra in FAMILIES:
        model = os.path.join(tmp, name + ".gguf")
        p = subprocess.run([synth, "-q", "-o", model, "--vocab-from", STORIES, "--type", "F16", "--seed", "3"] + opts,
                           capture_output=True, text=True, timeout=120)
        if not c.check(p.returncode == 0, f"tessera-synth {name}: {p.stderr[-300:]}"):
            continue
        matrix = os.path.join(tmp, name + ".imatrix.gguf")
        write_synthetic_imatrix(model, matrix)
        jobs += [(name, model, mix, matrix, extra) for mix in MIXES]
        jobs += [(name, model, mix, None, extra) for mix in NO_MATRIX]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda j: dry_runs(lq, j[1], j[2], j[3], j[4]), jobs))
    n_tensors = n_same = 0
    for (name, _, mix, matrix, _), (want, got, rc, err) in zip(jobs, results):
        label = f"{name} {mix}{'' if matrix else ' (no matrix)'}"
        if not c.check(want and rc == 0 and got, f"{label}: a dry run failed (rc {rc}): {err[-300:]}"):
            continue
        diffs = [f"{t}: ours {got.get(t)}, llama-quantize {ty}" for t, ty in want.items() if got.get(t) != ty]
        c.check(set(want) == set(got), f"{label}: the dry runs list other tensors")
        c.check(not diffs, f"{label}: {len(diffs)} tensors differ: {diffs[:4]}")
        n_tensors += len(want)
        n_same += len(want) - len(diffs)
    print(f"quant_moe: dry runs: {len(jobs)} (model, mixture) pairs, {n_same}/{n_tensors} tensors of the same type")


def check_files(c, tmp, lq):
    n = 0
    for name, mixes in WHOLE:
        model = test_data(name)
        matrix = os.path.join(tmp, name + ".imatrix.gguf")
        write_synthetic_imatrix(model, matrix)
        for mix in mixes:
            want, got = os.path.join(tmp, "want.gguf"), os.path.join(tmp, "got.gguf")
            p = subprocess.run([lq, "--imatrix", matrix, model, want, mix, "2"], capture_output=True, text=True,
                               timeout=300)
            if not c.check(p.returncode == 0, f"llama-quantize {name} {mix}: {p.stderr[-300:]}"):
                continue
            rc, _, err = run(["quantize", "-q", "-t", "2", "--imatrix", matrix, model, got, mix], timeout=300)
            if not c.check(rc == 0, f"tessera quantize {name} {mix} failed ({rc}): {err[-300:]}"):
                continue
            problems = compare_files(want, got)
            c.check(not problems, f"{name} {mix}: not identical to llama-quantize's file: {problems[:4]}")
            n += 1
    print(f"quant_moe: {n} whole files compared with llama-quantize's")


def check_dry_run(c, tmp):
    model = test_data("synth-qwen35moe-f32.gguf")
    out = os.path.join(tmp, "dry.gguf")
    rc, text, err = run(["quantize", "--dry-run", model, out, "Q4_K_M"])
    c.check(rc == 0 and not os.path.exists(out) and not [f for f in os.listdir(tmp) if "tmp" in f],
            f"--dry-run with OUT: rc {rc}, or it wrote a file: {err[-200:]}")
    planned = plan_of(text, OUR_LINE)
    c.check(re.search(r"dry run: .* as Q4_K_M: [\d.]+ MiB -> [\d.]+ MiB", text), f"no total line: {text[-200:]}")
    rc, _, err = run(["quantize", "-q", model, out, "Q4_K_M"])
    if c.check(rc == 0, f"quantize Q4_K_M: {err[-300:]}"):
        _, tensors = read_tensors(out)
        written = {n: ty for n, ty, _, _ in tensors}
        c.check(planned == written, f"--dry-run's types are not the written ones: "
                f"{[(n, planned.get(n), t) for n, t in written.items() if planned.get(n) != t][:4]}")
        c.check(planned.get("blk.0.attn_qkv.weight") == "Q8_0",
                f"the DeltaNet's attn_qkv with 8 experts: {planned.get('blk.0.attn_qkv.weight')}, not Q8_0")
    # a target that needs a matrix is planned without one (llama-quantize warns)
    rc, text, err = run(["quantize", "--dry-run", model, "IQ2_XXS"])
    c.check(rc == 0 and plan_of(text, OUR_LINE).get("blk.0.ffn_up_exps.weight"),
            f"--dry-run IQ2_XXS without a matrix: rc {rc}: {err[-200:]}")
    for args, what in ((["--dry-run", model], "no TYPE"), (["--dry-run", model, "Q4_K_M", "x", "y"], "too many"),
                       (["--dry-run", model, "Q9_K"], "unknown TYPE")):
        rc, _, err = run(["quantize"] + args)
        c.check(rc == 2 and "tessera quantize:" in err and "Traceback" not in err, f"--dry-run, {what}: rc {rc}: "
                f"{err[-200:]}")
    rc, _, err = run(["quantize", "--dry-run", os.path.join(tmp, "absent.gguf"), "Q4_K_M"])
    c.check(rc == 1 and "absent.gguf" in err, f"--dry-run of a missing file: rc {rc}: {err[-200:]}")


if __name__ == "__main__":
    main()
