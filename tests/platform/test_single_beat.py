"""One beat per deployment (kernel/beat_lock.py): a second beat waits as a standby, sends nothing, and takes
over when the first one dies. Real `celery beat` processes on a database of their own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.platform.conftest import REPO, production_env


def start_beat(name: str, env: dict[str, str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO",
         f"--schedule={tmp_path / name}-schedule"],
        cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, log


def wait_for(log: Path, text: str, *, process: subprocess.Popen[bytes], timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace") if log.exists() else ""
        if text in content:
            return content
        assert process.poll() is None, f"the beat exited ({process.returncode}):\n{content[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log.name} after {timeout:g} s:\n{content[-3000:]}")


@pytest.mark.parametrize("database", ["postgresql", "sqlite"])
def test_a_second_beat_waits_sends_nothing_and_takes_over(database: str, tmp_path: Path, request) -> None:
    url = request.getfixturevalue("fresh_database") if database == "postgresql" else f"sqlite:///{tmp_path}/db.sqlite3"
    # A sweep due every second, so that a beat that ticks sends something within the test's waits.
    env = {**production_env(url, tmp_path), "BEAT_LOCK_POLL_S": "0.5", "SWEEP_INTERVAL_S": "1"}
    first, first_log = start_beat("first", env, tmp_path)
    second = None
    try:
        wait_for(first_log, "held by this beat", process=first)
        wait_for(first_log, "Sending due task", process=first)
        second, second_log = start_beat("second", env, tmp_path)
        wait_for(second_log, "another beat holds it", process=second)
        # The first keeps sending; the second, which has logged that it waits, has sent nothing.
        sent_before = first_log.read_text().count("Sending due task")
        wait_for(first_log, "Sending due task", process=first)
        while first_log.read_text().count("Sending due task") <= sent_before:
            time.sleep(0.2)
        assert "Sending due task" not in second_log.read_text()
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        content = wait_for(second_log, "took over", process=second)
        content = wait_for(second_log, "Sending due task", process=second)
        assert content.index("took over") < content.index("Sending due task")
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
