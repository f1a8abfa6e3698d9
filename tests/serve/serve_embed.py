"""tessera serve's embedding and reranking endpoints (cli/serve/embed_api.c)
on small synthetic bert files that tessera-synth writes (seeded) into a
temporary directory: /v1/embeddings and /embeddings with string, array and
token-id inputs, float and base64; /v1/rerank, /rerank, /reranking sorted
with top_n; each bad input one 4xx after which the server goes on serving;
an embedding server refuses completions and a plain one embeddings (501)."""
import base64
import math
import os
import struct
import subprocess
import tempfile

from serve_common import BIN, Failure, Server, error_body, expect, main, skip

SYNTH = os.path.join(os.environ.get("TESSERA_BUILD_ROOT", ""), "tools", "tessera-synth")
TMP = tempfile.mkdtemp(prefix="serve-embed-")
SHAPE = ["--dim", "64", "--layers", "2", "--heads", "4", "--ffn", "128", "--ctx", "128", "-q"]


def synth(name, *args):
    path = os.path.join(TMP, name)
    if not os.path.exists(path):
        out = subprocess.run([SYNTH, "-o", path] + SHAPE + list(args), capture_output=True, text=True, timeout=60)
        expect(out.returncode == 0, "tessera-synth: " + out.stderr)
    return path


def bert():
    return synth("bert.gguf", "--arch", "bert", "--seed", "7")


def reranker():
    return synth("rerank.gguf", "--arch", "bert", "--reranker", "--seed", "9")


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def bad(s, path, body, status, needle):
    st, obj = s.json("POST", path, body)
    e = error_body(obj, path)
    expect(st == status and needle in e["message"], "%s %r: %d %r, want %d '%s'" % (path, body, st, e, status, needle))


