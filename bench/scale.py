"""Scale benchmark (issue 13). Parts (1) generation throughput, (2) an export through object storage and (4)
peak concurrency at the model server are bench/scale_backends.py, run from here too; part (3), "wait", is
here: an annotator's time from submitting a question to its first comparison, with and without a study-wide scoring run in the background, side by side in one run, for two layouts:

- split: the deployment's layout (docker-compose.yml): one worker on the annotator queue, one on the research
  queue (config/settings/base.py routes; RESEARCH_MAX_INFLIGHT_CHUNKS bounds the run's chunks in the broker);
- single: the baseline, every task on one queue consumed by one worker with as many processes as both.

Target: with the scoring run, the split layout's mean wait within 1.2x of its wait without it.
Real Celery workers (tests/integration/worker.py) on PostgreSQL and Redis.

    .venv/bin/python bench/scale.py                 # all four parts, quick (4 questions per cell)
    .venv/bin/python bench/scale.py --part wait     # only part (3)
    .venv/bin/python bench/scale.py --questions 12  # the long run
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _shared import (  # bench/: script dir
    QUESTIONS,
    REPO,
    check_db_name,
    flush_broker,
    manage,
    recreate_database,
    suite_worker_env,
)

TARGET = 1.2
# split: the deployment (research yields to annotator work on the host, kernel/yielding.py); split-noyield: the
# same with RESEARCH_YIELDS_TO_ANNOTATORS=false (research on hosts of its own turns it off); single: one queue.
LAYOUTS = ("split", "split-noyield", "single")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--part",
        choices=["all", "wait", "backends"],
        default="all",
        help="wait: part (3) here; backends: parts (1), (2) and (4) (bench/scale_backends.py); all: both",
    )
    p.add_argument(
        "--research-nice", type=int, default=10, help="the research worker's nice value (WORKER_NICE; compose: 10)"
    )
    p.add_argument(
        "--research-sched",
        choices=["normal", "idle"],
        default="normal",
        help="the research worker's scheduling policy (WORKER_SCHED=idle: chrt --idle 0; compose: normal)",
    )
    p.add_argument(
        "--layouts",
        nargs="+",
        choices=list(LAYOUTS),
        default=list(LAYOUTS),
        help="the layouts to time, in this order (default: all)",
    )
    p.add_argument(
        "--no-interleave",
        dest="interleave",
        action="store_false",
        help="time the quiet questions before the run starts (default, for layouts with a research worker: "
        "alternate quiet and busy questions during the run, the research worker stopped for the quiet ones)",
    )
    p.add_argument("--questions", type=int, default=12, help="annotator questions per cell (one after another)")
    p.add_argument("--concurrency", type=int, default=2, help="processes per worker (single layout: twice this)")
    p.add_argument("--seed-queries", type=int, default=6, help="questions generated for the scored study")
    p.add_argument(
        "--repeat", type=int, default=1000, help="the scoring run scores the study's candidates this many times"
    )
    p.add_argument("--metrics", nargs="+", default=["rouge1", "rouge2", "rougeL"])
    p.add_argument("--db-name", default="bench_scale", help="created, then dropped; must start with 'bench'")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    p.add_argument("--redis", default="redis://127.0.0.1:6379")
    p.add_argument("--redis-db", type=int, default=14, help="Redis database for the broker; flushed")
    args = p.parse_args()
    check_db_name(p, args.db_name)
    return args


def main() -> int:
    args = parse_args()
    status = 0
    if args.part in ("all", "backends"):
        # Parts (1) generation throughput, (2) export through object storage, (4) peak concurrency at the server.
        status = subprocess.call([sys.executable, str(Path(__file__).with_name("scale_backends.py"))])
        if args.part == "backends":
            return status
    return wait_main(args) or status


def wait_main(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    broker = f"{args.redis}/{args.redis_db}"
    database = f"{args.postgres}/{args.db_name}"
    env = suite_worker_env(database_url=database, broker_url=broker, work=work)
    os.environ.update(env)
    print(f"database {args.db_name}, broker {broker}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    try:
        manage({**os.environ, **env}, "migrate", "--noinput")
        sys.path.insert(0, str(REPO))  # tests.integration.worker starts the workers
        import django

        django.setup()
        rows = wait_part(args, broker, database, work)
        print_table(rows, args)
        split = next((r for r in rows if r["layout"] == "split"), None)
        return 0 if split is None or split["ratio"] <= TARGET else 2
    finally:
        from django.db import connections

        connections.close_all()
        flush_broker(broker)
        import psycopg

        with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')
        shutil.rmtree(work, ignore_errors=True)


RESUME_S = 0.3  # after SIGCONT, before the next busy question: the research processes are running again
POLL_S = 0.005  # the bench's own polling: its granularity is in the "seen" phase below

# The phases of one question's path to its first comparison, from the rows' own timestamps (one host clock):
# retrieval queue: submitted -> the retrieval task took the query's lease; retrieval: -> its candidates queued;
# then per candidate its queue wait (queued -> claimed) and its generation (claimed -> done), with the
# generations' critical path (the last candidate's queue wait and generation: two waves on two processes);
# bracket: last candidate done -> bracket created; seen: bracket created -> this process saw it (commit, poll).
PHASES = ("retrieval queue", "retrieval", "gen. queue (last)", "generation (last)", "gen. each (mean)",
          "bracket", "seen")  # fmt: skip


def first_comparison_s(study: Any, n: int) -> tuple[float, dict[str, float]]:
    """Submit a question as a new annotator; seconds until its bracket (the first comparison) exists, and the
    phases that time is made of (PHASES)."""
    from django.conf import settings

    from annotation.models import Bracket, Candidate, Query
    from annotation.services.query import query_submit
    from tests.annotation.factories import join

    participation = join(study)
    started = time.monotonic()
    query = query_submit(participation=participation, text=f"{QUESTIONS[n % len(QUESTIONS)]} ({n})", client_token="")
    while not Bracket.objects.filter(query=query).exists():
        if Candidate.objects.filter(query=query, status=Candidate.Status.FAILED).exists():
            raise SystemExit(f"question {n}: a candidate failed")
        if time.monotonic() - started > 300:
            raise SystemExit(f"question {n}: no comparison after 300 s")
        time.sleep(POLL_S)
    elapsed = time.monotonic() - started
    seen = time.time()
    query = Query.objects.get(pk=query.pk)
    bracket = Bracket.objects.get(query=query)
    candidates = list(Candidate.objects.filter(query=query))
    assert query.lease_expires_at is not None
    submitted = query.created_at.timestamp()
    # query_retrieve renews the lease (BACKGROUND_LEASE_S) as it starts; retrieval is shorter than a heartbeat.
    took = query.lease_expires_at.timestamp() - settings.BACKGROUND_LEASE_S
    queued = min(c.queued_at.timestamp() for c in candidates if c.queued_at)
    last = max(candidates, key=lambda c: c.finished_at.timestamp() if c.finished_at else 0.0)
    assert last.queued_at and last.started_at and last.finished_at
    phases = {
        "retrieval queue": took - submitted,
        "retrieval": queued - took,
        "gen. queue (last)": last.started_at.timestamp() - last.queued_at.timestamp(),
        "generation (last)": last.finished_at.timestamp() - last.started_at.timestamp(),
        "gen. each (mean)": statistics.mean(
            c.finished_at.timestamp() - c.started_at.timestamp() for c in candidates if c.finished_at and c.started_at
        ),
        "bracket": bracket.created_at.timestamp() - last.finished_at.timestamp(),
        "seen": seen - bracket.created_at.timestamp(),
    }
    return elapsed, phases


def set_routes(app: Any, routes: Any) -> None:
    """Route this process's sends by `routes` (the router caches the table it was built with)."""
    app.conf.task_routes = routes
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()


