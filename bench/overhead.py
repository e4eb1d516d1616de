#!/usr/bin/env python
"""What the generation pipeline costs beyond the calls it makes (issue 30): Q questions x 4 summaries through the
annotator and retrieval workers as docker-compose.yml runs them (platform/celery-worker.sh with each service's
environment: the annotator worker a threads pool of LLM_CONCURRENCY + 4 slots, the retrieval worker 2 prefork
processes), against the OpenAI-compatible stand-in answering after a fixed delay; and in the same run the same
calls (the very request bodies the pipeline sent) from a plain `openai` client in LLM_CONCURRENCY threads. Each
run is measured quiet and beside a CPU hog (`python -c 'while 1: pass'`, N processes at nice 0).

Prints per run the wall times, their ratio to the ideal (calls x delay / concurrency) and to each other, and the
calls in flight at the stand-in (mean over the batch, peak), beside the target: pipeline <= 1.15 x plain client,
quiet and with the hog. Run from the repository root, under the bench lock:
    flock /work/notes/bench.lock .venv/bin/python bench/overhead.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _shared import (  # bench/ is the script directory
    PERSONA,
    QUESTIONS,
    REPO,
    SYSTEMS,
    check_db_name,
    flush_broker,
    group_cpu_seconds,
    manage,
    production_env,
    recreate_database,
    spawn,
    supervise,
    use_in_this_process,
)

TARGET = 1.15  # pipeline wall time / the plain client's, quiet and beside the hog (issue 30)
# Issue 30's figures, before this benchmark existed (bench/field.py's rig, 100 questions x 4 at 200 ms, 16 slots).
REFERENCE = (
    "issue 30, before: pipeline 1.53 / 1.62 / 1.92x ideal quiet, plain client 1.12-1.13x in the same minutes; "
    "busy host 8-11x, 5-7 of 16 calls in flight"
)


def compose_worker_env(service: str) -> dict[str, str]:
    """The environment docker-compose.yml gives a worker service: its queues, pool, concurrency and niceness."""
    import yaml

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    environment = compose["services"][service].get("environment") or {}
    keys = ("CELERY_QUEUES", "WORKER_NICE", "CELERY_CONCURRENCY", "CELERY_POOL")
    return {k: str(v) for k, v in environment.items() if k in keys}


def annotator_services() -> list[str]:
    """docker-compose.yml's worker services that serve annotators: those consuming the annotator or the retrieval
    queue (worker-annotator, worker-retrieval; a checkout from before the retrieval queue has only the first)."""
    import yaml

    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    found = []
    for name, service in services.items():
        queues = str((service.get("environment") or {}).get("CELERY_QUEUES", "")).split(",")
        if service.get("command") == ["worker"] and {"annotator", "retrieval"} & set(queues):
            found.append(name)
    return sorted(found)


class ComposeWorker:
    """One worker service started by platform/celery-worker.sh, in its own process group."""

    def __init__(self, service: str, *, env: dict[str, str], work: Path) -> None:
        self.service = service
        self.env = {**env, **compose_worker_env(service)}
        self.log = work / f"{service}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        name = f"bench-overhead-{os.getpid()}-{self.service}@%h"
        argv = ["sh", str(REPO / "platform" / "celery-worker.sh"), "-n", name, "--without-gossip", "--without-mingle"]
        self.proc = spawn(argv, env=self.env, log=self.log)
        end = time.monotonic() + 90
        while " ready." not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"{self.service} did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        return group_cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class InFlight:
    """Samples the stand-in's calls in flight every 10 ms while a batch runs: the mean and the peak."""

    def __init__(self, standin: Any) -> None:
        self.standin = standin
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.samples.append(self.standin.in_flight)

    def __enter__(self) -> InFlight:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> tuple[float, int]:
        # Trailing samples after the last call (the poll's last interval) would dilute the mean: cut them.
        samples = list(self.samples)
        while samples and samples[-1] == 0:
            samples.pop()
        return (statistics.fmean(samples) if samples else 0.0, max(samples, default=0))


