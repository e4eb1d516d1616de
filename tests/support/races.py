"""Races caused, not reasoned about: calls released at the same moment, each on its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def at_once(*calls: Callable[[], Any], timeout: float = 30.0) -> list[Any]:
    """Run `calls` in threads that a barrier releases together; each thread's database connection is closed
    when it ends. Returns, in the order of `calls`, what each returned or the exception it raised (for the
    test to assert on: a race that raises is a result too). A thread still running after `timeout` is
    reported as a TimeoutError, not waited for."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [TimeoutError(f"still running after {timeout:g} s")] * len(calls)

    def run(slot: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[slot] = call()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            results[slot] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(slot, call)) for slot, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return results
