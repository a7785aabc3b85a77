"""A bare openai-SDK loop: the requests of a verifier run, replayed with nothing else.

What a user would write without the verifier: ``openai.OpenAI(...)`` and a thread pool of
``--concurrency`` sending every request of a run's transcript, in the order the run started
them, as ``client.chat.completions.create`` does (``client.post`` with the SDK's answer types,
so that a malformed body is sent as it is rather than refused by the SDK's argument checks),
each answer read to its end (a stream iterated, a body parsed into the SDK's types) and
dropped. No grading, no transcript, no retries. It imports the openai SDK and the
standard library only, so its process costs what the SDK costs.

``efficiency.py`` runs it as a process of its own, after each verifier run, against the same
vendor, and puts its wall time and CPU beside the verifier's. Each input line is one request:
``{"method", "url", "stream", "body"}`` as the transcript recorded it (a malformed request's
body as ``{"raw": TEXT, "content_type": TYPE}``). It prints one JSON object: the requests sent,
the answers that were errors, and the seconds from the SDK's import to the last answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

started = time.perf_counter()

import openai  # noqa: E402 (its import is part of what is measured)
from openai.types.chat import ChatCompletion, ChatCompletionChunk  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requests", help="a JSONL file of requests (see the module docstring)")
    parser.add_argument("--base-url", required=True, help="the endpoint's /v1 URL")
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args(argv)
    with open(args.requests, encoding="utf-8") as lines:
        requests = [json.loads(line) for line in lines if line.strip()]
    client = openai.OpenAI(api_key="bare-loop", base_url=args.base_url, max_retries=0)

    def send(request: dict[str, Any]) -> bool:
        """One request, its answer read whole; False when it failed."""
        body = request["body"]
        try:
            if request["method"] == "GET":
                client.get(request["url"], cast_to=object)
            elif not request["url"].endswith("/chat/completions"):
                client.post(request["url"], body=body, cast_to=object)
            elif "raw" in body and "messages" not in body:
                client.post(
                    "/chat/completions",
                    content=body["raw"].encode(),
                    options={"headers": {"Content-Type": body["content_type"]}},
                    cast_to=ChatCompletion,
                )
            else:
                # What ``client.chat.completions.create`` sends and reads, without its
                # argument checks (a malformed request's body is sent as it is).
                answer = client.post(
                    "/chat/completions",
                    body=body,
                    cast_to=ChatCompletion,
                    stream=request["stream"],
                    stream_cls=openai.Stream[ChatCompletionChunk],
                )
                if request["stream"]:
                    for _ in answer:
                        pass
        except openai.OpenAIError:
            return False
        return True

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        outcomes = list(pool.map(send, requests))
    print(
        json.dumps(
            {
                "requests": len(requests),
                "errors": outcomes.count(False),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
