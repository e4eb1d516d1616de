"""What the benchmark scripts share: realistic questions, a fresh database and broker, the production
environment, processes in their own group, percentiles."""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

# The settings a benchmark also uses in its own process (it calls django.setup() to seed and verify).
PROCESS_SETTINGS = (
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CELERY_TASK_ALWAYS_EAGER",
    "SECRET_KEY",
    "DEBUG",
    "LOG_LEVEL",
    "ENV_FILE",
)

# The generation benchmarks' study (bench/generation.py, bench/overhead.py): two stand-in models, each with and
# without the persona, and the persona every annotator describes.
SYSTEMS = [
    {"label": f"{model}-{condition}", "model_name": model, "condition": condition}
    for model in ("standin-llama-3.3-70b", "standin-deepseek-v3.1")
    for condition in ("persona", "generic")
]
PERSONA = {
    "role": "PhD student",
    "domain": "Nursing",
    "expertise": "intermediate",
    "research_area": "occupational health",
    "use_case": "literature review",
}

QUESTIONS = [
    "How does rotating night shift work affect sleep and medication errors in nurses?",
    "How durable is protection from mRNA vaccines against severe disease?",
    "What are reliable ways to evaluate large language models beyond benchmarks?",
    "Do automatic summarisation metrics agree with human judgments of quality?",
    "Which climate adaptation practices help smallholder farmers during drought?",
    "What interventions improve early childhood literacy in low-income schools?",
    "How is antimicrobial resistance spreading through hospital wastewater?",
    "Which urban design measures reduce heat exposure in cities?",
    "Does remote patient monitoring reduce readmissions for heart failure?",
    "How do robots learn manipulation skills from human demonstrations?",
]


def check_db_name(parser: Any, name: str) -> None:
    """Refuse (as an argument error) a database name that does not say it is a benchmark's."""
    if not re.fullmatch(r"bench[a-z0-9_]*", name):
        parser.error("--db-name must match bench[a-z0-9_]* (the database is dropped)")


def recreate_database(admin_url: str, name: str) -> None:
    """Drop and create a benchmark database (the name must say it is one)."""
    import psycopg

    if not name.startswith("bench"):
        raise SystemExit(f"refusing to recreate {name!r}: benchmark databases start with 'bench'")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def flush_broker(url: str) -> None:
    """Empty the benchmark's Redis database, so that no task of an earlier run is delivered."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def suite_worker_env(*, database_url: str, broker_url: str, work: Path, **extra: str) -> dict[str, str]:
    """The environment of a benchmark that starts the test suite's real workers (tests/integration/worker.py)."""
    return {
        "DJANGO_SETTINGS_MODULE": "config.settings.test",  # the settings the suite's workers run with
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "LOG_LEVEL": "WARNING",
        "ENV_FILE": str(work / "no.env"),  # a developer's .env must not leak into the benchmark
        **extra,
    }


def production_env(*, database_url: str, broker_url: str, work: Path, **extra: str) -> dict[str, str]:
    """The environment of the production processes, on the benchmark's own database and broker."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        # Every simulated annotator comes from this one address, which accepting an invitation is counted by
        # (docs/api.md, "Request rates"): the benchmarks measure the platform, not its request rates.
        "API_THROTTLE_ANNOTATOR": "off",
        "API_THROTTLE_RESEARCH": "off",
        "API_THROTTLE_ADMIN": "off",
        **extra,
        "ENV_FILE": str(work / "no.env"),  # a developer's .env must not leak into the benchmark
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }


def use_in_this_process(env: Mapping[str, str], extra: Sequence[str] = ()) -> None:
    """Give this process the settings its children run with (PROCESS_SETTINGS and `extra`)."""
    os.environ.update({k: env[k] for k in (*PROCESS_SETTINGS, *extra)})


def spawn(argv: Sequence[str], *, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in the repository in its own process group (so it stops with its children); output to `log`."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            list(argv),
            cwd=REPO,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def celery_worker_argv(*, concurrency: int, name: str, pool: str | None = None, loglevel: str = "INFO") -> list[str]:
    """`celery worker` on every queue (no -Q: the routed queues of config/settings/base.py) as the benchmarks
    run it: one task prefetched per slot, no start-up handshakes (nothing to synchronise with), named `name@%h`."""
    return [
        str(VENV_BIN / "celery"), "-A", "config", "worker", "-l", loglevel,
        *(["--pool", pool] if pool is not None else []),
        "--concurrency", str(concurrency), "--prefetch-multiplier", "1",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
        "-n", f"{name}@%h",
    ]  # fmt: skip


def group_cpu_seconds(pgid: int) -> float:
    """CPU time (user + system) used so far by every live process of a process group and by the children they
    reaped (a gunicorn worker recycled after max_requests, a Celery pool process replaced) (Linux /proc)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # process group id
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> tuple[float, float]:
    """CPU time the whole machine has spent so far (user, nice, system, irq, softirq), and the time its virtual
    cores waited while the hypervisor ran other guests (steal), in seconds (Linux /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def process_cpu_ns(pid: int) -> int | None:
    """CPU time a process (e.g. a PostgreSQL backend, another user's) has run so far, in nanoseconds, from
    /proc/PID/schedstat (world-readable, exact, unlike the clock ticks of /proc/PID/stat); None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class PostgresCpu:
    """CPU used by the PostgreSQL backends of the connections that name themselves `application_name` (the
    database server runs on this machine): sampled while a phase runs, so a backend that ends is still counted."""

    def __init__(self, admin_url: str, *, database: str, application_name: str) -> None:
        self.admin_url = admin_url
        self.database = database
        self.application_name = application_name
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}

    def sample(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                    (self.database, self.application_name),
                )
            ]
        for pid in pids:
            if (ns := process_cpu_ns(pid)) is not None:
                self.last[pid] = ns

    def start(self) -> None:
        self.sample()
        self.first = dict(self.last)

    def seconds(self) -> float:
        """CPU since start(): backends that existed then count from there, later ones from their start."""
        return sum(ns - self.first.get(pid, 0) for pid, ns in self.last.items()) / 1e9


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def manage(env: dict[str, str], *argv: str) -> None:
    """Run a management command of this repository with the benchmark's environment."""
    result = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"manage.py {' '.join(argv)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")


def supervise(run: Callable[[], int], *, stop: Callable[[], None], stopping: str, work: Path, keep_logs: bool) -> int:
    """Run a benchmark to its exit code; SIGTERM and Ctrl-C (even in the background) stop it cleanly.

    `stop` always runs. The logs in `work` are deleted after a run that did not fail (exit code 1)
    unless `keep_logs`; `stopping` says what an interruption stops.
    """

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    code = 1
    try:
        code = run()
    except KeyboardInterrupt:
        print(f"\ninterrupted; stopping {stopping}", file=sys.stderr)
    except Exception as error:
        print(f"\nbenchmark error: {error!r}", file=sys.stderr)
    finally:
        stop()
        if code != 1 and not keep_logs:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs kept in {work}", file=sys.stderr)
    return code
