"""The model server protocol of Kubernetes' inference gateway
(kubernetes-sigs/gateway-api-inference-extension): its endpoint picker
scrapes each replica's /metrics for the requests waiting, the requests
running and the KV-cache usage (0..1), under vLLM's names. With 2 slots
and 4 long requests at once (127.0.0.1 only, bounded in count and time),
a scrape under load must see 2 running and 2 waiting and the cache in use;
once they are answered all three fall back to 0. --kv-unified counts the
cells the running requests hold, below 1 for short ones."""
import threading
import time

from serve_common import Failure, Server, expect, main
from serve_shutdown import metrics

GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
          "vllm:gpu_cache_usage_perc")


def gauges(srv):
    """{name: value} of the gateway's gauges (one model: the label is ours)."""
    m = metrics(srv)
    out = {}
    for k, v in m.items():
        name = k.split("{", 1)[0]
        if name in GAUGES:
            expect('model_name="' in k, "%s without its model_name label" % k)
            out[name] = v
    expect(set(out) == set(GAUGES), "gauges missing: %s" % sorted(set(GAUGES) - set(out)))
    return out


def load(srv, n, max_tokens):
    """n completions at once in threads; returns (threads, statuses)."""
    statuses = []

    def one(k):
        st, _, _ = srv.request("POST", "/v1/completions",
                               {"prompt": "Once upon a time", "max_tokens": max_tokens, "ignore_eos": True,
                                "seed": k}, timeout=120)
        statuses.append(st)

    ts = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    return ts, statuses


def scrape_until(srv, pred, timeout=180):
    """Scrape every 20 ms until pred(gauges) holds; the last scrape."""
    end = time.time() + timeout
    g = gauges(srv)
    while not pred(g):
        if time.time() > end:
            raise Failure("the gauges never showed it: %r" % g)
        time.sleep(0.02)
        g = gauges(srv)
    return g


def test_slots():
    with Server("--parallel", "2", "--queue", "4", "-c", "4096") as srv:
        idle = gauges(srv)
        expect(idle == dict.fromkeys(GAUGES, 0.0), "an idle server: %r" % idle)
        ts, statuses = load(srv, 4, 600)
        busy = scrape_until(srv, lambda g: g["vllm:num_requests_running"] == 2 and
                            g["vllm:num_requests_waiting"] == 2)
        # each running request closes its slot's share: both shares, all of the cache
        expect(busy["vllm:kv_cache_usage_perc"] == 1.0, "2 of 2 slots busy, usage %r" % busy)
        expect(busy["vllm:gpu_cache_usage_perc"] == busy["vllm:kv_cache_usage_perc"], "the two names differ")
        half = scrape_until(srv, lambda g: g["vllm:num_requests_waiting"] == 0 and
                            g["vllm:num_requests_running"] <= 1)
        expect(half["vllm:kv_cache_usage_perc"] <= 0.5, "one slot busy, usage %r" % half)
        for t in ts:
            t.join()
        expect(statuses == [200] * 4, "statuses %r" % statuses)
        done = gauges(srv)
        expect(done == dict.fromkeys(GAUGES, 0.0), "all answered, the gauges stay up: %r" % done)


def test_unified():
    with Server("--parallel", "2", "--queue", "2", "-c", "4096", "--kv-unified") as srv:
        ts, statuses = load(srv, 1, 600)
        g = scrape_until(srv, lambda g: g["vllm:num_requests_running"] == 1 and g["vllm:kv_cache_usage_perc"] > 0)
        expect(g["vllm:kv_cache_usage_perc"] < 0.5, "a short request holds most of the cache: %r" % g)
        for t in ts:
            t.join()
        expect(statuses == [200], "statuses %r" % statuses)
        expect(gauges(srv)["vllm:kv_cache_usage_perc"] == 0.0, "usage after the request")


if __name__ == "__main__":
    main([
        ("2 slots, 4 requests: 2 running, 2 waiting, the cache in use, then all 0", test_slots),
        ("--kv-unified: the cells running requests hold", test_unified),
    ])
