"""Ask a running `routerag serve` through the OpenAI Python SDK.

    ROUTERAG_URL=http://127.0.0.1:8700 ROUTERAG_API_KEY=... python openai_sdk.py "Who was Teutberga married to?"

The model name picks the strategy (GET /v1/models lists them); the run's full trace comes back
under `routerag`. ROUTERAG_API_KEY is needed only when the service was started with a key."""

import os
import sys

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("ROUTERAG_URL", "http://127.0.0.1:8700") + "/v1",
                api_key=os.environ.get("ROUTERAG_API_KEY") or "no-key")
question = sys.argv[1] if len(sys.argv) > 1 else "When did Lothair II's mother die?"
completion = client.chat.completions.create(
    model=os.environ.get("ROUTERAG_MODEL", "vanilla"),
    messages=[{"role": "user", "content": question}],
    # the strategy's params and uploaded sources, as /v1/ask takes them, go in the `routerag` field:
    # extra_body={"routerag": {"params": {"k": 3}, "sources": []}},
)
trace = completion.model_extra["routerag"]
print(completion.choices[0].message.content)
print(f"({len(trace['steps'])} steps, {completion.usage.total_tokens} tokens)", file=sys.stderr)
