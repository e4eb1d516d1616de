"""A reply's body stream that runs a check on each chunk before handing it on, for httpx and httpx2 clients
(the OpenAI SDK's): the response hooks of kernel/response_cap.py and kernel/reply_deadline.py wrap a reply's
stream in it. A check stops the read by raising; the client closes the reply on any error while reading it,
which closes this stream and with it the connection, so the rest of the body is never read. Plain Python.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["guarded_stream"]


class _GuardedChunks:
    def __init__(self, chunks: Iterable[bytes], close: Callable[[], None], check: Callable[[bytes], None]) -> None:
        self._chunks = chunks
        self._close = close
        self._check = check

    def __iter__(self) -> Iterator[bytes]:
        check = self._check
        for chunk in self._chunks:
            check(chunk)
            yield chunk

    def close(self) -> None:
        self._close()


@functools.cache
def _stream_class(http: Any) -> Any:
    # The client checks that a reply's stream is its own library's SyncByteStream: one subclass per library.
    return type("GuardedStream", (_GuardedChunks, http.SyncByteStream), {})


def guarded_stream(
    http: Any, chunks: Iterable[bytes], close: Callable[[], None], check: Callable[[bytes], None]
) -> Any:
    """A stream for a reply of an `http` (httpx or httpx2) client: `chunks`, each passed to `check` first, and
    `close` closing what they are read from."""
    return _stream_class(http)(chunks, close, check)
