"""A time limit on a whole HTTP reply from an external service (model servers, OpenAlex), not only on each read.

An httpx client's time-out bounds each wait (connecting, each read of the body), so a server that trickles its
reply, a byte every few seconds, keeps a call going for as long as it likes. Under Celery's prefork pool a task's
soft time limit ends such a call; the threads pool (the annotator worker's) enforces no time limit at all, so
there the call's own time-out is the only bound. `reply_deadline` gives every request, as it is sent, a deadline
of its read time-out, and fails the reply with the library's ReadTimeout at the first chunk of its body read past
it: a reply takes at most its time-out, or one more read time-out when the server stalls across the deadline.
Plain Python: works with httpx and with httpx2 (the OpenAI SDK's).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["reply_deadline"]

_KEY = "satisfy_reply_deadline"


class _TimedChunks:
    """The body's chunks; the first one read past the deadline raises the library's ReadTimeout."""

    def __init__(self, chunks: Iterable[bytes], close: Callable[[], None], deadline: float, error: Any) -> None:
        self._chunks = chunks
        self._close = close
        self._deadline = deadline
        self._error = error

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            if time.monotonic() > self._deadline:
                # The client closes the reply on an error while reading it, and with it the connection.
                raise self._error()
            yield chunk

    def close(self) -> None:
        self._close()


@functools.cache
def _stream_class(http: Any) -> Any:
    # The client checks that a reply's stream is its own library's SyncByteStream: one subclass per library.
    return type("TimedStream", (_TimedChunks, http.SyncByteStream), {})


def reply_deadline(http: Any) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    """The (request, response) event hooks for an `http` (httpx or httpx2) client that bound each whole reply
    by the request's read time-out, counted from when the request is sent:
    ``stamp, check = reply_deadline(http); http.Client(event_hooks={"request": [stamp], "response": [check]})``.
    A request without a read time-out is left unbounded, as the client would leave it."""
    stream_class = _stream_class(http)

    def stamp(request: Any) -> None:
        read = (request.extensions.get("timeout") or {}).get("read")
        if read is not None:
            request.extensions[_KEY] = time.monotonic() + float(read)

    def check(response: Any) -> None:
        request = response.request
        deadline = request.extensions.get(_KEY)
        if deadline is None:
            return

        def error() -> Exception:
            limit = (request.extensions.get("timeout") or {}).get("read")
            timeout: Exception = http.ReadTimeout(
                f"the whole reply took longer than its time-out ({limit:g} s)", request=request
            )
            return timeout

        if time.monotonic() > deadline:
            raise error()
        response.stream = stream_class(response.stream, response.stream.close, deadline, error)

    return stamp, check
