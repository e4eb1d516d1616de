"""A local HTTP server that speaks the OpenAI chat-completions wire format.

    with openai_standin(lambda body: "A summary [1].", script=["429"]) as server:
        client = ChatClient(ChatConfig(base_url=server.base_url, model="standin"))

It records every request body, can answer after a fixed delay, can hold its answers until a number of
requests are in flight together (`gather`) or until the test says so (`hold`), and plays a fault script
(see tests.support._http) before answering normally.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support._http import FaultScript, StandInHandler, StandInServer, serving

# The reply's text, or its content as a list of parts ([{"type": "text", "text": ...}]), as some servers send it.
Responder = Callable[[dict[str, Any]], str | list[dict[str, Any]]]

_ERRORS: dict[str, tuple[str, str]] = {
    "400": ("invalid_request_error", "This model's maximum context length was exceeded."),
    "401": ("invalid_request_error", "Incorrect API key provided."),
    "403": ("permission_error", "You are not allowed to use this model."),
    "404": ("invalid_request_error", "The model does not exist or you do not have access to it."),
    "429": ("rate_limit_error", "Rate limit reached for requests. Please try again shortly."),
    "500": ("server_error", "The server had an error while processing your request."),
    "502": ("server_error", "Bad gateway."),
    "503": ("server_error", "The engine is currently overloaded, please try again later."),
}


def default_responder(body: dict[str, Any]) -> str:
    """A deterministic reply that depends on the prompt and cites the first source."""
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()[:8]
    return f"Stand-in summary {digest} grounded in the abstracts [1]."


def _error(kind: str, message: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _words(text: str) -> int:
    return len(text.split())


@dataclass
class OpenAIStandIn:
    """What a test sees of the running server."""

    base_url: str
    script: FaultScript
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    peak_in_flight: int = 0
    """The most chat-completions requests this server was answering at the same moment."""

    @property
    def completions(self) -> int:
        """Requests that reached the chat-completions endpoint (including faulted ones)."""
        with self.lock:
            return len(self.requests)


@contextmanager
def openai_standin(
    responder: Responder | None = None,
    *,
    delay: float = 0.0,
    script: Iterable[str] | None = None,
    models: Sequence[str] | None = None,
    api_key: str | None = None,
    hang_s: float = 10.0,
    gather: int = 0,
    hold: threading.Event | None = None,
) -> Iterator[OpenAIStandIn]:
    """Run the stand-in for the duration of the block.

    responder: request JSON -> reply text, or content parts (default: a deterministic reply citing [1]).
    delay: seconds to wait before every normal answer (to measure concurrency).
    script: faults to play first, one per chat-completions request.
    models: if given, any other model name gets OpenAI's 404 "model not found".
    api_key: if given, any other bearer token gets a 401.
    hang_s: how long a "timeout" fault holds the request, and the most a held answer waits.
    gather: hold the first answers until this many requests wait together, then answer them and every later
        request at once (a concurrency proved by counting, not by racing a delay); if the group never forms,
        the held requests get a 503 after hang_s, which fails the test that expected it.
    hold: answers wait until this event is set (at most hang_s).
    """
    reply = responder or default_responder
    counter = itertools.count(1)
    waiting: list[threading.Event] = []  # answers held by `gather`, released together
    gathered = threading.Event()
    known_models = list(models) if models else ["standin-model"]

    class Handler(StandInHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                created = int(time.time())
                self.send_json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "created": created, "owned_by": "stand-in"}
                            for m in known_models
                        ],
                    },
                )
                return
            self.send_json(404, _error("invalid_request_error", f"Unknown path {self.path}"))

        def do_POST(self) -> None:
            raw = self.read_body()
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.send_json(404, _error("invalid_request_error", f"Unknown path {self.path}"))
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self.send_json(
                    400, _error("invalid_request_error", "We could not parse the JSON body of your request.")
                )
                return
            with state.lock:
                state.requests.append(body)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
            fault = state.script.next()
            if fault is not None:
                kind, message = _ERRORS.get(fault.partition(":")[0], ("server_error", "fault"))
                self.play_fault(fault, _error(kind, message), state.script)
                return
            if api_key is not None and self.headers.get("Authorization") != f"Bearer {api_key}":
                self.send_json(401, _error("invalid_request_error", "Incorrect API key provided.", "invalid_api_key"))
                return
            model = str(body.get("model", ""))
            if models and model not in models:
                self.send_json(
                    404,
                    _error("invalid_request_error", f"The model `{model}` does not exist.", "model_not_found"),
                )
                return
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                self.send_json(400, _error("invalid_request_error", "'messages' must be a non-empty array."))
                return
            released = threading.Event()
            with state.lock:
                state.in_flight += 1
                state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
                if gather and not gathered.is_set():
                    waiting.append(released)
                    if len(waiting) >= gather:
                        gathered.set()
                        for event in waiting:
                            event.set()
                        waiting.clear()
                else:
                    released.set()
            try:
                formed = released.wait(hang_s)
                held = hold.wait(hang_s) if hold is not None else True
                if not (formed and held):
                    with state.lock:
                        if released in waiting:
                            waiting.remove(released)
                    self.send_json(
                        503,
                        _error("server_error", f"held for {hang_s:g}s: no group of {gather} formed, or not released"),
                    )
                    return
                if delay:
                    time.sleep(delay)
                answer = reply(body)
            finally:
                with state.lock:
                    state.in_flight -= 1
            finish = "stop"
            max_tokens = body.get("max_tokens")
            if isinstance(answer, list):
                content: str | list[dict[str, Any]] = answer
                text = " ".join(str(part.get("text", "")) for part in answer)
            else:
                text = answer
                if isinstance(max_tokens, int) and _words(text) > max_tokens:
                    # Like a real server, stop mid-answer when the token budget runs out.
                    text, finish = " ".join(text.split()[:max_tokens]), "length"
                content = text
            prompt_tokens = sum(_words(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
            completion_tokens = _words(text)
            self.send_json(
                200,
                {
                    "id": f"chatcmpl-standin-{next(counter)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "system_fingerprint": "fp_standin",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "logprobs": None,
                            "finish_reason": finish,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )

    server = StandInServer(Handler, hang_s=hang_s)
    state = OpenAIStandIn(base_url=f"http://127.0.0.1:{server.server_port}/v1", script=FaultScript(script))
    with serving(server):
        yield state
