"""The tasks' backoff between attempts (annotation/tasks.py): issue 30 found a retry could come at once (full
jitter drew from 0), asking a database or broker that had just gone away again in the same instant."""

from __future__ import annotations

from annotation.tasks import backoff
from kernel.backends import BackendError


def test_a_retry_never_comes_at_once_and_waits_longer_each_time() -> None:
    for retries, (least, most) in enumerate([(2.5, 5.0), (5.0, 10.0), (10.0, 20.0)]):
        delays = [backoff(retries) for _ in range(2000)]
        assert least <= min(delays) and max(delays) <= most, (retries, min(delays), max(delays))


def test_a_servers_retry_after_is_still_waited_for() -> None:
    asked = BackendError("429", transient=True, retry_after=40)
    assert all(40 <= backoff(0, asked) <= 41 for _ in range(200))