def test_embeddings():
    with Server("--embeddings", "-c", "32", model=bert()) as s:
        st, one = s.json("POST", "/v1/embeddings", {"input": "hello world", "model": "x"})
        expect(st == 200 and one["object"] == "list", "string input: %d %r" % (st, one))
        v = one["data"][0]["embedding"]
        expect(len(v) == 64 and abs(norm(v) - 1) < 1e-5, "one unit vector of 64: %d, norm %g" % (len(v), norm(v)))
        expect(one["data"][0]["object"] == "embedding" and one["data"][0]["index"] == 0, "item shape")
        expect(one["usage"] == {"prompt_tokens": 4, "total_tokens": 4}, "usage %r" % one["usage"])
        st, two = s.json("POST", "/v1/embeddings", {"input": ["hello world", "the cat sat"]})
        expect(st == 200 and [d["index"] for d in two["data"]] == [0, 1], "array input: %r" % two)
        expect(two["data"][0]["embedding"] == v, "the same text gives the same vector in a list")
        expect(two["data"][1]["embedding"] != v, "different texts, different vectors")
        tok = subprocess.run([BIN, "tokenize", "-m", bert(), "-p", "hello world", "--ids"], capture_output=True,
                             text=True, timeout=30)
        ids = [int(x) for x in tok.stdout.strip().strip("[]").split(",")]
        st, byid = s.json("POST", "/v1/embeddings", {"input": ids})
        expect(st == 200 and byid["data"][0]["embedding"] == v, "token ids %r give the text's vector" % ids)
        st, nested = s.json("POST", "/v1/embeddings", {"input": [ids, ids[:2]]})
        expect(st == 200 and len(nested["data"]) == 2, "arrays of token ids: %r" % nested)
        st, b64 = s.json("POST", "/v1/embeddings", {"input": "hello world", "encoding_format": "base64"})
        raw = base64.b64decode(b64["data"][0]["embedding"])
        got = struct.unpack("<%df" % (len(raw) // 4), raw)
        f32 = struct.unpack("<64f", struct.pack("<64f", *v))  # JSON's decimals, back to f32
        expect(st == 200 and list(got) == list(f32), "base64 = float")
        st, native = s.json("POST", "/embeddings", {"content": "hello world"})
        expect(st == 200 and native[0]["embedding"] == [v], "/embeddings: [{index, embedding: [[...]]}]")

        bad(s, "/v1/embeddings", {"input": []}, 400, "empty")
        bad(s, "/v1/embeddings", {"input": [2, 99999]}, 400, "not a token id")
        bad(s, "/v1/embeddings", {"input": " ".join(["hello world"] * 40)}, 400, "longer than the context")
        bad(s, "/v1/embeddings", {}, 400, "'input' is required")
        bad(s, "/v1/embeddings", {"input": "a", "encoding_format": "hex"}, 400, "encoding_format")
        bad(s, "/v1/embeddings", {"input": [{"x": 1}]}, 400, "input 0")
        st, again = s.json("POST", "/v1/embeddings", {"input": "hello world"})
        expect(st == 200 and again["data"][0]["embedding"] == v, "after the bad requests the server still serves")
        bad(s, "/v1/rerank", {"query": "a", "documents": ["b"]}, 501, "--reranking")
        bad(s, "/v1/chat/completions", {"messages": []}, 501, "completions")


def test_pooling_none():
    with Server("--embeddings", "--pooling", "none", "-c", "32", model=bert()) as s:
        bad(s, "/v1/embeddings", {"input": "hello world"}, 400, "pooling type 'none'")
        st, rows = s.json("POST", "/embeddings", {"input": "hello world"})
        expect(st == 200 and len(rows[0]["embedding"]) == 4, "/embeddings with pooling none: a row per token")
        st, ok = s.json("POST", "/embeddings", {"input": "the cat"})
        expect(st == 200, "still serving")


def test_rerank():
    docs = ["the cat sat on the mat", "paris is the capital of france", "hello world"]
    with Server("--reranking", "-c", "64", model=reranker()) as s:
        st, r = s.json("POST", "/v1/rerank", {"query": "what is the capital of france", "documents": docs,
                                              "top_n": 2, "return_documents": True})
        expect(st == 200 and len(r["results"]) == 2, "top_n 2: %d %r" % (st, r))
        scores = [x["relevance_score"] for x in r["results"]]
        expect(scores == sorted(scores, reverse=True), "sorted by relevance_score: %r" % scores)
        for x in r["results"]:
            expect(x["document"]["text"] == docs[x["index"]], "document text of index %d" % x["index"])
        expect(r["usage"]["prompt_tokens"] > 0 and r["model"], "usage and model: %r" % r)
        # the scores are tessera embed --pooling rank's, per document
        lines = "".join("what is the capital of france\t%s\n" % d for d in docs)
        cli = subprocess.run([BIN, "embed", "-m", reranker(), "--pooling", "rank", "-p", lines, "-t", "1"],
                             capture_output=True, text=True, timeout=60)
        want = [float(l.split(":")[1]) for l in cli.stdout.splitlines() if l.startswith("rerank score")]
        expect(len(want) == 3, "tessera embed --pooling rank: " + cli.stdout + cli.stderr)
        for x in r["results"]:
            expect(abs(x["relevance_score"] - want[x["index"]]) < 1e-3, "score of %d: %g, CLI %g" %
                   (x["index"], x["relevance_score"], want[x["index"]]))
        for path in ("/rerank", "/reranking"):
            st, r2 = s.json("POST", path, {"query": "what is the capital of france", "documents": docs})
            expect(st == 200 and len(r2["results"]) == 3, path + ": %r" % r2)
        bad(s, "/v1/rerank", {"query": "q"}, 400, "documents")
        bad(s, "/v1/rerank", {"query": "q", "documents": []}, 400, "documents")
        bad(s, "/v1/rerank", {"documents": ["d"]}, 400, "query")
        bad(s, "/v1/rerank", {"query": "q", "documents": ["d"], "top_n": -1}, 400, "top_n")
        bad(s, "/v1/embeddings", {"input": "x"}, 400, "reranker")
        st, r3 = s.json("POST", "/v1/rerank", {"query": "q", "documents": ["d"]})
        expect(st == 200, "still serving after the bad requests")


def test_plain_server():
    with Server() as s:
        bad(s, "/v1/embeddings", {"input": "x"}, 501, "--embeddings")
        bad(s, "/rerank", {"query": "x", "documents": ["y"]}, 501, "--reranking")


if __name__ == "__main__":
    if not os.path.exists(SYNTH):
        skip("tessera-synth not built: " + SYNTH)
    main([("embeddings", test_embeddings), ("pooling none", test_pooling_none), ("rerank", test_rerank),
          ("plain server", test_plain_server)])