def wait_part(args: argparse.Namespace, broker: str, database: str, work: Path) -> list[dict[str, Any]]:
    from celery import current_app
    from django.conf import settings

    from annotation.models import Bracket, Candidate
    from scoring import services
    from scoring.models import ScoringRun
    from tests.annotation.factories import StudyFactory, join
    from tests.integration.worker import CeleryWorker, WorkerPool, celery_app_sending_to

    pool = WorkerPool(database_url=database, broker=broker, log_dir=work)
    rows: list[dict[str, Any]] = []
    with celery_app_sending_to(broker):
        # The scored study: a few questions generated, then scored `--repeat` times over by one run.
        seeder = pool.start("seed")
        scored = StudyFactory(slug="scale-scored")
        from annotation.services.query import query_submit

        for n in range(args.seed_queries):
            query_submit(
                participation=join(scored), text=f"{QUESTIONS[n % len(QUESTIONS)]} [seed {n}]", client_token=""
            )
        deadline = time.monotonic() + 300
        while Bracket.objects.filter(query__participation__study=scored).count() < args.seed_queries:
            if time.monotonic() > deadline:
                raise SystemExit("seeding did not finish:\n" + pool.logs()[-3000:])
            time.sleep(0.2)
        seeder.stop(warm=True, grace=10)
        pool.workers.clear()
        ids = list(
            Candidate.objects.filter(query__participation__study=scored, status=Candidate.Status.DONE)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        print(f"scored study: {len(ids)} candidates; a background run scores {len(ids) * args.repeat:,} "
              f"in chunks of {services.CHUNK_SIZE} ({', '.join(args.metrics)}), "
              f"at most {settings.RESEARCH_MAX_INFLIGHT_CHUNKS} chunks in the broker")  # fmt: skip

        def split(yields: bool) -> list[tuple[str, dict[str, Any]]]:
            env = {"RESEARCH_YIELDS_TO_ANNOTATORS": str(yields).lower(), "RESEARCH_YIELD_URL": broker}
            return [
                ("annotator", {"queues": [settings.ANNOTATOR_QUEUE, settings.RETRIEVAL_QUEUE], "concurrency": args.concurrency,
                               "extra_env": env}),
                ("research", {"queues": [settings.RESEARCH_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE],
                              "concurrency": args.concurrency, "nice": args.research_nice, "extra_env": env}),
            ]  # fmt: skip

        layouts = {
            "split": split(yields=True),
            "split-noyield": split(yields=False),
            "single": [
                ("all", {"queues": ["default"], "concurrency": 2 * args.concurrency,
                         "extra_env": {"CELERY_TASK_ROUTES": "{}"}}),
            ],
        }  # fmt: skip
        number = 0
        for layout in args.layouts:
            workers = layouts[layout]
            saved_routes = current_app.conf.task_routes
            if layout == "single":
                set_routes(current_app, {})
            try:
                for name, options in workers:
                    if name == "research" and args.research_sched == "idle":
                        # As platform/celery-worker.sh with WORKER_SCHED=idle: SCHED_IDLE, then nice.
                        worker = CeleryWorker(database_url=pool.database_url, broker=pool.broker,
                                              log_dir=pool.log_dir, name=f"{layout}-{name}", **options)  # fmt: skip
                        worker.args = ["chrt", "--idle", "0", *worker.args]
                        pool.workers.append(worker)
                        worker.start()
                    else:
                        pool.start(f"{layout}-{name}", **options)
                annotator_study = StudyFactory(slug=f"scale-{layout}")
                first_comparison_s(annotator_study, number)  # warm-up, not counted
                number += 1
                research = next((w for w in pool.workers if "research" in w.name), None)
                quiet: list[float] = []
                busy: list[float] = []
                quiet_phases: list[dict[str, float]] = []
                busy_phases: list[dict[str, float]] = []
                load_quiet = os.getloadavg()[0]

                def ask(into: list[float], phases_into: list[dict[str, float]], study: Any = annotator_study) -> None:
                    nonlocal number
                    elapsed, phases = first_comparison_s(study, number)
                    into.append(elapsed)
                    phases_into.append(phases)
                    number += 1

                if research is None or not args.interleave:
                    for _ in range(args.questions):  # before the run starts
                        ask(quiet, quiet_phases)
                run = services._run_create(
                    study=scored,
                    metrics=args.metrics,
                    options={"reference": "titles", "source": "abstracts"},
                    by=None,
                    ids=ids * args.repeat,
                )
                while ScoringRun.objects.get(pk=run.pk).done == 0:  # the run is under way
                    time.sleep(0.05)
                load_busy = os.getloadavg()[0]
                scored_while_timed, timed_s = 0, 0.0
                for _ in range(args.questions):
                    if research is not None and args.interleave:
                        # The same run, its worker stopped (SIGSTOP: no CPU, no database work) for the quiet
                        # question, so both questions of a pair see the same background load of the host.
                        os.killpg(research.pid, signal.SIGSTOP)
                        try:
                            ask(quiet, quiet_phases)
                        finally:
                            os.killpg(research.pid, signal.SIGCONT)
                        time.sleep(RESUME_S)
                    done_before, started = ScoringRun.objects.get(pk=run.pk).done, time.monotonic()
                    ask(busy, busy_phases)
                    scored_while_timed += ScoringRun.objects.get(pk=run.pk).done - done_before
                    timed_s += time.monotonic() - started
                scored_rate = scored_while_timed / timed_s
                run.refresh_from_db()
                still_running = run.status == ScoringRun.Status.RUNNING
                scored_during = run.done
                services.scoring_run_mark_failed(run_id=run.pk, reason="benchmark: stopped")
            finally:
                pool.stop_all()
                pool.workers.clear()
                flush_broker(broker)
                set_routes(current_app, saved_routes)
            rows.append(
                {
                    "layout": layout,
                    "quiet": quiet,
                    "busy": busy,
                    "ratio": statistics.mean(busy) / statistics.mean(quiet),
                    "median_ratio": statistics.median(busy) / statistics.median(quiet),
                    "interleaved": research is not None and args.interleave,
                    "still_running": still_running,
                    "scored": scored_during,
                    "rate": scored_rate,
                    "quiet_phases": quiet_phases,
                    "busy_phases": busy_phases,
                    "load": (load_quiet, load_busy),
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nquestion -> first comparison, {args.questions} questions per cell (seconds: mean, max); split layout's "
          f"research worker: nice {args.research_nice}, scheduling {args.research_sched}")  # fmt: skip
    print("quiet: interleaved = alternating with the busy questions, the research worker stopped (SIGSTOP); "
          "before = before the run starts")  # fmt: skip
    print(f"{'layout':<13} {'quiet':>11} {'no scoring run':>16} {'with scoring run':>18} {'ratio':>7} "
          f"{'median':>7} {'target':>7}  background")  # fmt: skip
    for r in rows:
        quiet = f"{statistics.mean(r['quiet']):.2f}, {max(r['quiet']):.2f}"
        busy = f"{statistics.mean(r['busy']):.2f}, {max(r['busy']):.2f}"
        target = f"<={TARGET}x" if r["layout"] == "split" else "-"
        running = "run still going" if r["still_running"] else "RUN ENDED EARLY: raise --repeat"
        how = "interleaved" if r["interleaved"] else "before"
        print(f"{r['layout']:<13} {how:>11} {quiet:>16} {busy:>18} {r['ratio']:>6.2f}x {r['median_ratio']:>6.2f}x "
              f"{target:>7}  {r['scored']:,} scored ({r['rate']:.0f}/s while timed); {running}; "
              f"load {r['load'][0]:.1f}, {r['load'][1]:.1f}")  # fmt: skip
    print("\nwhat the time is made of (ms, mean over the questions; without -> with the scoring run)")
    print(f"{'phase':<20}" + "".join(f"{r['layout']:>22}" for r in rows))
    for phase in ("total (seen)", *PHASES):
        cells = []
        for r in rows:
            if phase == "total (seen)":
                a, b = statistics.mean(r["quiet"]), statistics.mean(r["busy"])
            else:
                a = statistics.mean(p[phase] for p in r["quiet_phases"])
                b = statistics.mean(p[phase] for p in r["busy_phases"])
            cells.append(f"{1000 * a:7.0f} -> {1000 * b:7.0f}")
        print(f"{phase:<20}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    raise SystemExit(main())
