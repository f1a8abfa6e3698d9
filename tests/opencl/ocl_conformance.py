"""Op conformance (`tessera plugin check`) of the opencl plugin the way a
discrete GPU runs it, which PoCL does not by default: copies instead of
mapped buffers (TESSERA_OPENCL_NO_MAP=1) and 64-item work-groups in the
reduction kernels (TESSERA_OPENCL_WG=64; PoCL defaults to 8). The default
path is tests/conformance's conformance-opencl. Every FLASH_ATTN case (K/V
of each KV cache type) and every CPY into a KV block type must run on the
device. MUL_MAT_ID grouped by expert at every size (TESSERA_OPENCL_MOE=grouped),
and the grid IQ weight types computed by MUL_MAT and MUL_MAT_ID, none declined.
Also: with no ICD the check is skipped with the reason (exit 77)."""
import os
import re
import tempfile

from ocl_common import BUILD, Checker, require_opencl, run

require_opencl()
plugin = os.path.join(BUILD, "libtessera-backend-opencl.so")
c = Checker("opencl_conformance")

rc, out, err = run(["plugin", "check", plugin], env={"TESSERA_OPENCL_NO_MAP": "1", "TESSERA_OPENCL_WG": "64"},
                   timeout=600)
print("\n".join(l for l in out.splitlines() if l.startswith(("device", "summary")) or "FAIL" in l))
c.check(rc == 0, f"plugin check with copies: exit {rc}\n{out[-3000:]}{err[-1000:]}")
c.check("host-visible" not in out.split("\n", 2)[1] if out.count("\n") > 1 else False,
        "TESSERA_OPENCL_NO_MAP=1 still reports host-visible buffers")
m = re.search(r"summary: (\d+) cases: (\d+) passed, (\d+) failed", out)
c.check(m is not None and int(m.group(2)) > 600 and m.group(3) == "0", f"summary: {m.group(0) if m else out[-500:]}")
# A quantized KV cache runs on the device: every FLASH_ATTN case (K/V of
# every KV cache type), and every CPY into a KV block type.
fa = re.search(r"^  FLASH_ATTN +(\d+) cases: +(\d+) passed, 0 failed, (\d+) unsupported", out, re.M)
c.check(fa is not None and fa.group(1) == fa.group(2) and fa.group(3) == "0",
        f"FLASH_ATTN: not every case ran on the device: {fa.group(0) if fa else 'no FLASH_ATTN line'}")
rc, out, err = run(["plugin", "check", plugin, "--op", "CPY", "-v"])
kv_types = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL")
declined = [l.strip() for l in out.splitlines()
            if "unsupported" in l and re.search(r"-> (%s) \[" % "|".join(kv_types), l)]
quantized = [l for l in out.splitlines() if re.search(r"^ +ok +#\d+ .* -> (%s) \[" % "|".join(kv_types), l)]
c.check(rc == 0 and not declined and len(quantized) == 3 * len(kv_types),
        f"CPY into the KV block types: {len(quantized)} ran on the device, declined: {declined[:3]}")

# MUL_MAT_ID grouped by expert (kernels/moe.cl: k_moe_group, then
# k_mul_mat_id_tiled) forced at every size, one-token decoding and ids out
# of range included; the default takes it above 8 tokens. And the grid IQ
# types (IQ2_XXS ... IQ1_M) on the device in both products: none declined.
grid = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")
for op, env in (("MUL_MAT_ID", {"TESSERA_OPENCL_MOE": "grouped"}), ("MUL_MAT", {})):
    rc, out, err = run(["plugin", "check", plugin, "--op", op, "-v"], env=env)
    m = re.search(r"^  %s +(\d+) cases: +(\d+) passed, 0 failed" % op, out, re.M)
    ran = {t: len(re.findall(r"^ +ok +#\d+ %s \[" % t, out, re.M)) for t in grid}
    declined = [l.strip() for l in out.splitlines() if "unsupported" in l and re.search(r"#\d+ (%s) \[" % "|".join(grid), l)]
    c.check(rc == 0 and m is not None and all(ran.values()) and not declined,
            f"{op} {env}: exit {rc}, {m.group(0) if m else 'no summary'}, grid IQ cases on the device {ran}, "
            f"declined {declined[:2]}\n{out[-1500:]}")

with tempfile.TemporaryDirectory() as empty:
    rc, out, err = run(["plugin", "check", plugin], env={"OCL_ICD_VENDORS": empty})
    c.check(rc == 77 and "no OpenCL platform" in out, f"no ICD: exit {rc}:\n{out}{err}")
c.finish()
