#!/usr/bin/env python
"""Fault benchmark: the fault suite's scenarios (tests/faults/scenarios.py), several cases per fault, on real
Celery workers, PostgreSQL and Redis (and headless Chromium behind a live server for the key presses); prints
fault | cases | stuck after the sweeper | lost | duplicated | annotator-visible outcome. Target: 0/0/0 in every row.
Run from the repository root: `.venv/bin/python bench/faults.py` (`--help` for the options).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _shared import manage, recreate_database, suite_worker_env  # bench/ is the script directory

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Fault:
    key: str
    title: str
    run: Callable[..., Any]  # scenario(rig, **case) -> Outcome
    cases: list[dict[str, Any]]
    browser: bool = False


def faults() -> list[Fault]:
    from tests.faults import scenarios as s

    return [
        Fault("retrieval", "kill worker mid-retrieval", s.kill_mid_retrieval, [{"delay": d} for d in (3.0, 5.0, 8.0)]),
        Fault("generation", "kill worker mid-generation", s.kill_mid_generation, [{"delay": d} for d in (3.0, 5.0, 8.0)]),
        Fault("scoring", "kill worker mid-scoring", s.kill_mid_scoring, [{"annotators": n} for n in (1, 2, 3)]),
        Fault("export", "kill worker mid-export", s.kill_mid_export, [{"fmt": f} for f in ("csv", "jsonl", "parquet")]),
        Fault("broker", "broker unreachable at submit", s.broker_down_at_submit, [{"via": v} for v in ("api", "page", "api")]),
        Fault("softlimit", "LLM hangs past the soft limit", s.llm_hangs_past_soft_limit, [{"hangs": h} for h in (2, 4, 40)]),
        Fault("race", "concurrent first-round answers", s.concurrent_first_round, [{"brackets": 50, "seed": n} for n in (1, 2, 3)]),
        Fault(
            "stale",
            "stale second tab",
            s.stale_tab,
            [{"first": "left", "second": "right"}, {"first": "right", "second": "neither"}, {"first": "neither", "second": "left"}],
        ),
        Fault(
            "keys",
            "double key press (browser)",
            s.double_key_press,
            [{"second_after_ms": 30, "on": "same"}, {"second_after_ms": 100, "on": "next"}, {"second_after_ms": 300, "on": "next"}],
            browser=True,
        ),
        Fault(
            "exception",
            "exception in retrieval/generation",
            s.exception_in_background,
            [{"kind": k} for k in ("settings-list", "settings-string", "stray-brace")],
        ),
    ]  # fmt: skip


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cases", type=int, default=3, help="cases per fault (each fault has 3)")
    p.add_argument("--only", nargs="+", default=None, help="fault keys to run: retrieval generation scoring export "
                   "broker softlimit race stale keys exception")  # fmt: skip
    p.add_argument("--no-browser", action="store_true", help="skip the browser cases")
    p.add_argument("--db-name", default="bench_faults", help="created, then dropped; must start with 'bench'")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    p.add_argument("--redis", default="redis://127.0.0.1:6379")
    p.add_argument("--redis-db", type=int, default=13, help="Redis database for the broker; flushed before each case")
    p.add_argument("--keep-db", action="store_true", help="keep the database for inspection")
    p.add_argument("--keep-logs", action="store_true", help="keep the worker logs")
    p.add_argument("--verbose", action="store_true", help="print every case's full report")
    args = p.parse_args()
    if not re.fullmatch(r"bench[a-z0-9_]*", args.db_name):
        p.error("--db-name must match bench[a-z0-9_]* (the database is dropped)")
    if not 1 <= args.cases <= 3:
        p.error("--cases must be 1, 2 or 3")
    return args


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    broker = f"{args.redis}/{args.redis_db}"
    database = f"{args.postgres}/{args.db_name}"
    env = suite_worker_env(
        database_url=database,
        broker_url=broker,
        work=work,
        DJANGO_ALLOW_ASYNC_UNSAFE="true",  # Playwright's sync API keeps an event loop on this thread
    )
    os.environ.update(env)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"database {args.db_name}, broker {broker}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    code = 1
    try:
        manage({**os.environ, **env}, "migrate", "--noinput")
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        # Refused answers (409) and the broker's 500 are outcomes the table reports, not log noise.
        logging.getLogger("django.request").setLevel(logging.CRITICAL)
        code = run(args, broker, database, work)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            drop_database(f"{args.postgres}/postgres", args.db_name)
        if args.keep_logs or code == 1:
            print(f"worker logs in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Browser:
    """A live server on this process's database and Debian's headless Chromium, for the key-press cases."""

    def __enter__(self) -> Browser:
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.test.testcases import LiveServerThread
        from playwright.sync_api import sync_playwright

        from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS

        self.thread = LiveServerThread("localhost", StaticFilesHandler, connections_override={}, port=0)
        self.thread.daemon = True
        self.thread.start()
        self.thread.is_ready.wait()
        if self.thread.error:
            raise self.thread.error
        self.url = f"http://{self.thread.host}:{self.thread.port}"
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.browser.close()
        self.playwright.stop()
        self.thread.terminate()


def run(args: argparse.Namespace, broker: str, database: str, work: Path) -> int:
    from contextlib import ExitStack

    from tests.faults import actions
    from tests.faults.scenarios import BOUND_S, Outcome, Rig
    from tests.integration.worker import WorkerPool, celery_app_sending_to, flush_broker

    chosen = [f for f in faults() if (args.only is None or f.key in args.only) and not (f.browser and args.no_browser)]
    pool = WorkerPool(database_url=database, broker=broker, log_dir=work)
    results: list[tuple[Fault, list[Outcome]]] = []
    schedule = ", ".join(f"{name} every {every:.0f}s" for name, every in actions.sweeper_schedule().items())
    print(f"sweepers (run on their beat schedule, first run one interval after the fault): {schedule or 'none'}")
    print(f"bound: {BOUND_S:.0f}s after the fault for background work to end\n")
    with ExitStack() as stack:
        stack.enter_context(celery_app_sending_to(broker))
        browser = stack.enter_context(Browser()) if any(f.browser for f in chosen) else None
        for fault in chosen:
            outcomes = []
            for number, case in enumerate(fault.cases[: args.cases], start=1):
                flush_broker(broker)
                rig = Rig(
                    pool=pool,
                    live_url=browser.url if browser else None,
                    browser=browser.browser if browser else None,
                    slug_prefix=f"bench-{fault.key}-{number}",
                )
                started = time.monotonic()
                try:
                    outcome = fault.run(rig, **case)
                except Exception as error:  # a broken case is a result too: it is reported, not hidden
                    outcome = Outcome(fault.title, repr(case))
                    outcome.problems.append(f"the scenario crashed: {error!r}")
                    outcome.notes.append(traceback.format_exc()[-1500:])
                finally:
                    rig.stop_workers()
                outcomes.append(outcome)
                verdict = "ok" if not outcome.problems else f"{len(outcome.problems)} problems"
                print(
                    f"[{fault.key} {number}] {outcome.case}: {verdict} ({time.monotonic() - started:.0f}s)", flush=True
                )
                if args.verbose or outcome.problems:
                    print("    " + outcome.report().replace("\n", "\n    "), flush=True)
            results.append((fault, outcomes))
        flush_broker(broker)
    return report(results)


def report(results: list[tuple[Any, list[Any]]]) -> int:
    header = f"{'fault':<36} {'cases':>5} {'stuck':>5} {'lost':>4} {'dup':>4}  annotator-visible outcome"
    print("\n" + header)
    print("-" * 140)
    verdict = 0
    for fault, outcomes in results:
        stuck = sum(o.stuck for o in outcomes)
        lost = sum(o.lost for o in outcomes)
        duplicated = sum(o.duplicated for o in outcomes)
        failing = sum(bool(o.problems) for o in outcomes)
        if stuck or lost or duplicated or failing:
            verdict = 1
        seen = sorted({o.visible for o in outcomes}, key=lambda v: [o.visible for o in outcomes].index(v))
        first, *rest = seen or ["-"]
        print(f"{fault.title:<36} {len(outcomes):>5} {stuck:>5} {lost:>4} {duplicated:>4}  {first}")
        for more in rest:
            print(f"{'':<36} {'':>5} {'':>5} {'':>4} {'':>4}  {more}")
        if failing and not (stuck or lost or duplicated):
            print(f"{'':<36} {'':>5} {'':>5} {'':>4} {'':>4}  ({failing} of {len(outcomes)} cases miss an expectation)")
    print("-" * 140)
    print("stuck: rows (query, candidate, dead bracket, scoring run, research job) not in a terminal state once the "
          "bound passed with the sweepers running;\nlost: accepted questions or answers not stored, candidates or "
          "scores missing, a stale tab's answer dropped while the page moved on as if it counted; dup: rows or answers stored twice (incl. a chunk counted twice, a key press answering two "
          "matches).")  # fmt: skip
    print(
        "PASS: 0 stuck, 0 lost, 0 duplicated and every expectation met" if verdict == 0 else "FAIL: see the rows above"
    )
    return verdict


if __name__ == "__main__":
    sys.exit(main())
