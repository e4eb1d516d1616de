"""The fan-out, message and truncation helpers that judges, rewrites and generation share."""

from __future__ import annotations

import threading
import time

from modelserver import ChatResult, chat_messages, map_concurrently


def test_map_concurrently_keeps_order_and_reports_progress_in_order() -> None:
    done: list[tuple[int, int]] = []

    def slow_square(n: int) -> int:
        time.sleep(0.01 * (5 - n))  # later items finish first
        return n * n

    assert map_concurrently(slow_square, [1, 2, 3, 4], concurrency=4, on_done=lambda d, t: done.append((d, t))) == [
        1,
        4,
        9,
        16,
    ]
    assert done == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_map_concurrently_runs_up_to_the_limit_at_once() -> None:
    lock = threading.Lock()
    together = threading.Barrier(3, timeout=10)  # breaks unless three calls are in flight at once
    running = peak = 0

    def call(_: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        together.wait()
        with lock:
            running -= 1

    map_concurrently(call, list(range(6)), concurrency=3)
    assert peak == 3


def test_one_worker_runs_in_the_calling_thread_and_no_items_is_no_calls() -> None:
    threads = map_concurrently(lambda _: threading.get_ident(), [1, 2], concurrency=1)
    assert threads == [threading.get_ident()] * 2
    assert map_concurrently(lambda n: n, [], concurrency=4) == []


def test_chat_messages_with_and_without_a_system_message() -> None:
    assert chat_messages("hi", system="be brief") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert chat_messages("hi") == [{"role": "user", "content": "hi"}]


def test_a_reply_stopped_at_max_tokens_is_truncated() -> None:
    def result(finish: str | None) -> ChatResult:
        return ChatResult(text="", raw={}, usage={}, latency_s=0.0, finish_reason=finish, model="m")

    assert result("length").truncated
    assert not result("stop").truncated
    assert not result(None).truncated
