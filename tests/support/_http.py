"""What the stand-in servers share: a threaded HTTP server on 127.0.0.1 and a fault script.

A fault script is a list of faults played one per request, in order, before normal answers:
"429", "500", "502", "503", "400", "401", "403", "404" (that status with a JSON error body; "429:N"
says Retry-After: N seconds, "429" Retry-After: 0),
"timeout" (hold the request until the client gives up), "malformed" (200 with a cut-off JSON
body), "drop" (close the connection without answering),
"flood" (200 with a chunked body, no Content-Length, that never ends: written until the client hangs up),
"announced" (200 whose Content-Length says 1 GiB; the body is then written until the client hangs up),
"bomb" (200 with a gzip body of 64 KiB that decodes to 64 MiB of spaces inside a JSON object),
"badgzip" (200 that says Content-Encoding: gzip over a body that is not gzip),
"trickle" (200 whose body, 1 KiB of JSON, comes a byte every TRICKLE_EVERY_S: every read waits well under any
time-out, and the whole takes minutes, until the client hangs up or hang_s passes).
What a flood, an announced or a trickled body saw is kept in the script: `streamed` (body bytes the stand-in wrote)
and `hung_up` (set when the client closed the connection before the body ended).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KNOWN_FAULTS = frozenset(
    {
        "429",
        "500",
        "502",
        "503",
        "400",
        "401",
        "403",
        "404",
        "timeout",
        "malformed",
        "drop",
        "flood",
        "announced",
        "bomb",
        "badgzip",
        "trickle",
    }
)
TRICKLE_EVERY_S = 0.2
# Where a flood stops if the client never hangs up (a cap that does not work): far past any cap a test sets.
FLOOD_MAX_BYTES = 256 * 1024 * 1024
_FLOOD_CHUNK = b" " * (64 * 1024)
_BOMB_BYTES = 64 << 20


@functools.cache
def _gzip_bomb() -> bytes:
    """A JSON object padded with 64 MiB of spaces, gzipped (about 64 KiB), made once per test process."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as zipped:
        zipped.write(b'{"padding": "')
        block = b" " * (1 << 20)
        for _ in range(_BOMB_BYTES // len(block)):
            zipped.write(block)
        zipped.write(b'"}')
    return out.getvalue()


class FaultScript:
    """A thread-safe queue of faults; each request takes the next one, if any."""

    def __init__(self, faults: Iterable[str] | None) -> None:
        self._faults = [str(f) for f in (faults or [])]
        unknown = [f for f in self._faults if f not in KNOWN_FAULTS and not re.fullmatch(r"429:\d+", f)]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {sorted(KNOWN_FAULTS)}")
        self._lock = threading.Lock()
        self.played: list[str] = []
        self.streamed = 0
        self.hung_up = threading.Event()

    def next(self) -> str | None:
        with self._lock:
            if not self._faults:
                return None
            fault = self._faults.pop(0)
            self.played.append(fault)
            return fault

    def extend(self, faults: Iterable[str]) -> None:
        with self._lock:
            self._faults.extend(faults)


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, hang_s: float) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.closing = threading.Event()
        self.hang_s = hang_s

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its timeout, a test's dropped client) before the answer was written is what a
        # real server sees too; anything else is the stand-in's own fault and keeps socketserver's traceback.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class StandInHandler(BaseHTTPRequestHandler):
    server: StandInServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def send_json(self, status: int, payload: object, *, headers: dict[str, str] | None = None) -> None:
        self.send_body(status, json.dumps(payload).encode("utf-8"), headers=headers)

    def send_body(
        self, status: int, body: bytes, *, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def play_fault(self, fault: str, error_body: dict[str, object], script: FaultScript) -> None:
        """Answer with `fault`; the caller has consumed it from `script`."""
        if fault == "timeout":
            # Hold the request until the client gives up (or the stand-in shuts down), then hang up.
            self.server.closing.wait(self.server.hang_s)
            self.close_connection = True
            return
        if fault == "drop":
            self.close_connection = True
            return
        if fault == "trickle":
            self.trickle_until_hang_up(script)
            return
        if fault in ("flood", "announced"):
            self.stream_until_hang_up(script, chunked=fault == "flood")
            return
        if fault == "bomb":
            self.send_body(200, _gzip_bomb(), headers={"Content-Encoding": "gzip"})
            return
        if fault == "badgzip":
            self.send_body(200, b'{"results": []}', headers={"Content-Encoding": "gzip"})
            return
        if fault == "malformed":
            self.send_body(200, b'{"id": "chatcmpl-cut", "object": "chat.completion", "choices": [{"ind')
            return
        # "429" asks to come back at once; "429:40" says Retry-After: 40.
        code, _, wait = fault.partition(":")
        status = int(code)
        headers = {"Retry-After": wait or "0"} if status == 429 else None
        self.send_json(status, error_body, headers=headers)

    def stream_until_hang_up(self, script: FaultScript, *, chunked: bool) -> None:
        """A 200 whose body is written until the client closes the connection (or FLOOD_MAX_BYTES)."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        head = b'{"id": "flood", "padding": "'
        frame = (f"{len(_FLOOD_CHUNK):x}\r\n".encode() + _FLOOD_CHUNK + b"\r\n") if chunked else _FLOOD_CHUNK
        try:
            self.wfile.write((f"{len(head):x}\r\n".encode() + head + b"\r\n") if chunked else head)
            while script.streamed < FLOOD_MAX_BYTES and not self.server.closing.is_set():
                self.wfile.write(frame)
                self.wfile.flush()
                script.streamed += len(_FLOOD_CHUNK)
        except OSError:  # BrokenPipeError, ConnectionResetError: the client hung up mid-body
            script.hung_up.set()

    def trickle_until_hang_up(self, script: FaultScript) -> None:
        """A 200 whose JSON body is written a byte at a time, TRICKLE_EVERY_S apart, for at most hang_s."""
        self.close_connection = True
        body = b'{"id": "trickle", "padding": "' + b" " * 1000 + b'"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for i in range(len(body)):
                if self.server.closing.wait(TRICKLE_EVERY_S if i else 0) or i * TRICKLE_EVERY_S > self.server.hang_s:
                    return
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                script.streamed += 1
        except OSError:  # the client hung up mid-body
            script.hung_up.set()

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


@contextmanager
def serving(server: StandInServer) -> Iterator[StandInServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="stand-in", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
