"""A cap on the bytes the platform reads from an external service's HTTP reply (model servers, OpenAlex).

An httpx client reads a reply's whole body into memory; a misbehaving or hostile server answering with
hundreds of megabytes, or with a body that never ends, would take a Celery worker (and every annotator's
work on it) down with it. `response_cap` is a response event hook that refuses a reply whose Content-Length
is over the cap before its body is read, and wraps the body's stream so that reading stops, and the
connection is closed, at the first chunk past the cap. A compressed reply is counted as it decodes: a few
megabytes of gzip can decode to gigabytes. Plain Python: works with httpx and with httpx2 (the OpenAI SDK's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel.guarded_stream import guarded_stream

__all__ = ["ResponseTooLarge", "response_cap", "size_text"]


class ResponseTooLarge(Exception):
    """A reply was larger than `limit` bytes; `declared` is its Content-Length when that said so up front."""

    def __init__(self, limit: int, *, declared: int | None = None) -> None:
        self.limit = limit
        self.declared = declared
        said = f" (its Content-Length says {size_text(declared)})" if declared is not None else ""
        super().__init__(f"reply larger than {size_text(limit)}{said}")

    @property
    def larger_than(self) -> str:
        """How a failure reason says it: ``larger than 8 MiB``, with ``; its Content-Length says 1 GiB`` when
        the header told the size up front."""
        said = f"; its Content-Length says {size_text(self.declared)}" if self.declared is not None else ""
        return f"larger than {size_text(self.limit)}{said}"


def size_text(n: int) -> str:
    """A byte count as a person writes it: 8 MiB, 64 KiB, 1000 bytes, and 41.3 KiB (42290 bytes) when it is not
    a whole number of the unit (a cap set in bytes is then recognisable)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            if n % size == 0:
                return f"{n // size} {unit}"
            return f"{n / size:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def response_cap(http: Any, limit: int) -> Callable[[Any], None]:
    """A response event hook for an `http` (the httpx or httpx2 module) client that reads at most `limit` bytes
    of each reply's body and raises ResponseTooLarge past them:
    ``http.Client(event_hooks={"response": [response_cap(http, limit)]})``. It runs before the client reads the
    body, so it costs one header look-up and one wrapper per reply."""
    if limit < 1:
        raise ValueError(f"a response cap must be at least 1 byte, not {limit}")

    def cap(response: Any) -> None:
        headers = response.headers
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ResponseTooLarge(limit, declared=int(declared))
        received = 0

        def within(chunk: bytes) -> None:
            # The chunk that passes the cap raises instead of being handed on.
            nonlocal received
            received += len(chunk)
            if received > limit:
                raise ResponseTooLarge(limit)

        encoding = headers.get("content-encoding")
        if encoding and encoding.strip().lower() != "identity":
            # Decoded here, with the library's own decoders, so that the count is of what the body becomes.
            encoded = type(response)(
                response.status_code, headers={"content-encoding": encoding}, stream=response.stream
            )
            del headers["content-encoding"]
            headers.pop("content-length", None)
            response.stream = guarded_stream(http, encoded.iter_bytes(), encoded.close, within)
        else:
            response.stream = guarded_stream(http, response.stream, response.stream.close, within)

    return cap
