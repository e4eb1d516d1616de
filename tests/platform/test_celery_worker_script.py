"""platform/celery-worker.sh and celery-beat.sh start the process they are asked for, on the settings every other
process of the host reads, or stop with a reason: run with stand-ins for celery, chrt and nice first on PATH that
print the command they were given instead of running it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLATFORM = Path(__file__).resolve().parents[2] / "platform"
SCRIPT = PLATFORM / "celery-worker.sh"


@pytest.fixture
def run_script(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("celery", "chrt", "nice"):
        stand_in = bin_dir / tool
        stand_in.write_text('#!/bin/sh\nprintf "%s\\n" "$(basename "$0")" "$@"\n')
        stand_in.chmod(0o755)

    def run(script: Path = SCRIPT, **environment: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHON": sys.executable,  # the project's interpreter, as the image's `python`
            "ENV_FILE": str(tmp_path / ".env"),  # the test's own .env (none unless it writes one)
            **environment,
        }
        return subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)

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


def test_a_worker_started_outside_a_container_reads_env_as_django_does(run_script, tmp_path: Path) -> None:
    """Issue 31: with CELERY_QUEUES=annotator only in .env, a worker started by the script consumed every queue,
    while Django (which reads .env) ran the same host's web server on the file's settings."""
    (tmp_path / ".env").write_text("CELERY_QUEUES=annotator\nWORKER_NICE=5\nCELERY_CONCURRENCY='3'\n")
    command = run_script().stdout.splitlines()
    assert command[command.index("-Q") + 1] == "annotator"
    assert command[:3] == ["nice", "-n", "5"]
    assert "--concurrency=3" in command
    # What the environment sets wins over the file, as in Django's settings.
    command = run_script(CELERY_QUEUES="research").stdout.splitlines()
    assert command[command.index("-Q") + 1] == "research"


def test_a_value_in_env_with_shell_characters_stays_one_value(run_script, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text('CELERY_QUEUES="annotator; echo pwned"\n')
    result = run_script()
    command = result.stdout.splitlines()
    assert "pwned" not in command  # the echo did not run
    assert command[command.index("-Q") + 1] == "annotator;echopwned"  # spaces dropped, nothing run


def test_beat_outside_a_container_makes_its_schedules_folder_and_reads_env(run_script, tmp_path: Path) -> None:
    """Issue 31: beat stopped on a schedule file in /app/var, a folder only the image has."""
    schedule = tmp_path / "state" / "beat" / "schedule"
    (tmp_path / ".env").write_text(f"CELERY_BEAT_SCHEDULE_FILE={schedule}\nCELERY_LOGLEVEL=WARNING\n")
    result = run_script(PLATFORM / "celery-beat.sh")
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()
    assert command[:4] == ["celery", "-A", "config", "beat"]
    assert f"--schedule={schedule}" in command and "--loglevel=WARNING" in command
    assert schedule.parent.is_dir()
    # Unset: the project's var/ folder, relative to the project (the script runs from there).
    (tmp_path / ".env").write_text("")
    assert "--schedule=var/celerybeat-schedule" in run_script(PLATFORM / "celery-beat.sh").stdout.splitlines()


def test_gunicorn_reads_env_as_django_does(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GUNICORN_WORKERS=3\nGUNICORN_THREADS=7\n")
    probe = "import runpy; ns = runpy.run_path('platform/gunicorn.conf.py'); print(ns['workers'], ns['threads'])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUNICORN_")} | {"ENV_FILE": str(tmp_path / ".env")}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=PLATFORM.parent, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "7"]


def test_a_threads_worker_takes_as_many_slots_as_the_model_server_and_more(run_script, tmp_path: Path) -> None:
    """Issue 30: the annotator worker's 4 prefork processes, each holding one generation for its whole latency,
    put at most 10 of a server's 64 slots to work. A threads worker follows the server: LLM_CONCURRENCY + 4
    threads unless CELERY_CONCURRENCY says otherwise, and 4 database connections (its tasks give theirs back while
    they wait on the model)."""
    (tmp_path / ".env").write_text("LLM_CONCURRENCY=64\n")
    command = run_script(CELERY_POOL="threads", CELERY_QUEUES="annotator").stdout.splitlines()
    assert "--pool=threads" in command and "--concurrency=68" in command
    command = run_script(CELERY_POOL="threads", CELERY_CONCURRENCY="100").stdout.splitlines()
    assert "--concurrency=100" in command
    # Unset: prefork, 4 processes, whatever the model server takes.
    command = run_script().stdout.splitlines()
    assert "--pool=prefork" in command and "--concurrency=4" in command


def test_the_pool_size_of_database_connections_follows_the_pool(run_script, tmp_path: Path) -> None:
    # The stand-in celery prints the variable the worker's Django settings read.
    bin_dir = tmp_path / "bin"
    (bin_dir / "celery").write_text('#!/bin/sh\nprintf "DATABASE_POOL_MAX_SIZE=%s\\n" "$DATABASE_POOL_MAX_SIZE"\n')
    assert run_script(CELERY_POOL="threads").stdout.strip() == "DATABASE_POOL_MAX_SIZE=4"
    assert run_script().stdout.strip() == "DATABASE_POOL_MAX_SIZE=2"
    assert run_script(CELERY_POOL="threads", DATABASE_POOL_MAX_SIZE="6").stdout.strip() == "DATABASE_POOL_MAX_SIZE=6"


@pytest.mark.parametrize(("variable", "value"), [("CELERY_POOL", "gevent"), ("LLM_CONCURRENCY", "lots")])
def test_an_unknown_pool_or_concurrency_stops_the_worker_and_says_why(run_script, variable: str, value: str) -> None:
    result = run_script(**{"CELERY_POOL": "threads", variable: value})
    assert result.returncode == 2
    assert result.stdout == ""
    assert variable in result.stderr and repr(value) in result.stderr