@dataclass
class Row:
    condition: str
    run: int
    load: float
    pipeline_s: float
    plain_s: float
    ideal_s: float
    pipeline_flight: tuple[float, int]
    plain_flight: tuple[float, int]
    problems: list[str]
    plain_ms: float = 0.0  # the plain client's CPU per call
    annotator_ms: float = 0.0  # the annotator worker's CPU per summary
    retrieval_ms: float = 0.0  # the retrieval worker's CPU per summary

    @property
    def ratio(self) -> float:
        return self.pipeline_s / self.plain_s


def make_study(*, base_url: str, participants: int) -> list[Any]:
    """An open study of 4 "openai" systems on the stand-in (the deployment's limit: LLM_CONCURRENCY), demo
    retrieval, and `participants` annotators with a persona, one question each."""
    from annotation.services.participation import invitation_accept
    from annotation.services.persona import persona_save
    from studies.models import Study
    from studies.services.invitation import invitation_create_bulk
    from studies.services.study import study_create

    settings = {"base_url": base_url, "timeout": 30, "max_retries": 0, "use_cache": False}
    study = study_create(
        slug=f"bench-overhead-{secrets.token_hex(3)}",
        title="Overhead benchmark",
        status=Study.Status.OPEN,
        queries_per_annotator=1,
        retrieval_backend="demo",
        systems=[{**spec, "generation_backend": "openai", "backend_settings": settings} for spec in SYSTEMS],
    )
    participations = []
    for start in range(0, participants, 1000):  # at most 1000 invitations at a time
        for invitation in invitation_create_bulk(study=study, count=min(1000, participants - start)):
            participation = invitation_accept(token=invitation.token, annotator=None, consent=True)
            persona_save(participation=participation, data=PERSONA)
            participations.append(participation)
    return participations


def pipeline_batch(
    participations: list[Any], standin: Any, timeout: float
) -> tuple[float, list[dict[str, Any]], list[str], tuple[float, int]]:
    """Ask one question per participation in one transaction (its commit sends every retrieval at once); the
    wall time runs from the commit to the last summary written, and the batch ends once every question is ready
    to rank. Returns the wall time, the request bodies the stand-in received, problems, calls in flight."""
    from django.db import connection, transaction
    from django.db.models import Max

    from annotation.models import Candidate, Query
    from annotation.services.query import query_submit

    ids = [p.pk for p in participations]
    before = standin.completions
    with InFlight(standin) as flight:
        with transaction.atomic():
            for n, participation in enumerate(participations):
                text = f"{QUESTIONS[n % len(QUESTIONS)]} (question {n + 1}, {secrets.token_hex(3)})"
                query_submit(participation=participation, text=text, client_token=secrets.token_hex(8))
            committed = time.time()  # the commit follows at once; its on_commit hooks send the retrievals
        end = time.monotonic() + timeout
        queries = Query.objects.filter(participation_id__in=ids)
        while queries.filter(status=Query.Status.READY).count() < len(ids) and time.monotonic() < end:
            time.sleep(0.05)
    candidates = Candidate.objects.filter(query__participation_id__in=ids)
    last = candidates.aggregate(last=Max("finished_at"))["last"]
    wall = last.timestamp() - committed if last else float("nan")
    problems = []
    done = candidates.filter(status=Candidate.Status.DONE).count()
    if done != 4 * len(ids):
        problems.append(f"{done} of {4 * len(ids)} summaries done")
    ready = queries.filter(status=Query.Status.READY).count()
    if ready != len(ids):
        problems.append(f"{ready} of {len(ids)} questions ready")
    with standin.lock:
        bodies = list(standin.requests[before:])
    if len(bodies) != 4 * len(ids):
        problems.append(f"{len(bodies)} calls for {4 * len(ids)} summaries")
    connection.close()
    return wall, bodies, problems, flight.summary()


# The plain client, in a process of its own as the workers are (beside the stand-in in this process it would
# share this process's GIL with it): the bodies from a JSON file, the wall time of the calls on stdout.
PLAIN_CLIENT = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import openai
base_url, threads, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bodies = json.load(open(path))
client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=30)
def call(body):
    reply = client.chat.completions.create(model=body["model"], messages=body["messages"],
                                           temperature=body.get("temperature"), max_tokens=body.get("max_tokens"))
    return reply.choices[0].message.content or ""
