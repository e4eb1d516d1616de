"""Lanes on one model server (issue 30): judges and stress-test rewrites ("research") hold at most their share of
a server's slots and give way while an annotator's summary waits for one. Measured before: one G-Eval run took
the server's slots and annotators' median wait went from 6.0 s to 27.5 s.

Both limiters: the per-process one and the one shared through Redis (a prefix of each test's own)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from modelserver import ChatClient, ChatConfig
from modelserver.limits import LimitTimeout, LocalLimiter, RedisLeaseLimiter
from tests.modelserver.test_cluster_limit import _redis_url
from tests.support.openai_standin import openai_standin

SERVER = "http://model.test/v1"


@pytest.fixture(params=["local", "redis"])
def limiter(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "local":
        yield LocalLimiter(research_share=0.5)
    else:
        yield RedisLeaseLimiter(_redis_url(), prefix=f"test-lanes:{uuid.uuid4().hex}", research_share=0.5)


def _hold(limiter: Any, stack: ExitStack, lane: str, limit: int = 4) -> None:
    stack.enter_context(limiter.acquire([SERVER], limit, timeout=1.0, lane=lane))


def test_research_holds_at_most_its_share_and_annotators_the_rest(limiter: Any) -> None:
    with ExitStack() as stack:
        _hold(limiter, stack, "research")
        _hold(limiter, stack, "research")
        with pytest.raises(LimitTimeout):  # half of 4 slots: a third judge call waits though 2 are free
            _hold(limiter, stack, "research")
        _hold(limiter, stack, "annotator")
        _hold(limiter, stack, "annotator")  # annotators take what research may not
        with pytest.raises(LimitTimeout):  # and the server's limit still holds for everyone
            _hold(limiter, stack, "annotator")


def test_annotators_may_take_every_slot(limiter: Any) -> None:
    with ExitStack() as stack:
        for _ in range(4):
            _hold(limiter, stack, "annotator")
        with pytest.raises(LimitTimeout):
            _hold(limiter, stack, "research")


def _waiter(limiter: Any, lane: str, limit: int, got: list[str], release: threading.Event) -> threading.Thread:
    def run() -> None:
        with limiter.acquire([SERVER], limit, timeout=30.0, lane=lane):
            got.append(lane)
            release.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20  # bounds a hung test; not what is asserted
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_research_gives_way_to_a_waiting_annotator(limiter: Any) -> None:
    """A full server of 2 slots (research may hold both: share 1.0 of this limit's rounding is tested above).
    A judge call waits first, then an annotator's; when a slot frees, the annotator's call takes it though the
    judge has waited longer, and the judge gets the next one."""
    limiter.research_share = 1.0
    got: list[str] = []
    free_judge, free_annotator = threading.Event(), threading.Event()
    with ExitStack() as stack:
        first = threading.Event()
        holder = _waiter(limiter, "research", 2, got, first)
        _hold(limiter, stack, "annotator", limit=2)
        _until(lambda: got == ["research"], "the first judge call holds a slot")

        judge = _waiter(limiter, "research", 2, got, free_judge)
        time.sleep(0.2)  # the judge call is waiting
        annotator = _waiter(limiter, "annotator", 2, got, free_annotator)
        if isinstance(limiter, RedisLeaseLimiter):
            _until(lambda: limiter.waiting(SERVER) == 1, "the annotator's call is marked waiting")
        else:
            time.sleep(0.2)

        first.set()  # a slot frees
        holder.join(10)
        _until(lambda: len(got) == 2, "someone took the freed slot")
        assert got == ["research", "annotator"]
        time.sleep(0.3)
        assert got == ["research", "annotator"]  # the judge still waits: the server is full again

    # The test's own annotator slot is given back (ExitStack): now the judge goes on.
    _until(lambda: got == ["research", "annotator", "research"], "the judge call runs once a slot is free")
    free_judge.set()
    free_annotator.set()
    judge.join(10)
    annotator.join(10)


def test_research_measures_the_server_by_the_annotators_limit(limiter: Any) -> None:
    """The field test (issue 30): summaries declare the server's 16 slots; a judge whose client was built with the
    default concurrency of 4 found four summaries in flight and waited for good. Measured by the server's size it
    takes its share (8) beside them, and no more; the server's size still holds for everyone."""
    with ExitStack() as stack:
        for _ in range(4):
            _hold(limiter, stack, "annotator", limit=16)
        for _ in range(8):
            _hold(limiter, stack, "research", limit=4)
        with pytest.raises(LimitTimeout):  # half of 16
            _hold(limiter, stack, "research", limit=4)
        for _ in range(4):
            _hold(limiter, stack, "annotator", limit=16)
        with pytest.raises(LimitTimeout):  # 16 in flight
            _hold(limiter, stack, "annotator", limit=16)


def test_research_on_a_server_no_annotator_uses_keeps_its_own_limit(limiter: Any) -> None:
    """A judge server of its own (JUDGE_BASE_URL): no summary declares its size, so the judge's own limit is it."""
    with ExitStack() as stack:
        for _ in range(2):
            _hold(limiter, stack, "research", limit=4)
        with pytest.raises(LimitTimeout):
            _hold(limiter, stack, "research", limit=4)


def test_an_unknown_lane_is_refused(limiter: Any) -> None:
    with pytest.raises(ValueError, match="unknown model-server lane 'judge'"):
        with limiter.acquire([SERVER], 4, timeout=0.1, lane="judge"):
            pass


def test_a_judge_run_at_full_speed_leaves_annotators_their_slots() -> None:
    """Through the client, as a scoring run and the generation queue use it: 12 judge threads calling without
    pause on a server of 4 slots; annotators' summaries asked meanwhile start at once (research holds 2 slots and
    the annotators the other 2), so each takes about one model answer, not a turn in a queue of judge calls
    (without lanes, 14 callers on 4 slots: a summary waits about 3 answers' time for its turn)."""
    limiter = LocalLimiter(research_share=0.5)
    with openai_standin(delay=1.0) as server:
        stop = threading.Event()

        def judge() -> None:
            config = ChatConfig(base_url=server.base_url, model="standin-model", concurrency=4, lane="research")
            with ChatClient(config, cache=None, limiter=limiter) as client:
                number = 0
                while not stop.is_set():
                    number += 1
                    client.complete([{"role": "user", "content": f"judge {threading.get_ident()} {number}"}])

        judges = [threading.Thread(target=judge, daemon=True) for _ in range(12)]
        for thread in judges:
            thread.start()
        # The run under way: every judge thread started, two rounds of judge answers given.
        _until(lambda: server.completions >= 6, "the judges are at work")
        assert limiter.in_flight(server.base_url) == 2  # their share, not the server's 4 slots
        waits: list[float] = []

        def summary(number: int) -> None:
            config = ChatConfig(base_url=server.base_url, model="standin-model", concurrency=4)
            with ChatClient(config, cache=None, limiter=limiter) as client:
                started = time.perf_counter()
                client.complete([{"role": "user", "content": f"summary {number}"}])
                waits.append(time.perf_counter() - started)

        for round_ in range(3):
            annotators = [threading.Thread(target=summary, args=(round_ * 2 + i,)) for i in range(2)]
            for thread in annotators:
                thread.start()
            for thread in annotators:
                thread.join(30)
        stop.set()
        for thread in judges:
            thread.join(30)
    assert len(waits) == 6
    # One answer is 1 s; 1.6 s leaves room for a loaded host, and none for waiting out a judge call.
    assert max(waits) < 1.6, waits
