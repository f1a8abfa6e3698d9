"""The Kubernetes manifest of docs/deploy.md, checked without a cluster:
- it parses (PyYAML) into a Deployment and a Service that agree: labels and
  selector, container port, probe ports and Service targetPort, and the
  port the server is told to listen on;
- terminationGracePeriodSeconds exceeds --shutdown-grace (else the kubelet
  SIGKILLs a draining replica), and the liveness probe tolerates longer than
  that drain (else it restarts a replica that is only draining);
- `tessera serve` accepts the container's arguments as written (model path,
  host and port mapped to this test's), both probes' httpGet answers 200,
  and after SIGTERM with a stream in flight the readiness probe no longer
  answers 200, the stream ends whole, and the server exits 0 within the
  termination grace period."""
import os
import re
import signal
import threading
import time

from serve_common import HOST, Failure, Server, expect, main, skip
from serve_shutdown import raw, sse_events, wait_for

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "deploy.md")


def manifest():
    try:
        import yaml
    except ImportError:
        skip("PyYAML is missing (Debian: python3-yaml, installed by scripts/setup.sh)")
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Kubernetes", 1)
    expect(len(section) == 2, "docs/deploy.md has no '## Kubernetes' section")
    m = re.search(r"```yaml\n(.*?)```", section[1], re.S)
    expect(m is not None, "docs/deploy.md's Kubernetes section has no ```yaml block")
    docs = {d["kind"]: d for d in yaml.safe_load_all(m.group(1)) if d}
    expect(set(docs) == {"Deployment", "Service"}, "manifest kinds: %s" % sorted(docs))
    return docs["Deployment"], docs["Service"]


def flag(args, name):
    expect(name in args, "the container's args lack %s: %s" % (name, args))
    return args[args.index(name) + 1]


def get(port, path):
    """An httpGet probe: the status, or None when the connection is refused."""
    import http.client
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status
    except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
        return None
    finally:
        c.close()


def test_manifest():
    dep, svc = manifest()
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    expect(dep["spec"]["selector"]["matchLabels"] == labels, "Deployment selector does not match its pod labels")
    expect(svc["spec"]["selector"] == labels, "Service selector does not match the pod labels")
    (c,) = pod["spec"]["containers"]
    args = [str(a) for a in c["args"]]
    expect(args[0] == "serve", "the container does not run 'serve': %s" % args)
    port = int(flag(args, "--port"))
    expect(c["ports"][0]["containerPort"] == port, "containerPort is not --port %d" % port)
    expect(svc["spec"]["ports"][0]["targetPort"] == port, "Service targetPort is not --port %d" % port)
    ready, live = c["readinessProbe"], c["livenessProbe"]
    for name, p in (("readiness", ready), ("liveness", live)):
        expect(p["httpGet"]["port"] == port, "%s probe port is not %d" % (name, port))
    grace = float(flag(args, "--shutdown-grace"))
    kill_after = pod["spec"]["terminationGracePeriodSeconds"]
    expect(kill_after > grace, "terminationGracePeriodSeconds %s <= --shutdown-grace %s" % (kill_after, grace))
    expect(live["periodSeconds"] * live["failureThreshold"] > grace,
           "the liveness probe gives up before a drain of %s s ends" % grace)

    # The server with the container's arguments; only the model, host and
    # port are this test's (and a context long enough to keep a stream going).
    rest, i = [], 1
    while i < len(args):
        if args[i] in ("-m", "--model", "--host", "--port"):
            i += 2
            continue
        rest.append(args[i])
        i += 1
    srv = Server(*(rest + ["-c", "8192"]))
    with srv:
        expect(get(srv.port, ready["httpGet"]["path"]) == 200, "readiness probe before SIGTERM")
        expect(get(srv.port, live["httpGet"]["path"]) == 200, "liveness probe before SIGTERM")
        body = {"prompt": "Once upon a time", "max_tokens": 1000, "temperature": 0, "logit_bias": {"2": -100}}
        result = []
        client = threading.Thread(target=lambda: result.append(raw(srv.port, body, True)))
        client.start()
        wait_for(srv, lambda m: m["tessera_slots_busy"] == 1 and m["tessera_tokens_generated_total"] > 0,
                 "the stream generating")
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        after = get(srv.port, ready["httpGet"]["path"])
        expect(after != 200, "the readiness probe still answers 200 after SIGTERM")
        try:
            srv.proc.wait(timeout=kill_after)
        except Exception:
            raise Failure("the server did not exit within terminationGracePeriodSeconds (%s s)" % kill_after)
        took = time.time() - t0
        client.join(30)
        expect(result, "the stream's client got no answer")
        status, data = result[0]
        expect(status == 200, "stream status %d" % status)
        events, done = sse_events(data)
        expect(done, "the stream did not end with [DONE]")
        expect(any(e["choices"] and e["choices"][0].get("finish_reason") for e in events),
               "the stream has no finish_reason")
        print("  exited %.1f s after SIGTERM (killed after %s s); readiness probe then: %s"
              % (took, kill_after, after or "connection refused"))
    expect(srv.proc.returncode == 0, "exit status %s" % srv.proc.returncode)


if __name__ == "__main__":
    main([("docs/deploy.md's Kubernetes manifest: consistent, its args and probes work, drain within grace",
           test_manifest)])