with ThreadPoolExecutor(threads) as pool:
    started, cpu = time.monotonic(), time.process_time()
    answers = list(pool.map(call, bodies))
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
assert all(answers), "the plain client got an empty answer"
print(wall, cpu)
"""


def plain_batch(
    bodies: list[dict[str, Any]], standin: Any, threads: int, nice: int
) -> tuple[float, tuple[float, int], float]:
    """The same calls from a plain `openai` client, `threads` at a time (one client shared, as its docs advise), in
    a process of its own at the annotator worker's niceness."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(bodies, out)
    try:
        with InFlight(standin) as flight:
            result = subprocess.run(
                ["nice", "-n", str(nice), sys.executable, "-c", PLAIN_CLIENT, standin.base_url, str(threads), out.name],
                capture_output=True,
                text=True,
                check=True,
            )
    finally:
        os.unlink(out.name)
    wall, cpu = (float(x) for x in result.stdout.strip().splitlines()[-1].split())
    return wall, flight.summary(), cpu / len(bodies) * 1000


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--questions", type=int, default=100, help="questions per batch (4 summaries each)")
    p.add_argument("--delay", type=float, default=0.2, help="seconds the stand-in waits before each answer")
    p.add_argument("--concurrency", type=int, default=16, help="LLM_CONCURRENCY, and the plain client's threads")
    p.add_argument("--runs", type=int, default=3, help="runs per condition (a pipeline batch and a plain batch)")
    p.add_argument("--hogs", type=int, default=2, help="CPU hogs beside the 'hog' condition's runs")
    p.add_argument("--conditions", nargs="+", choices=["quiet", "hog"], default=["quiet", "hog"])
    p.add_argument("--db-name", default="bench_overhead", help="dropped and recreated; must start with 'bench'")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    p.add_argument("--redis", default="redis://127.0.0.1:6379")
    p.add_argument("--redis-db", type=int, default=6, help="Redis database for the broker and limiter; flushed")
    p.add_argument("--keep-logs", action="store_true", help="keep the workers' logs")
    p.add_argument(
        "--worker-env",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the workers' environment beyond docker-compose.yml's (WORKER_NICE=0, to compare); the plain client "
        "takes the annotator worker's WORKER_NICE",
    )
    args = p.parse_args()
    check_db_name(p, args.db_name)
    return args


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    broker = f"{args.redis}/{args.redis_db}"
    env = production_env(
        database_url=f"{args.postgres}/{args.db_name}",
        broker_url=broker,
        work=work,
        LLM_CONCURRENCY=str(args.concurrency),
    )
    use_in_this_process(env, extra=("LLM_CONCURRENCY",))
    workers = [ComposeWorker(s, env=env, work=work) for s in annotator_services()]
    extra = dict(item.split("=", 1) for item in args.worker_env)
    for worker in workers:
        worker.env.update(extra)
    hogs: list[subprocess.Popen[bytes]] = []

    def stop() -> None:
        for hog in hogs:
            hog.kill()
        for worker in workers:
            worker.stop()
        with contextlib.suppress(Exception):
            flush_broker(broker)

    return supervise(
        lambda: run(args, env, workers, hogs, broker),
        stop=stop,
        stopping="the workers, the hogs and the stand-in",
        work=work,
        keep_logs=args.keep_logs,
    )


