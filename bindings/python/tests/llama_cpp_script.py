"""A script written for llama-cpp-python, unchanged but for its import line
(test_llama_compat.py runs it against tessera.llama_cpp and checks what it
prints). Usage: llama_cpp_script.py MODEL.gguf"""
import json
import sys

from tessera.llama_cpp import Llama  # was: from llama_cpp import Llama

MODEL = sys.argv[1]

llm = Llama(model_path=MODEL, n_ctx=1024, n_threads=2, seed=1337, logits_all=True, verbose=False)

# completion with echo and logprobs
out = llm("The capital of France is", max_tokens=12, temperature=0.0, echo=True, logprobs=3, stop=["\n"])
choice = out["choices"][0]
print(json.dumps({"step": "completion", "id": out["id"], "object": out["object"], "text": choice["text"],
                  "finish_reason": choice["finish_reason"], "usage": out["usage"],
                  "tokens": choice["logprobs"]["tokens"], "text_offset": choice["logprobs"]["text_offset"],
                  "token_logprobs": choice["logprobs"]["token_logprobs"],
                  "top_logprobs": choice["logprobs"]["top_logprobs"]}))

# chat with a tool
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
chat = llm.create_chat_completion(
    messages=[{"role": "system", "content": "You call tools."},
              {"role": "user", "content": "What is the weather like in Paris?"}],
    tools=tools, tool_choice={"type": "function", "function": {"name": "get_weather"}},
    temperature=0.0, max_tokens=64)
msg = chat["choices"][0]["message"]
call = msg["tool_calls"][0]
print(json.dumps({"step": "tool", "id": chat["id"], "object": chat["object"], "name": call["function"]["name"],
                  "arguments": json.loads(call["function"]["arguments"]),
                  "finish_reason": chat["choices"][0]["finish_reason"]}))

# streaming: a completion, then a chat
pieces = []
for chunk in llm("Once upon a time", max_tokens=16, temperature=0.0, stream=True):
    pieces.append(chunk["choices"][0]["text"])
    last = chunk
print(json.dumps({"step": "stream", "object": last["object"], "n_chunks": len(pieces), "text": "".join(pieces),
                  "finish_reason": last["choices"][0]["finish_reason"]}))

deltas = []
for chunk in llm.create_chat_completion(messages=[{"role": "user", "content": "Say hello."}],
                                        stream=True, temperature=0.0, max_tokens=16):
    deltas.append(chunk["choices"][0]["delta"])
    last = chunk
print(json.dumps({"step": "chat_stream", "object": last["object"], "first": deltas[0],
                  "text": "".join(d.get("content", "") for d in deltas),
                  "finish_reason": last["choices"][0]["finish_reason"]}))

# embeddings
emb = Llama(model_path=MODEL, embedding=True, n_ctx=512, verbose=False)
res = emb.create_embedding(["Hello world", "Goodbye"])
vec = emb.embed("Hello world")
print(json.dumps({"step": "embedding", "object": res["object"], "n": len(res["data"]),
                  "usage": res["usage"], "rows": len(vec), "dim": len(vec[0]) if vec and isinstance(vec[0], list) else len(vec)}))

# tokenize round trip
text = "Hello, world! Ünïcödé ✓".encode("utf-8")
tokens = llm.tokenize(text, add_bos=False)
print(json.dumps({"step": "tokenize", "n_tokens": len(tokens), "round_trip": llm.detokenize(tokens) == text,
                  "n_vocab": llm.n_vocab(), "n_ctx": llm.n_ctx(), "bos": llm.token_bos(), "eos": llm.token_eos()}))
