"""--explain shows why a CPU device declines a node (issue 17): the CPU
plugin gives every refusal a reason through tsr_host.decline, so a fallback
line names it instead of "does not support it". The synthetic Mistral 3
model uses YaRN RoPE, which the CPU plugins leave to ref."""
from cli_common import Checker, best_cpu_device, crashed, require, run, test_data

model = test_data("synth-mistral3-f32.gguf")
require(model)
cpu = best_cpu_device()
if cpu == "ref":
    print("skip: no CPU plugin in this build (only ref)")
    raise SystemExit(77)
c = Checker("run_explain_decline")
rc, out, err = run(["run", "-m", model, "-p", "hello", "-n", "1", "--device", cpu, "--explain"])
c.check(rc == 0 and not crashed(rc, err), f"run rc {rc}: {err[-800:]}")
both = out + err
fallbacks = [line for line in both.splitlines() if line.startswith("fallback:")]
yarn = [line for line in fallbacks if "ROPE" in line.upper() and "YaRN (ext_factor" in line]
c.check(yarn, "no ROPE fallback naming YaRN:\n" + "\n".join(fallbacks[:10]))
vague = [line for line in fallbacks if "does not support it" in line]
c.check(not vague, "fallbacks without a reason:\n" + "\n".join(vague[:10]))
c.finish()