def run(
    args: argparse.Namespace, env: dict[str, str], workers: list[ComposeWorker], hogs: list[Any], broker: str
) -> int:
    cores = os.cpu_count() or 1
    print(
        f"{args.questions} questions x 4 summaries, stand-in delay {args.delay * 1000:.0f} ms, "
        f"LLM_CONCURRENCY {args.concurrency}, {cores} cores, load average {os.getloadavg()[0]:.2f} at the start"
    )
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    manage(env, "migrate", "--noinput")
    flush_broker(broker)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    import config.celery  # noqa: F401 - the tasks query_submit sends go to this app's broker
    from tests.support.openai_standin import openai_standin

    for worker in workers:
        worker.start()
    print("workers: " + "; ".join(f"{w.service} {compose_worker_env(w.service)}" for w in workers)
          + (f"; and {args.worker_env}" if args.worker_env else ""))  # fmt: skip
    nice = int(workers[0].env.get("WORKER_NICE") or 0)
    calls = 4 * args.questions
    ideal = calls * args.delay / args.concurrency
    timeout = 20 * ideal + 60
    rows: list[Row] = []
    with openai_standin(delay=args.delay) as standin:
        batches = 1 + len(args.conditions) * args.runs
        participations = make_study(base_url=standin.base_url, participants=args.questions * batches)
        # Warm-up, unmeasured: every worker thread and process has made its first call, opened its connections.
        warm, bodies, problems, _ = pipeline_batch(participations[: args.questions], standin, timeout)
        plain_batch(bodies, standin, args.concurrency, nice)
        print(f"warm-up: pipeline {warm:.2f}s{' (' + '; '.join(problems) + ')' if problems else ''}")
        used = args.questions
        for condition in args.conditions:
            if condition == "hog":
                hogs.extend(
                    subprocess.Popen([sys.executable, "-c", "while 1: pass"], start_new_session=True)
                    for _ in range(args.hogs)
                )
                time.sleep(2.0)  # the load average starts to show them
            for number in range(1, args.runs + 1):
                batch = participations[used : used + args.questions]
                used += args.questions
                cpu = [w.cpu_seconds() for w in workers]
                wall, bodies, problems, pipeline_flight = pipeline_batch(batch, standin, timeout)
                cpu = [(w.cpu_seconds() - c) / calls * 1000 for w, c in zip(workers, cpu, strict=True)]
                plain_s, plain_flight, plain_ms = plain_batch(bodies, standin, args.concurrency, nice)
                row = Row(condition, number, os.getloadavg()[0], wall, plain_s, ideal, pipeline_flight, plain_flight,
                          problems, plain_ms, *cpu)  # fmt: skip
                rows.append(row)
                print(
                    f"{condition} run {number}: pipeline {wall:.2f}s, plain {plain_s:.2f}s, ratio {row.ratio:.2f}, "
                    f"load {row.load:.2f}",
                    flush=True,
                )
            for hog in hogs:
                hog.kill()
                hog.wait()
            hogs.clear()
    for worker in workers:
        worker.stop()
    return report(args, rows, ideal)


def report(args: argparse.Namespace, rows: list[Row], ideal: float) -> int:
    print()
    print(f"{4 * args.questions} calls of {args.delay * 1000:.0f} ms, {args.concurrency} at a time: ideal {ideal:.2f}s")
    header = (
        f"{'condition':<9} {'run':>3} {'pipeline s':>10} {'x ideal':>7} {'plain s':>7} {'x ideal':>7} "
        f"{'pipe/plain':>10} {'in flight pipe':>14} {'in flight plain':>15} {'plain ms/c':>10} {'ann ms/s':>8} {'ret ms/s':>8} {'load':>5}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        pm, pp = r.pipeline_flight
        cm, cp = r.plain_flight
        print(
            f"{r.condition:<9} {r.run:>3} {r.pipeline_s:>10.2f} {r.pipeline_s / ideal:>7.2f} {r.plain_s:>7.2f} "
            f"{r.plain_s / ideal:>7.2f} {r.ratio:>10.2f} {f'{pm:.1f} (peak {pp})':>14} {f'{cm:.1f} (peak {cp})':>15} "
            f"{r.plain_ms:>10.1f} {r.annotator_ms:>8.1f} {r.retrieval_ms:>8.1f} {r.load:>5.2f}"
            + (f"  {'; '.join(r.problems)}" if r.problems else "")
        )
    print("-" * len(header))
    print(
        "pipeline s: the commit that sends the retrievals -> the last summary written; plain s: the same request "
        "bodies from one openai client in threads, in a process of its own at the annotator worker's niceness; in flight: the stand-in's calls being answered (mean over the "
        "batch, peak); plain ms/c: the plain client's CPU per call; ann/ret ms/s: the annotator and retrieval workers' "
        "CPU per summary; load: 1-minute load "
        "average after the run"
    )
    print(f"reference: {REFERENCE}")
    verdict = 0
    for condition in args.conditions:
        ratios = [r.ratio for r in rows if r.condition == condition]
        median = statistics.median(ratios)
        ok = median <= TARGET
        broken = [p for r in rows if r.condition == condition for p in r.problems]
        if broken:
            verdict = 1
        elif not ok and verdict == 0:
            verdict = 2
        print(
            f"{'PASS' if ok and not broken else 'FAIL'} {condition}: pipeline / plain median {median:.2f} "
            f"(runs {', '.join(f'{x:.2f}' for x in ratios)}; target <= {TARGET})"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
