"""How many calls a model server gets at once: the per-server semaphore, and fan-out up to a limit."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["map_concurrently", "semaphore_for"]

T = TypeVar("T")
R = TypeVar("R")

_semaphores: dict[str, threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


def semaphore_for(base_url: str, limit: int) -> threading.BoundedSemaphore:
    """One semaphore per server per process, so that all clients of a server share its limit."""
    key = base_url.rstrip("/")
    with _semaphores_lock:
        sem = _semaphores.get(key)
        if sem is None:
            sem = threading.BoundedSemaphore(max(1, limit))
            _semaphores[key] = sem
        return sem


def map_concurrently(
    call: Callable[[T], R],
    items: Sequence[T],
    *,
    concurrency: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[R]:
    """`call` on every item, up to `concurrency` at a time; results in the order of `items`.

    With one worker (or one item) the calls run in this thread. `on_done(done, total)` is
    called after each result, in order.
    """
    workers = max(1, min(concurrency, len(items)))
    results: list[R] = []
    if workers == 1:
        for item in items:
            results.append(call(item))
            if on_done is not None:
                on_done(len(results), len(items))
        return results
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(call, items):
            results.append(result)
            if on_done is not None:
                on_done(len(results), len(items))
    return results
