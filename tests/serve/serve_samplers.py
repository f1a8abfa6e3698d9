"""llama.cpp's samplers through the server, with llama-server's field names:
/props' default_generation_settings lists every one with llama.cpp's
defaults (and the server's --flags when given), /completion's
generation_settings gives back what a request sent, the same seed and
settings give `tessera run`'s text (whose samplers are checked against
llama.cpp's in tests/sample and tests/cli), the OpenAI routes take the
fields too, and a bad value is a 400 naming the field."""
import subprocess

from serve_common import BIN, MODEL, Server, error_body, expect, main

PROMPT = "Once upon a time"
SETTINGS = {"dry_multiplier": 0.8, "dry_base": 2.0, "dry_allowed_length": 3, "dry_penalty_last_n": 32,
            "dry_sequence_breakers": ["\n", "x"], "xtc_probability": 0.5, "xtc_threshold": 0.05, "top_n_sigma": 2.0,
            "dynatemp_range": 0.25, "dynatemp_exponent": 1.5, "samplers": ["dry", "top_k", "xtc", "temperature"]}


def near(a, b):
    return abs(a - b) < 1e-6 * max(1.0, abs(b))


def test_props_defaults():
    with Server() as srv:
        st, props = srv.json("GET", "/props")
        expect(st == 200, "/props: %d" % st)
        p = props["default_generation_settings"]["params"]
        want = {"temperature": 0.8, "dynatemp_range": 0.0, "dynatemp_exponent": 1.0, "top_k": 40, "top_p": 0.95,
                "min_p": 0.05, "top_n_sigma": -1.0, "xtc_probability": 0.0, "xtc_threshold": 0.1, "typical_p": 1.0,
                "repeat_last_n": 64, "repeat_penalty": 1.0, "dry_multiplier": 0.0, "dry_base": 1.75,
                "dry_allowed_length": 2, "dry_penalty_last_n": 64, "mirostat": 0, "mirostat_tau": 5.0,
                "mirostat_eta": 0.1}
        for k, v in want.items():
            expect(k in p and near(p[k], v), "/props %s is %r, llama.cpp's default %r" % (k, p.get(k), v))
        expect(p.get("dry_sequence_breakers") == ["\n", ":", "\"", "*"], "breakers %r" % p.get("dry_sequence_breakers"))
        expect(p.get("samplers") == ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
                                     "temperature"], "samplers %r" % p.get("samplers"))
    with Server("--mirostat", "2", "--mirostat-ent", "3", "--sampling-seq", "kt", "--dry-sequence-breaker", "##",
                "--xtc-probability", "0.25") as srv:
        st, props = srv.json("GET", "/props")
        p = props["default_generation_settings"]["params"]
        expect(p["mirostat"] == 2 and near(p["mirostat_tau"], 3.0) and near(p["xtc_probability"], 0.25),
               "server flags not in /props: %r" % p)
        expect(p["samplers"] == ["top_k", "temperature"] and p["dry_sequence_breakers"] == ["##"],
               "server order/breakers: %r %r" % (p["samplers"], p["dry_sequence_breakers"]))


def run_cli(args):
    r = subprocess.run([BIN, "run", "-m", MODEL, "-p", PROMPT, "--no-echo", "-t", "1"] + args, capture_output=True,
                       text=True, timeout=120)
    expect(r.returncode == 0, "tessera run %r: %s" % (args, r.stderr[-300:]))
    return r.stdout.rstrip("\n")


def test_roundtrip_and_cli():
    with Server() as srv:
        body = dict(SETTINGS, prompt=PROMPT, n_predict=24, seed=9)
        st, obj = srv.json("POST", "/completion", body)
        expect(st == 200, "/completion: %d %r" % (st, obj))
        g = obj["generation_settings"]
        for k, v in SETTINGS.items():
            got = g.get(k)
            ok = got == v if isinstance(v, list) else (got is not None and near(got, v))
            expect(ok, "generation_settings %s is %r, sent %r" % (k, got, v))
        cli = run_cli(["-n", "24", "--seed", "9", "--dry-multiplier", "0.8", "--dry-base", "2", "--dry-allowed-length",
                       "3", "--dry-penalty-last-n", "32", "--dry-sequence-breaker", "\n", "--dry-sequence-breaker", "x",
                       "--xtc-probability", "0.5", "--xtc-threshold", "0.05", "--top-n-sigma", "2", "--dynatemp-range",
                       "0.25", "--dynatemp-exp", "1.5", "--samplers", "dry;top_k;xtc;temperature"])
        expect(obj["content"] == cli, "server %r, tessera run %r" % (obj["content"], cli))
        for miro in (1, 2):
            st, obj = srv.json("POST", "/completion", {"prompt": PROMPT, "n_predict": 24, "seed": 4, "mirostat": miro,
                                                     "mirostat_tau": 3.0, "mirostat_eta": 0.2})
            cli = run_cli(["-n", "24", "--seed", "4", "--mirostat", str(miro), "--mirostat-ent", "3", "--mirostat-lr",
                           "0.2"])
            expect(st == 200 and obj["content"] == cli, "mirostat %d: server %r, run %r" % (miro, obj.get("content"), cli))
        # the OpenAI routes take them too
        for path, extra in (("/v1/completions", {"prompt": PROMPT}),
                            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})):
            st, obj = srv.json("POST", path, dict(SETTINGS, max_tokens=8, seed=2, **extra))
            expect(st == 200, "%s with the sampler fields: %d %r" % (path, st, obj))


def test_bad_values():
    with Server() as srv:
        for field, value in (("mirostat", 3), ("xtc_probability", 2), ("xtc_threshold", -1), ("dry_multiplier", -1),
                             ("dry_allowed_length", -1), ("dry_penalty_last_n", -2), ("dry_sequence_breakers", "x"),
                             ("dry_sequence_breakers", [1]), ("dry_sequence_breakers", [""]), ("samplers", ["warp"]),
                             ("samplers", "kq"), ("samplers", 5), ("top_n_sigma", "a"), ("dynatemp_range", -0.5)):
            for path, extra in (("/completion", {"prompt": PROMPT}), ("/v1/completions", {"prompt": PROMPT})):
                st, obj = srv.json("POST", path, dict(extra, **{field: value}, max_tokens=2))
                expect(st == 400, "%s %s=%r: status %d" % (path, field, value, st))
                e = error_body(obj, "%s %s" % (path, field))
                expect(field in e["message"] or e.get("param") == field, "%s %s=%r: %r" % (path, field, value, e))
        expect(srv.alive(), "the server died")


if __name__ == "__main__":
    main([
        ("/props lists llama.cpp's sampler defaults and the server's flags", test_props_defaults),
        ("fields round-trip, give tessera run's text, OpenAI routes too", test_roundtrip_and_cli),
        ("bad sampler values are 400s naming the field", test_bad_values),
    ])
