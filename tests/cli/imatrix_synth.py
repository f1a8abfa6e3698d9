"""tessera imatrix and tessera quantize --imatrix on the synthetic llama
(synth-s-f32.gguf) and a slice of the GPL text:

- the matrix has an entry per layer weight with the token count, in
  llama.cpp's GGUF format and the legacy .dat; --in-file combines;
- against llama-imatrix on the same model and text (when the peer is
  built): the same entries and counts, every sum within 2e-3 relative;
- tessera quantize --imatrix gives byte-identical files to llama-quantize
  --imatrix given the same matrix (GGUF and .dat), for every type whose
  quantizer takes the matrix, some mixtures and --include/--exclude-weights;
- Q2_K_S, IQ3_XXS (--pure and its mixture), IQ3_S, IQ3_M, IQ3_XS, IQ2_M,
  IQ2_XXS, IQ2_XS, IQ2_S and IQ1_S byte-identical to llama-quantize with tessera
  imatrix's matrix (IQ2_XXS/IQ2_XS with llama-imatrix's and the .dat too);
- the types that need a matrix refuse without one (llama-quantize's
  reasoning) and the grid types Tessera lacks say so with one; a matrix of
  another model, a garbage file and bad flags are one clear error;
- a mixture-of-experts model (synth-qwen3moe, 8 experts: MUL_MAT_ID, one
  sum per expert) against llama-imatrix, and quantized with its matrix."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import SHARED, Checker, require, run, test_data  # noqa: E402
from imatrix_common import compare, peer_tool, read_gguf, text_head  # noqa: E402

MODEL = os.path.join(SHARED, "models", "synth-s-f32.gguf")
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
TEXT = os.path.join(SHARED, "golden", "gpl3-12k.txt")
N_CTX, N_CHUNKS = 128, 6
# the 2-D weights of synth-s: 4 layers x (q, k, v, output, gate, up, down)
N_ENTRIES = 28
PURE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q4_K_S", "Q5_K_S", "Q6_K", "IQ4_NL",
        "IQ4_XS"]
MIXES = ["Q3_K_M", "Q4_K_M", "Q5_K_M", "IQ4_XS"]
MOE = test_data("synth-qwen3moe-f32.gguf")


def main():
    require(MODEL, TEXT, STORIES, MOE)
    c = Checker("imatrix_synth")
    tmp = tempfile.mkdtemp(prefix="tessera-imatrix-")
    try:
        check_all(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


def imatrix(args):
    return run(["imatrix", "-t", "2"] + args, timeout=300)


def quantize(args):
    return run(["quantize", "-q", "-t", "2"] + args, timeout=300)


def check_all(c, tmp):
    text = text_head(TEXT, tmp, 6000)
    ours = os.path.join(tmp, "ours.gguf")
    args = ["-m", MODEL, "-f", text, "-c", str(N_CTX), "--chunks", str(N_CHUNKS)]
    rc, _, err = imatrix(args + ["-o", ours])
    if not c.check(rc == 0, f"tessera imatrix failed ({rc}): {err[-400:]}"):
        return
    c.check(f"[{N_CHUNKS}/{N_CHUNKS}]" in err, "no progress line per chunk on stderr")
    kv, t = read_gguf(ours)
    c.check(kv.get("general.type") == "imatrix", f"general.type: {kv.get('general.type')}")
    c.check(kv.get("imatrix.chunk_count") == N_CHUNKS and kv.get("imatrix.chunk_size") == N_CTX,
            f"chunk keys: {kv}")
    sums = [n for n in t if n.endswith(".in_sum2")]
    c.check(len(sums) == N_ENTRIES, f"{len(sums)} entries, expected {N_ENTRIES}")
    c.check(all(t[n[:-8] + ".counts"] == (float(N_CHUNKS * N_CTX),) for n in sums),
            "counts are not the number of tokens")
    c.check(all(min(t[n]) >= 0 and max(t[n]) > 0 for n in sums), "sums of squares not positive")
    c.check(len(t["blk.0.ffn_down.weight.in_sum2"]) == 768, "ffn_down's entry is not 768 columns")

    # legacy .dat, and --in-file combining two files: twice the counts
    dat = os.path.join(tmp, "ours.dat")
    rc, _, err = imatrix(args + ["-o", dat, "--output-format", "dat"])
    c.check(rc == 0 and os.path.getsize(dat) > 0, f"--output-format dat failed: {err[-300:]}")
    both = os.path.join(tmp, "both.gguf")
    rc, _, err = imatrix(["--in-file", ours, "--in-file", dat, "-o", both])
    if c.check(rc == 0, f"--in-file combining failed: {err[-300:]}"):
        kv2, t2 = read_gguf(both)
        c.check(kv2.get("imatrix.chunk_count") == 2 * N_CHUNKS, f"combined chunk count {kv2}")
        c.check(t2["blk.1.attn_q.weight.counts"] == (float(N_CHUNKS * N_CTX + N_CHUNKS),),
                f"combined counts {t2['blk.1.attn_q.weight.counts']} (GGUF tokens + .dat chunks)")
        a, b = t["blk.1.attn_q.weight.in_sum2"], t2["blk.1.attn_q.weight.in_sum2"]
        # the .dat holds mean * chunks, so the combined sum is sum * (1 + 1/n_ctx)
        c.check(all(abs(y - x * (1 + 1 / N_CTX)) <= 1e-4 * abs(y) for x, y in zip(a, b)),
                "combined sums are not the two files' sums")

    check_refusals(c, tmp, ours, text)

    li, lq = peer_tool("llama-imatrix"), peer_tool("llama-quantize")
    if not li or not lq:
        print("imatrix_synth: the peer's llama-imatrix/llama-quantize are not built: comparisons skipped")
        return
    theirs = os.path.join(tmp, "theirs.gguf")
    p = subprocess.run([li] + args + ["-o", theirs, "--no-ppl", "-t", "2"], capture_output=True, timeout=300)
    if not c.check(p.returncode == 0, f"llama-imatrix failed: {p.stderr[-300:]}"):
        return
    problems, worst_el, worst_l2 = compare(ours, theirs)
    c.check(not problems, f"ours and llama-imatrix's differ: {problems[:3]}")
    print(f"imatrix_synth: vs llama-imatrix: worst element {worst_el:.2e}, worst weight (L2) {worst_l2:.2e}")
    c.check(worst_el <= 2e-3, f"a sum differs from llama-imatrix's by {worst_el:.2e} (relative; allowed 2e-3)")

    # both tools given the same file (llama-imatrix's, or ours in either format)
    jobs = [(ty, theirs, ["--pure"]) for ty in PURE] + [(ty, dat, []) for ty in MIXES]
    # the grid and ~2-bit targets Tessera produces, with tessera imatrix's matrix
    jobs += [("Q2_K_S", ours, []), ("IQ3_XXS", ours, ["--pure"])]
    # IQ3_S, IQ2_S (quant_iq3s.c) and the mixtures that use them
    jobs += [("IQ3_S", ours, ["--pure"]), ("IQ3_S", ours, []), ("IQ3_M", ours, []), ("IQ3_XS", ours, []),
             ("IQ3_XXS", ours, []), ("IQ2_M", ours, [])]
    # IQ2_XXS/IQ2_XS: their mixture (output Q5_K, token_embd Q2_K, attn_v Q4_K), with both matrices
    jobs += [("IQ2_XXS", ours, []), ("IQ2_XS", ours, []), ("IQ2_XXS", theirs, []), ("IQ2_XS", dat, [])]
    # IQ2_S: IQ2_XS (quant_iq2.c) with IQ2_M's mixture less its IQ2_S attn_q/attn_k
    jobs += [("IQ2_S", ours, [])]
    # IQ1_S (quant_iq1.c): IQ2_XXS's mixture with attn_output IQ2_XXS, both matrices
    jobs += [("IQ1_S", ours, []), ("IQ1_S", theirs, [])]
    jobs += [("Q4_K_M", ours, ["--include-weights", "attn_v", "--include-weights", "ffn_down"]),
             ("Q5_0", dat, ["--exclude-weights", "attn_q"])]
    # the MoE model: per-expert sums and counts, then quantized with them
    moe_ours, moe_theirs = os.path.join(tmp, "moe-ours.gguf"), os.path.join(tmp, "moe-theirs.gguf")
    moe_args = ["-m", MOE, "-f", text, "-c", str(N_CTX), "--chunks", "3"]
    rc, _, err = imatrix(moe_args + ["-o", moe_ours])
    p = subprocess.run([li] + moe_args + ["-o", moe_theirs, "--no-ppl", "-t", "2"], capture_output=True,
                       timeout=300)
    if c.check(rc == 0 and p.returncode == 0, f"MoE imatrix failed: {err[-300:]} {p.stderr[-300:]}"):
        _, tm = read_gguf(moe_ours)
        counts = tm.get("blk.0.ffn_up_exps.weight.counts", ())
        c.check(len(counts) == 8 and sum(counts) == 3 * N_CTX * 2,
                f"MoE counts per expert {counts} (2 experts used per token, 8 experts)")
        problems, worst_el, _ = compare(moe_ours, moe_theirs)
        c.check(not problems, f"MoE: ours and llama-imatrix's differ: {problems[:3]}")
        c.check(worst_el <= 2e-3, f"MoE: a sum differs from llama-imatrix's by {worst_el:.2e}")
        print(f"imatrix_synth: MoE vs llama-imatrix: worst element {worst_el:.2e}")
    jobs = [(ty, im, extra, MODEL) for ty, im, extra in jobs]
    jobs += [("IQ4_XS", moe_ours, [], MOE), ("Q4_K_M", moe_ours, [], MOE)]
    for ty, im, extra, model in jobs:
        want = os.path.join(tmp, f"want-{ty}.gguf")
        got = os.path.join(tmp, f"got-{ty}.gguf")
        p = subprocess.run([lq] + extra + ["--imatrix", im, model, want, ty, "2"], capture_output=True,
                           timeout=300)
        if not c.check(p.returncode == 0, f"llama-quantize {ty} failed: {p.stderr[-300:]}"):
            continue
        rc, _, err = quantize(extra + ["--imatrix", im, model, got, ty])
        if not c.check(rc == 0, f"tessera quantize --imatrix {ty} failed: {err[-300:]}"):
            continue
        with open(want, "rb") as f1, open(got, "rb") as f2:
            same = f1.read() == f2.read()
        label = f"{ty} {' '.join(extra)} with {os.path.basename(im)}"
        c.check(same, f"{label}: not byte-identical to llama-quantize --imatrix")
        print(f"imatrix_synth: {label}: {'identical' if same else 'DIFFERENT'}")
        os.remove(want)
        os.remove(got)


def check_refusals(c, tmp, ours, text):
    out = os.path.join(tmp, "out.gguf")
    rc, _, err = quantize([MODEL, out, "IQ2_XXS"])
    c.check(rc != 0 and "requires an importance matrix" in err and not os.path.exists(out),
            f"IQ2_XXS without a matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize([MODEL, out, "Q2_K_S"])
    c.check(rc != 0 and "requires an importance matrix" in err and not os.path.exists(out),
            f"Q2_K_S without a matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize(["--pure", MODEL, out, "IQ3_XXS"])
    c.check(rc != 0 and "requires an importance matrix" in err and not os.path.exists(out),
            f"IQ3_XXS without a matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize([MODEL, out, "IQ2_S"])
    c.check(rc != 0 and "requires an importance matrix" in err and not os.path.exists(out),
            f"IQ2_S without a matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize([MODEL, out, "IQ1_S"])
    c.check(rc != 0 and "requires an importance matrix" in err and not os.path.exists(out),
            f"IQ1_S without a matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize(["--imatrix", ours, MODEL, out, "IQ1_M"])
    c.check(rc != 0 and "does not produce" in err and "no quantizer" in err and not os.path.exists(out),
            f"IQ1_M with a matrix: rc {rc}: {err[-300:]}")
    # --pure IQ2_XXS: output.weight has no importance data (llama-quantize aborts there)
    rc, _, err = quantize(["--pure", "--imatrix", ours, MODEL, out, "IQ2_XXS"])
    c.check(rc == 1 and "output.weight" in err and "Missing importance matrix" in err and not os.path.exists(out),
            f"--pure IQ2_XXS: rc {rc}: {err[-300:]}")
    # a matrix of another model (stories260K: dim 64) names the tensor
    small = os.path.join(tmp, "stories.gguf")
    rc, _, err = imatrix(["-m", STORIES, "-f", text, "-c", "64", "--chunks", "1", "-o", small])
    if c.check(rc == 0, f"imatrix on stories260K failed: {err[-300:]}"):
        rc, _, err = quantize(["--imatrix", small, MODEL, out, "Q4_K_M"])
        c.check(rc == 1 and "blk.0." in err and "another model" in err and not os.path.exists(out),
                f"mismatched matrix: rc {rc}: {err[-300:]}")
    junk = os.path.join(tmp, "junk.dat")
    with open(junk, "wb") as f:
        f.write(b"\x05\x00\x00\x00\xff\xff\xff\x7fgarbage")
    rc, _, err = quantize(["--imatrix", junk, MODEL, out, "Q4_0"])
    c.check(rc == 1 and "junk.dat" in err and "Traceback" not in err, f"garbage matrix: rc {rc}: {err[-300:]}")
    # truncated matrices (both formats): one clear error naming the file, or
    # (a .dat cut exactly after its entries, as old files end) accepted
    for src in (ours, ours.replace(".gguf", ".dat")):
        with open(src, "rb") as f:
            data = f.read()
        # (a GGUF's end may be alignment padding, which a cut loses nothing of)
        cuts = (3, 4, 9, 40, len(data) // 3, len(data) // 2) + ((len(data) - 5,) if src.endswith(".dat") else ())
        for cut in cuts:
            bad = os.path.join(tmp, "cut" + os.path.splitext(src)[1])
            with open(bad, "wb") as f:
                f.write(data[:cut])
            rc, _, err = quantize(["--imatrix", bad, MODEL, out, "Q4_0"])
            c.check(rc == 1 and os.path.basename(bad) in err and not os.path.exists(out),
                    f"{os.path.basename(src)} cut at {cut}: rc {rc}: {err[-200:]}")
    rc, _, err = quantize(["--imatrix", os.path.join(tmp, "absent.gguf"), MODEL, out, "Q4_0"])
    c.check(rc == 1 and "absent.gguf" in err, f"missing matrix: rc {rc}: {err[-300:]}")
    rc, _, err = quantize(["--include-weights", "x", "--exclude-weights", "y", "--imatrix", ours, MODEL, out,
                           "Q4_0"])
    c.check(rc == 2 and "not both" in err, f"include and exclude: rc {rc}: {err[-300:]}")
    rc, _, err = imatrix(["-m", MODEL, "-f", text, "--output-format", "xml"])
    c.check(rc == 2 and "--output-format" in err, f"bad --output-format: rc {rc}: {err[-300:]}")
    rc, _, err = imatrix(["-m", MODEL])
    c.check(rc == 2 and "-f" in err, f"no text: rc {rc}: {err[-300:]}")
    rc, out_help, _ = run(["imatrix", "--help"])
    c.check(rc == 0 and "--chunks" in out_help and "--in-file" in out_help, "imatrix --help")


if __name__ == "__main__":
    main()
