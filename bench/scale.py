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
    p.add_argument("--questions", type=int, default=4, help="annotator questions per cell (one after another)")
    p.add_argument("--concurrency", type=int, default=2, help="processes per worker (single layout: twice this)")
    p.add_argument("--seed-queries", type=int, default=6, help="questions generated for the scored study")
    p.add_argument(
        "--repeat", type=int, default=200, help="the scoring run scores the study's candidates this many times"
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
        split = next(r for r in rows if r["layout"] == "split")
        return 0 if split["ratio"] <= TARGET else 2
    finally:
        from django.db import connections

        connections.close_all()
        flush_broker(broker)
        import psycopg

        with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')
        shutil.rmtree(work, ignore_errors=True)


def first_comparison_s(study: Any, n: int) -> float:
    """Submit a question as a new annotator; seconds until its bracket (the first comparison) exists."""
    from annotation.models import Bracket, Candidate
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
        time.sleep(0.02)
    return time.monotonic() - started


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

        layouts = {
            "split": [
                ("annotator", {"queues": [settings.ANNOTATOR_QUEUE], "concurrency": args.concurrency}),
                ("research", {"queues": [settings.RESEARCH_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE],
                              "concurrency": args.concurrency, "nice": args.research_nice}),
            ],
            "single": [
                ("all", {"queues": ["default"], "concurrency": 2 * args.concurrency,
                         "extra_env": {"CELERY_TASK_ROUTES": "{}"}}),
            ],
        }  # fmt: skip
        number = 0
        for layout, workers in layouts.items():
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
                quiet = []
                for _ in range(args.questions):
                    quiet.append(first_comparison_s(annotator_study, number))
                    number += 1
                run = services._run_create(
                    study=scored,
                    metrics=args.metrics,
                    options={"reference": "titles", "source": "abstracts"},
                    by=None,
                    ids=ids * args.repeat,
                )
                while ScoringRun.objects.get(pk=run.pk).done == 0:  # the run is under way
                    time.sleep(0.05)
                busy = []
                for _ in range(args.questions):
                    busy.append(first_comparison_s(annotator_study, number))
                    number += 1
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
                    "still_running": still_running,
                    "scored": scored_during,
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nquestion -> first comparison, {args.questions} questions per cell (seconds: mean, max); split layout's "
          f"research worker: nice {args.research_nice}, scheduling {args.research_sched}")  # fmt: skip
    print(f"{'layout':<8} {'no scoring run':>16} {'with scoring run':>18} {'ratio':>7} {'target':>7}  background")
    for r in rows:
        quiet = f"{statistics.mean(r['quiet']):.2f}, {max(r['quiet']):.2f}"
        busy = f"{statistics.mean(r['busy']):.2f}, {max(r['busy']):.2f}"
        target = f"<={TARGET}x" if r["layout"] == "split" else "-"
        running = "run still going" if r["still_running"] else "RUN ENDED EARLY: raise --repeat"
        print(f"{r['layout']:<8} {quiet:>16} {busy:>18} {r['ratio']:>6.2f}x {target:>7}  "
              f"{r['scored']:,} scored; {running}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
