"""The issue's proof, run in a fresh venv with only the wheel installed:
stream an answer from SmolLM2-135M-Instruct, then print a JSON-schema answer
(and the plugin folder the devices came from, for the test to check)."""
import json
import sys

import tessera

model = tessera.Model(sys.argv[1], n_ctx=1024)
print("plugins:", json.dumps(sorted({d["plugin"] for d in tessera.devices()})))
for chunk in model.chat([{"role": "user", "content": "What is the capital of France?"}],
                        stream=True, max_tokens=32, temperature=0):
    print(chunk["choices"][0]["delta"].get("content", ""), end="", flush=True)
print()
schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                           "country": {"type": "string", "maxLength": 20}},
          "required": ["city", "country"], "additionalProperties": False}
reply = model.chat([{"role": "user", "content": "Which city is the capital of France?"}],
                   response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
                   max_tokens=48, temperature=0)
print("json:", json.dumps(json.loads(reply["choices"][0]["message"]["content"])))
