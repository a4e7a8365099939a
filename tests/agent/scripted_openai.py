"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol, whose
"model" replies from a script: per task (found in the prompt's ``Task NAME:``), a list of
replies, the n-th answering the request that holds n-1 assistant messages (the last one
repeats once the script runs out). The official ``openai`` client talks to it as to any
endpoint; every request (and its headers, names in lower case) is kept for assertions."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TASK = re.compile(r"^Task (\S+):", re.M)


@dataclass
class Reply:
    """One scripted reply: text and tool calls ``(name, arguments)``; ``arguments`` a dict
    (sent as JSON) or a string (sent as is, malformed or not). ``status`` other than 200
    answers with that HTTP error instead."""

    content: str = ""
    calls: Sequence[tuple[str, Any]] = ()
    status: int = 200


def call(name: str, **arguments: Any) -> tuple[str, Any]:
    return (name, arguments)


@dataclass
class ScriptedOpenAI:
    scripts: dict[str, list[Reply]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner._lock:
                    owner.requests.append(body)
                    owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, answer = owner.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}"}}
        messages = body["messages"]
        found = _TASK.search(next(m["content"] for m in messages if m["role"] == "user"))
        script = self.scripts[found.group(1)] if found else []
        turn = sum(m["role"] == "assistant" for m in messages)
        reply = script[min(turn, len(script) - 1)] if script else Reply("nothing to say")
        if reply.status != 200:
            return reply.status, {"error": {"message": "scripted failure", "type": "server_error"}}
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.calls:
            calls = []
            for name, arguments in reply.calls:
                with self._lock:
                    self._counter += 1
                    n = self._counter
                text = arguments if isinstance(arguments, str) else json.dumps(arguments)
                calls.append(
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": text},
                    }
                )
            message["tool_calls"] = calls
        return 200, {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
