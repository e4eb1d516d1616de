"""platform/celery-worker.sh starts the worker it is asked for, or stops with a reason: run with stand-ins for
celery, chrt and nice first on PATH that print the command they were given instead of running it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "platform" / "celery-worker.sh"


@pytest.fixture
def run_script(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("celery", "chrt", "nice"):
        stand_in = bin_dir / tool
        stand_in.write_text('#!/bin/sh\nprintf "%s\\n" "$(basename "$0")" "$@"\n')
        stand_in.chmod(0o755)

    def run(**environment: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **environment}
        return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)

    return run


def test_the_worker_consumes_the_listed_queues_even_with_spaces_after_the_commas(run_script) -> None:
    result = run_script(CELERY_QUEUES="research, default")
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()
    assert command[:4] == ["celery", "-A", "config", "worker"]
    assert command[command.index("-Q") + 1] == "research,default"
    # Unset: every queue, no -Q.
    assert "-Q" not in run_script().stdout.splitlines()


def test_worker_sched_idle_and_worker_nice_lower_the_workers_priority(run_script) -> None:
    result = run_script(WORKER_SCHED="idle", WORKER_NICE="10", CELERY_QUEUES="research")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:8] == ["chrt", "--idle", "0", "nice", "-n", "10", "celery", "-A"]


@pytest.mark.parametrize("sched", ["IDLE", "idle ", "batch"])
def test_an_unknown_worker_sched_stops_the_worker_and_says_why(run_script, sched: str) -> None:
    result = run_script(WORKER_SCHED=sched, CELERY_QUEUES="research")
    assert result.returncode == 2
    assert result.stdout == ""  # no worker started, at any priority
    assert "WORKER_SCHED must be idle or empty" in result.stderr and repr(sched) in result.stderr
