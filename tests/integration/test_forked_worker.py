"""The tests' Celery workers are forked from a zygote that imported the libraries ahead (tests/support/zygote.py);
such a worker is the one a fresh start gives: the same start-up in its log, a pool of its own in a session of
its own, the same work done, and killpg ends it whole."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest

from annotation.models import Query
from tests.annotation.factories import StudyFactory
from tests.integration.test_worker import ask, describe, settled
from tests.integration.worker import CeleryWorker, WorkerPool, wait_for
from tests.support.zygote import Forked

pytestmark = [pytest.mark.worker, pytest.mark.timeout(120)]


def _start_up(worker: CeleryWorker) -> list[str]:
    """The log up to " ready.", without what differs between any two starts (times, names, addresses, pids)
    or between two ways of naming the same interpreter (the virtual environment's path)."""
    log = worker.log().split(" ready.", 1)[0]
    log = log.replace(worker.name, "<name>")
    log = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d+)?", "<time>", log)
    log = re.sub(r"0x[0-9a-f]+", "<address>", log)
    log = re.sub(r"\S*/lib/python3\.\d+/site-packages/", "<site-packages>/", log)
    return log.splitlines()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_worker_forked_from_the_zygote_is_the_worker_a_fresh_start_gives(
    celery_workers: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = {}
    for how in ("forked", "fresh"):
        monkeypatch.setenv("TEST_ZYGOTE", "on" if how == "forked" else "off")
        worker = workers[how] = celery_workers.start(how)
        assert isinstance(worker.process, Forked if how == "forked" else subprocess.Popen)
        assert os.getsid(worker.pid) == worker.pid  # start_new_session: the test ends it with killpg
        pool = worker.pool_processes()
        assert len(pool) == 2 and all(os.getpgid(pid) == worker.pid for pid in pool)
        query = ask(StudyFactory(slug=f"by-a-{how}-worker"))
        wait_for(lambda q=query: settled(q), timeout=30, message=describe(query, celery_workers))
        query.refresh_from_db()
        assert query.status == Query.Status.READY
        assert len(re.findall(r"Task annotation\.tasks\.generate_candidate\[[^\]]+\] succeeded", worker.log())) == 4
        os.killpg(worker.pid, signal.SIGKILL)
        assert worker.process.wait(timeout=10) == -signal.SIGKILL
        wait_for(lambda p=pool: not any(_running(pid) for pid in p), timeout=10, message="the pool outlived killpg")
    assert _start_up(workers["forked"]) == _start_up(workers["fresh"])
