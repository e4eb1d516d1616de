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

import time
from collections.abc import Callable
from typing import Any

from kernel.guarded_stream import guarded_stream

__all__ = ["reply_deadline"]

_KEY = "satisfy_reply_deadline"


def reply_deadline(http: Any) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
    """The (request, response) event hooks for an `http` (httpx or httpx2) client that bound each whole reply
    by the request's read time-out, counted from when the request is sent:
    ``stamp, check = reply_deadline(http); http.Client(event_hooks={"request": [stamp], "response": [check]})``.
    A request without a read time-out is left unbounded, as the client would leave it."""

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

        def in_time(chunk: bytes) -> None:
            # The first chunk of the body read past the deadline ends the reply.
            if time.monotonic() > deadline:
                raise error()

        response.stream = guarded_stream(http, response.stream, response.stream.close, in_time)

    return stamp, check
