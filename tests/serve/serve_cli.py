"""tessera serve's command line: bad flags, models, hosts and ports are one
clear line on stderr naming the flag or file, with a non-zero exit, never a
crash; a port in use is reported."""
import socket
import subprocess

from serve_common import BIN, MODEL, check_env, expect, main


def serve(*args, timeout=60):
    r = subprocess.run([BIN, "serve"] + list(args), capture_output=True, text=True, timeout=timeout)
    expect(r.returncode not in (-6, -11) and "Sanitizer" not in r.stderr, "crashed: %s" % r.stderr[-300:])
    return r.returncode, r.stderr


def bad(args, rc_want, *words):
    rc, err = serve(*args)
    expect(rc == rc_want, "%s: exit %d, want %d (%s)" % (args, rc, rc_want, err.strip()))
    line = err.strip().splitlines()[-1] if err.strip() else ""
    for w in words:
        expect(w in line, "%s: %r does not name %r" % (args, line, w))


def test_flags():
    bad([], 2, "-m")
    bad(["-m", MODEL, "--bogus"], 2, "--bogus")
    bad(["-m", MODEL, "--port", "70000"], 2, "--port")
    bad(["-m", MODEL, "--port"], 2, "--port")
    bad(["-m", MODEL, "--parallel", "0"], 2, "--parallel")
    bad(["-m", MODEL, "--parallel", "65"], 2, "--parallel")
    bad(["-m", MODEL, "-c", "abc"], 2, "-c")
    bad(["-m", MODEL, "--kv-type", "q4"], 2, "--kv-type")
    bad(["-m", MODEL, "--api-key", ""], 2, "--api-key")
    bad(["-m", MODEL, "--max-body", "10"], 2, "--max-body")
    bad(["-m", MODEL, "-n", "0"], 2, "-n")


def test_model_and_setup():
    bad(["-m", "/nonexistent/model.gguf"], 1, "/nonexistent/model.gguf")
    bad(["-m", "/etc/hostname", "--port", "0"], 1)
    bad(["-m", MODEL, "--port", "0", "--chat-template", "nope"], 1, "--chat-template")
    bad(["-m", MODEL, "--port", "0", "-c", "3", "--parallel", "4"], 1, "-c")
    bad(["-m", MODEL, "--port", "0", "--device", "nosuchdevice0"], 1, "nosuchdevice0")
    bad(["-m", MODEL, "--port", "0", "--host", "999.1.1.1"], 1, "999.1.1.1")


def test_port_in_use():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        bad(["-m", MODEL, "--port", str(port), "-t", "1"], 1, "port %d" % port)
    finally:
        s.close()


if __name__ == "__main__":
    check_env()
    main([
        ("bad flags", test_flags),
        ("bad model, template, context, device, host", test_model_and_setup),
        ("port in use", test_port_in_use),
    ])
