#!/usr/bin/env python
"""Load benchmark: N simulated annotators do the whole journey over HTTP against the production setup
(gunicorn + a real Celery worker, PostgreSQL, Redis); prints latency per endpoint and checks that no
answer was lost or duplicated. Run from the repository root: `.venv/bin/python bench/load.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _shared import (  # bench/ is the script directory
    QUESTIONS,
    REPO,
    VENV_BIN,
    PostgresCpu,
    check_db_name,
    flush_broker,
    group_cpu_seconds,
    machine_cpu_seconds,
    manage,
    percentile,
    process_cpu_ns,
    production_env,
    recreate_database,
    spawn,
    supervise,
    use_in_this_process,
)

HOST = "127.0.0.1"
# PostgreSQL application_name of the web server's and the workers' connections (their backends' CPU is measured).
WEB_DB_NAME = "bench-load-web"
WORKER_DB_NAME = "bench-load-worker"

# Route patterns: latencies are grouped by these, never by concrete URLs.
ACCEPT = "POST /api/v1/invitations/{token}/accept/"
PERSONA = "PUT  /api/v1/participations/{id}/persona/"
SUBMIT = "POST /api/v1/participations/{id}/queries/"
SUBMIT_RESENT = "POST /api/v1/participations/{id}/queries/ (re-sent)"
STATUS = "GET  /api/v1/queries/{id}/"
CURRENT = "GET  /api/v1/queries/{id}/current-match/"
CHOICE = "POST /api/v1/matches/{id}/choice/"
CHOICE_RESENT = "POST /api/v1/matches/{id}/choice/ (re-sent)"
FINISH = "POST /api/v1/participations/{id}/finish/"
COMPARE_HTML = "GET  /study/{slug}/q/{index}/compare/ (HTML)"
ROUTE_ORDER = [ACCEPT, PERSONA, SUBMIT, SUBMIT_RESENT, STATUS, CURRENT, CHOICE, CHOICE_RESENT, FINISH, COMPARE_HTML]
# A re-sent request (the same answer again: a double click, a retry) carries this header, so the server's
# access log tells it from a first send: re-sends are cheap (nothing written) and would pull the p95 down.
RESENT_HEADER = {"X-Bench-Send": "resent"}
RESENT_OF = {SUBMIT: SUBMIT_RESENT, CHOICE: CHOICE_RESENT}
ROUTE_PATTERNS = [
    (re.compile(r"^POST /api/v1/invitations/[^/]+/accept/$"), ACCEPT),
    (re.compile(r"^PUT /api/v1/participations/\d+/persona/$"), PERSONA),
    (re.compile(r"^POST /api/v1/participations/\d+/queries/$"), SUBMIT),
    (re.compile(r"^GET /api/v1/queries/\d+/$"), STATUS),
    (re.compile(r"^GET /api/v1/queries/\d+/current-match/$"), CURRENT),
    (re.compile(r"^POST /api/v1/matches/\d+/choice/$"), CHOICE),
    (re.compile(r"^POST /api/v1/participations/\d+/finish/$"), FINISH),
    (re.compile(r"^GET /study/[^/]+/q/\d+/compare/$"), COMPARE_HTML),
]
# method, path, status, microseconds spent in gunicorn, worker pid, re-send marker ("-" when absent)
ACCESS_FORMAT = "%(m)s %(U)s %(s)s %(D)s %(p)s %({x-bench-send}i)s"
# The target: all three under 100 ms at the 95th percentile (first sends; re-sends are reported apart).
TARGETS = {CURRENT: "current match", CHOICE: "submit choice", COMPARE_HTML: "match page (HTML)"}
TARGET_MS = 100.0

PERSONAS = [
    {
        "role": "PhD student",
        "domain": "Nursing",
        "expertise": "intermediate",
        "research_area": "occupational health",
        "use_case": "literature review",
    },
    {
        "role": "Clinician",
        "domain": "Medicine",
        "expertise": "expert",
        "research_area": "cardiology",
        "use_case": "deciding on a treatment policy",
    },
    {
        "role": "Journalist",
        "domain": "Science news",
        "expertise": "novice",
        "research_area": "",
        "use_case": "writing an explainer",
    },
    {
        "role": "ML engineer",
        "domain": "Computer science",
        "expertise": "expert",
        "research_area": "NLP evaluation",
        "use_case": "choosing metrics",
    },
    {
        "role": "Policy analyst",
        "domain": "Agriculture",
        "expertise": "intermediate",
        "research_area": "climate adaptation",
        "use_case": "briefing a ministry",
    },
]


# --- measurement -----------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Latencies per route pattern, status codes, and anything that went wrong."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[int | str]] = field(default_factory=lambda: defaultdict(Counter))
    problems: list[str] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)  # (sent, answered), perf_counter seconds
    routes: list[str] = field(default_factory=list)  # the route of each span, for the timeline

    def add(self, route: str, ms: float, status: int | str, *, sent: float | None = None) -> None:
        with self.lock:
            self.latencies[route].append(ms)
            self.statuses[route][status] += 1
            if sent is not None:
                self.spans.append((sent, sent + ms / 1000))
                self.routes.append(route)

    def in_flight(self) -> tuple[float, list[int]]:
        """The mean number of requests in flight over the busy time (Little's law: the sum of the latencies
        over the span from the first send to the last answer), and per request the number already in flight
        (itself included) when it was sent: the queue it joined."""
        if not self.spans:
            return math.nan, []
        events = sorted([(t0, 1) for t0, _ in self.spans] + [(t1, -1) for _, t1 in self.spans])
        seen: list[int] = []
        current = 0
        for _, step in events:
            current += step
            if step == 1:
                seen.append(current)
        busy = max(t1 for _, t1 in self.spans) - min(t0 for t0, _ in self.spans)
        return sum(t1 - t0 for t0, t1 in self.spans) / busy if busy > 0 else math.nan, seen

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def state(self) -> tuple[Any, ...]:
        """What a client process sends back to merge into the phase's recorder (the lock stays behind)."""
        return dict(self.latencies), dict(self.statuses), self.problems, self.spans, self.routes

    def merge(self, state: tuple[Any, ...]) -> None:
        latencies, statuses, problems, spans, routes = state
        with self.lock:
            for route, values in latencies.items():
                self.latencies[route].extend(values)
            for route, counts in statuses.items():
                self.statuses[route].update(counts)
            self.problems.extend(problems)
            self.spans.extend(spans)
            self.routes.extend(routes)


class Stop(Exception):
    """The run's deadline passed or it was interrupted."""


@dataclass
class Journey:
    """What one simulated annotator did and saw; the database check compares against it."""

    number: int
    participation_id: int | None = None
    first_choices: dict[int, str] = field(default_factory=dict)  # match id -> choice, first successful send
    resends: int = 0
    queries_ranked: int = 0
    finished: bool = False
    html_pages: int = 0


class Annotator:
    def __init__(
        self,
        *,
        number: int,
        args: argparse.Namespace,
        base_url: str,
        token: str,
        slug: str,
        recorder: Recorder,
        stop: threading.Event,
        deadline: float,
        html: bool,
        start_delay: float = 0.0,
        reading: tuple[float, float] | None = None,
    ) -> None:
        self.journey = Journey(number=number)
        self.start_delay = start_delay
        self.reading = reading
        self.args = args
        self.base_url = base_url
        self.invitation = token
        self.slug = slug
        self.recorder = recorder
        self.stop = stop
        self.deadline = deadline
        self.html = html
        self.rng = random.Random(f"{args.seed}:{number}")
        self.api = httpx.Client(base_url=base_url, timeout=args.request_timeout, headers={"Accept": "application/json"})
        self.browser: httpx.Client | None = None

    # Each call is timed on its own; transport errors and 5xx are retried only where the API is idempotent.
    def call(
        self,
        route: str,
        method: str,
        url: str,
        *,
        client: httpx.Client | None = None,
        retry: bool = True,
        expect: tuple[int, ...] = (200,),
        **kwargs: Any,
    ) -> httpx.Response:
        client = client or self.api
        attempts = 3 if retry else 1
        for attempt in range(1, attempts + 1):
            self.check_time()
            start = time.perf_counter()
            try:
                response = client.request(method, url, **kwargs)
            except httpx.HTTPError as error:
                self.recorder.add(route, (time.perf_counter() - start) * 1000, type(error).__name__, sent=start)
                self.recorder.problem(f"annotator {self.journey.number}: {route}: {error!r} (attempt {attempt})")
                if attempt == attempts:
                    raise
                time.sleep(0.2 * attempt)
                continue
            self.recorder.add(route, (time.perf_counter() - start) * 1000, response.status_code, sent=start)
            if response.status_code in expect:
                return response
            self.recorder.problem(
                f"annotator {self.journey.number}: {route} -> {response.status_code} {response.text[:200]!r}"
            )
            if response.status_code < 500 or attempt == attempts:
                raise RuntimeError(f"{route} answered {response.status_code}")
            time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    def check_time(self) -> None:
        if self.stop.is_set() or time.monotonic() > self.deadline:
            raise Stop

    def pause(self, seconds: float) -> None:
        if self.stop.wait(max(0.0, seconds)):
            raise Stop

    def think(self) -> None:
        if self.reading is not None:  # a human reading two summaries: seconds, drawn per comparison
            self.pause(self.rng.uniform(*self.reading))
        elif self.args.think > 0:
            self.pause(self.rng.uniform(0.5, 1.5) * self.args.think)

    def run(self) -> None:
        try:
            self._run()
        except Stop:
            pass
        except Exception as error:  # one annotator failing must not stop the others; it is reported
            self.recorder.problem(f"annotator {self.journey.number} stopped: {error!r}")
        finally:
            self.api.close()
            if self.browser is not None:
                self.browser.close()

    def _run(self) -> None:
        j = self.journey
        self.pause(self.start_delay)  # arrivals over a ramp (or within a second, 'human'); 0 for 'all'
        headers: dict[str, str] = {}
        if self.html:
            # The accept API never signs a browser in (login CSRF): a browser joins through the invitation
            # page, then asks the API, with its session and CSRF token, for the participation's API token.
            self.browser = httpx.Client(
                base_url=self.base_url, timeout=self.args.request_timeout, follow_redirects=False
            )
            join = f"/join/{self.invitation}/"
            page = self.browser.get(join)
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            self.browser.post(join, data={"consent": "on", "csrfmiddlewaretoken": csrf.group(1) if csrf else ""})
            headers = {"X-CSRFToken": self.browser.cookies.get("csrftoken") or ""}
        # Not retried: a second anonymous accept would use up another invitation.
        r = self.call(
            ACCEPT,
            "POST",
            f"/api/v1/invitations/{self.invitation}/accept/",
            client=self.browser or self.api,
            json={"consent": True},
            headers=headers,
            retry=False,
            expect=(200,) if self.html else (201,),
        )
        body = r.json()
        j.participation_id = pid = body["id"]
        # The API client authenticates by token only: with a session cookie DRF would demand CSRF tokens.
        self.api.cookies.clear()
        self.api.headers["Authorization"] = f"Token {body['token']}"
        self.call(PERSONA, "PUT", f"/api/v1/participations/{pid}/persona/", json=self.rng.choice(PERSONAS))

        for _ in range(self.args.queries):
            client_token = uuid.uuid4().hex
            payload = {"text": self.rng.choice(QUESTIONS), "client_token": client_token}
            r = self.call(SUBMIT, "POST", f"/api/v1/participations/{pid}/queries/", json=payload, expect=(201,))
            query = r.json()
            qid, index = query["id"], query["index"]
            if self.rng.random() < self.args.resend:
                again = self.call(
                    SUBMIT_RESENT,
                    "POST",
                    f"/api/v1/participations/{pid}/queries/",
                    json=payload,
                    expect=(201,),
                    headers=RESENT_HEADER,
                )
                if again.json()["id"] != qid:
                    self.recorder.problem(
                        f"annotator {j.number}: resubmitting query {qid} created {again.json()['id']}"
                    )
            if not self.wait_until_ready(qid):
                return
            self.rank(qid, index)
        self.call(FINISH, "POST", f"/api/v1/participations/{pid}/finish/")
        j.finished = True

    def wait_until_ready(self, qid: int) -> bool:
        delay = 0.8  # the waiting page's own polling schedule (static/js/app.js)
        limit = time.monotonic() + self.args.generation_timeout
        while time.monotonic() < limit:
            self.pause(delay)
            status = self.call(STATUS, "GET", f"/api/v1/queries/{qid}/").json()["status"]
            if status in ("ready", "ranked"):
                return True
            if status in ("failed", "discarded"):
                self.recorder.problem(f"annotator {self.journey.number}: query {qid} {status}")
                return False
            delay = min(delay * 1.25, 3.0)
        self.recorder.problem(
            f"annotator {self.journey.number}: query {qid} not ready after {self.args.generation_timeout}s"
        )
        return False

    def rank(self, qid: int, index: int) -> None:
        j = self.journey
        for _ in range(8):  # a four-candidate bracket has at most three matches
            if self.browser is not None:
                page = self.call(
                    COMPARE_HTML,
                    "GET",
                    f"/study/{self.slug}/q/{index}/compare/",
                    client=self.browser,
                    expect=(200, 302),
                )
                j.html_pages += page.status_code == 200
            r = self.call(CURRENT, "GET", f"/api/v1/queries/{qid}/current-match/", expect=(200, 204))
            if r.status_code == 204:
                j.queries_ranked += 1
                return
            match = r.json()
            if not (match.get("left") and match.get("right")):
                self.recorder.problem(f"annotator {j.number}: match {match.get('id')} served without both sides")
            self.think()
            choice = self.rng.choice(["left", "right", "neither"])
            url = f"/api/v1/matches/{match['id']}/choice/"
            answer = self.call(CHOICE, "POST", url, json={"choice": choice}).json()
            if answer.get("choice") != choice:
                self.recorder.problem(
                    f"annotator {j.number}: match {match['id']} stored {answer.get('choice')!r}, sent {choice!r}"
                )
            j.first_choices.setdefault(match["id"], choice)
            if self.rng.random() < self.args.resend:
                # The same answer again (a double click, a retry after a lost response) must succeed unchanged.
                again = self.call(CHOICE_RESENT, "POST", url, json={"choice": choice}, headers=RESENT_HEADER).json()
                j.resends += 1
                if again.get("choice") != choice or again.get("answered_at") != answer.get("answered_at"):
                    self.recorder.problem(
                        f"annotator {j.number}: re-sent choice on match {match['id']} changed the answer"
                    )
        self.recorder.problem(f"annotator {j.number}: query {qid} still had matches after 8 rounds")


class ClientProcesses:
    """The phase's annotators, as threads of this process or shared out over `processes` forked client
    processes. One interpreter's threads share its GIL: with 100 annotators in one process, a response that
    has arrived waits for the other annotators' threads to let go of it (5 ms per hand-off by default), a
    delay no browser has. Several processes keep that queue out of the client-observed latencies; each
    sends its latencies, problems, journeys and CPU time back when its annotators are done."""

    def __init__(self, annotators: list[Annotator], *, processes: int, recorder: Recorder, stop: threading.Event):
        self.annotators = annotators
        self.processes = max(1, min(processes, len(annotators)))
        self.recorder = recorder
        self.stop = stop
        self.children: list[tuple[Any, Any, list[Annotator]]] = []
        self.cpu_seconds = 0.0  # the client processes' CPU (this process's own is measured by the caller)
        self.threads: list[threading.Thread] = []

    def start(self, threads: list[threading.Thread]) -> None:
        if self.processes == 1:
            self.threads = threads
            for t in threads:
                t.start()
            return
        import multiprocessing

        context = multiprocessing.get_context("fork")  # the annotators and their clients exist already
        for n in range(self.processes):
            group = self.annotators[n :: self.processes]
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=self._run_group, args=(group, send), daemon=True)
            child.start()
            send.close()
            self.children.append((child, receive, group))

    def _run_group(self, group: list[Annotator], send: Any) -> None:
        """In a client process: its annotators as threads, then everything measured back up the pipe. SIGINT
        (Ctrl-C, or the parent stopping the phase) stops them as the phase's stop event does in one process."""
        stop = self.stop  # this process's copy, shared by its annotators
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        recorder = Recorder()
        for annotator in group:
            annotator.recorder = recorder
        threads = [threading.Thread(target=a.run, daemon=True) for a in group]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)
        send.send((recorder.state(), [a.journey for a in group], time.process_time()))
        send.close()

    def running(self) -> bool:
        """Wait up to half a second; whether any annotator is still at work."""
        workers: list[Any] = self.threads if self.processes == 1 else [child for child, _, _ in self.children]
        alive = [w for w in workers if w.is_alive()]
        if alive:
            alive[0].join(timeout=0.5)
        return any(w.is_alive() for w in workers)

    def finish(self, *, timeout: float) -> None:
        """Collect every client's results (after stopping the clients still at work: an interrupted phase)."""
        if self.processes == 1:
            for t in self.threads:
                t.join(timeout=timeout)
            return
        for child, _, _ in self.children:
            if child.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGINT)
        for child, receive, group in self.children:
            if receive.poll(timeout):
                state, journeys, cpu = receive.recv()
                self.recorder.merge(state)
                self.cpu_seconds += cpu
                for annotator, journey in zip(group, journeys, strict=True):
                    annotator.journey = journey
            else:
                self.recorder.problem(f"a client process ({len(group)} annotators) sent nothing back")
            if child.is_alive():
                child.terminate()
            child.join(timeout=5)


# --- the production setup --------------------------------------------------------------------------


class Services:
    """gunicorn and the Celery worker, each in its own process group so they can be stopped completely."""

    def __init__(self, *, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = spawn(argv, env=self.env, log=self.logs / f"{name}.log")
        self.procs[name] = proc
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def cpu_seconds(self, name: str) -> float:
        """CPU time (user + system) used so far by every live process in the group (Linux /proc)."""
        proc = self.procs.get(name)
        if proc is None:
            return 0.0
        return group_cpu_seconds(proc.pid)

    def stop_all(self, timeout: float = 30.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                # SIGTERM is a graceful stop for both: gunicorn drains its workers, Celery does a warm shutdown.
                with contextlib.suppress(ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGTERM)
        end = time.monotonic() + timeout
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, end - time.monotonic()))
        for proc in self.procs.values():
            # Children (gunicorn workers, Celery pool processes) share the group; make sure none remains.
            with contextlib.suppress(ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs.clear()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for(predicate: Any, *, timeout: float, what: str, procs: Services, name: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        proc = procs.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} while starting:\n{procs.log_tail(name)}")
        if predicate():
            return
        time.sleep(0.25)
    raise RuntimeError(f"{what} not ready after {timeout:.0f}s:\n{procs.log_tail(name)}")


# --- the run ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--annotators", type=int, default=100, help="simulated annotators per arrival pattern")
    p.add_argument(
        "--arrivals",
        nargs="+",
        choices=["all", "human", "ramp"],
        default=["all", "human", "ramp"],
        help="one phase per pattern, each with its own annotators and study: 'all' start at the same instant and "
        "answer after --think; 'human' start within --burst seconds and read each comparison for --reading "
        "seconds; 'ramp' arrive evenly over --ramp and answer after --think",
    )
    p.add_argument("--burst", type=float, default=1.0, help="seconds within which the 'human' phase's annotators start")
    p.add_argument(
        "--reading",
        type=float,
        nargs=2,
        default=[2.0, 8.0],
        metavar=("LOW", "HIGH"),
        help="'human' phase: seconds an annotator reads a comparison before answering (uniform, seeded per annotator)",
    )
    p.add_argument("--ramp", type=float, default=60.0, help="seconds over which the 'ramp' phase's annotators arrive")
    p.add_argument("--queries", type=int, default=2, help="questions each annotator asks and ranks")
    p.add_argument(
        "--think",
        type=float,
        default=1.0,
        help="mean seconds between seeing a match and answering it (uniform 0.5x-1.5x); 0 = no pause (stress)",
    )
    p.add_argument("--resend", type=float, default=0.3, help="fraction of choices (and query submissions) sent twice")
    p.add_argument("--html-sample", type=int, default=10, help="annotators who also load the HTML match page each time")
    p.add_argument(
        "--client-processes",
        type=int,
        default=4,
        help="processes the simulated annotators are shared out over (1: every annotator a thread of this "
        "process, whose GIL then delays the responses it reads)",
    )
    p.add_argument("--seed", type=int, default=20240607)
    p.add_argument("--db-name", default="bench_load", help="dropped and recreated each run; must start with 'bench'")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    p.add_argument("--redis-db", type=int, default=7, help="Redis database for the broker; flushed first")
    p.add_argument("--redis", default="redis://127.0.0.1:6379")
    p.add_argument("--gunicorn-workers", type=int, default=None, help="default: platform/gunicorn.conf.py (cores+1)")
    p.add_argument(
        "--celery-concurrency",
        type=int,
        default=None,
        help="processes of the annotator-queue worker; default: as docker-compose.yml runs it (platform/celery-worker.sh)",
    )
    p.add_argument(
        "--worker-nice",
        type=int,
        nargs="+",
        default=None,
        help="niceness of the annotator-queue worker; default: docker-compose.yml's WORKER_NICE for it. Several "
        "values: the phases run once per value, the worker restarted with it (a same-run comparison)",
    )
    p.add_argument(
        "--no-first-question",
        action="store_true",
        help="skip the first-question probe (fresh web workers with and without the broker warm-up)",
    )
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--generation-timeout", type=float, default=300.0, help="max seconds one query may take to be ready")
    p.add_argument(
        "--deadline", type=float, default=900.0, help="the whole journey phase stops after this many seconds"
    )
    p.add_argument("--keep-logs", action="store_true", help="keep the gunicorn, Celery and access logs")
    p.add_argument("--no-query-count", action="store_true", help="skip counting SQL queries per endpoint")
    p.add_argument("--show-sql", action="store_true", help="print the SQL of the measured endpoints")
    p.add_argument(
        "--cpu-walks",
        type=int,
        default=6,
        help="in-process journeys after one warm-up: the first counts the SQL statements, the others time the CPU",
    )
    args = p.parse_args()
    check_db_name(p, args.db_name)
    if args.client_processes < 1:
        p.error("--client-processes must be at least 1")
    if args.annotators < 1 or args.queries < 1 or args.cpu_walks < 2:
        p.error("--annotators and --queries must be at least 1, --cpu-walks at least 2")
    if args.burst < 0 or not 0 <= args.reading[0] <= args.reading[1]:
        p.error("--burst must be at least 0 and --reading LOW HIGH must satisfy 0 <= LOW <= HIGH")
    return args


def main() -> int:
    args = parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    port = free_port()
    broker = f"{args.redis}/{args.redis_db}"
    env = production_env(
        database_url=f"{args.postgres}/{args.db_name}",
        broker_url=broker,
        work=work,
        ALLOWED_HOSTS=HOST,
        SITE_URL=f"http://{HOST}:{port}",
        SECURE_SSL_REDIRECT="false",
        SESSION_COOKIE_SECURE="false",
        CSRF_COOKIE_SECURE="false",
        SECURE_HSTS_SECONDS="0",
        STATIC_ROOT=str(work / "static"),
        GUNICORN_BIND=f"{HOST}:{port}",
    )
    if args.gunicorn_workers:
        env["GUNICORN_WORKERS"] = str(args.gunicorn_workers)
    use_in_this_process(
        env,
        (
            "ALLOWED_HOSTS",
            "SECURE_SSL_REDIRECT",
            "SESSION_COOKIE_SECURE",
            "CSRF_COOKIE_SECURE",
            "STATIC_ROOT",
            "SITE_URL",
        ),
    )
    services = Services(env=env, logs=work)
    return supervise(
        lambda: run(args, env, services, port, work),
        stop=services.stop_all,
        stopping="gunicorn and the worker",
        work=work,
        keep_logs=args.keep_logs,
    )


def db_named(env: dict[str, str], application_name: str) -> dict[str, str]:
    """The environment with its database connections named (PostgreSQL's application_name, an OPTIONS entry
    through django-environ), so that the CPU of the web server's backends can be told from the workers'."""
    url = env["DATABASE_URL"]
    return {**env, "DATABASE_URL": f"{url}{'&' if '?' in url else '?'}application_name={application_name}"}


def compose_worker_env(service: str) -> dict[str, str]:
    """The environment docker-compose.yml gives a worker service beyond the shared app settings: the queue
    names, WORKER_NICE, CELERY_CONCURRENCY, CELERY_POOL; the benchmark runs its workers as the deployment does."""
    import yaml

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    environment = compose["services"][service].get("environment") or {}
    keys = ("CELERY_QUEUES", "WORKER_NICE", "CELERY_CONCURRENCY", "CELERY_POOL")
    return {k: str(v) for k, v in environment.items() if k in keys}


def gunicorn_argv(work: Path, *, conf: Path, access_log: Path) -> list[str]:
    # Server-side time per request and the worker's pid, to tell the server's own latency from the client's.
    return [
        str(VENV_BIN / "gunicorn"), "config.wsgi", "-c", str(conf),
        "--access-logfile", str(access_log), "--access-logformat", ACCESS_FORMAT,
    ]  # fmt: skip


def conf_without_warm_up(work: Path) -> Path:
    """platform/gunicorn.conf.py without its post_worker_init hook: the web workers as they were before it."""
    conf = REPO / "platform" / "gunicorn.conf.py"
    path = work / "gunicorn-cold.conf.py"
    path.write_text(
        f"exec(compile(open({str(conf)!r}).read(), {str(conf)!r}, 'exec'))\n"
        "post_worker_init = None  # noqa\ndel post_worker_init\n"
    )
    return path


def server_up(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def first_question_probe(args: argparse.Namespace, env: dict[str, str], work: Path) -> list[str]:
    """The first question each fresh web worker takes, with the platform's gunicorn config and without its
    broker warm-up (post_worker_init), side by side: gunicorn started afresh each time and warmed up as in the
    run, then two waves of concurrent question submissions from new annotators (workers x threads each); per
    worker, the server time of the first submission it served, beside the second wave's median. No Celery
    worker runs: the questions are only sent to the broker (flushed afterwards), in a study of their own."""
    from django.db import connections
    from rest_framework.authtoken.models import Token

    from annotation.services.participation import invitation_join
    from annotation.services.persona import persona_save
    from studies.models import Study
    from studies.services.invitation import invitation_create_bulk
    from studies.services.study import study_create

    lines: list[str] = []
    for label, conf in (
        ("without warm-up", conf_without_warm_up(work)),
        ("with warm-up (platform/gunicorn.conf.py)", REPO / "platform" / "gunicorn.conf.py"),
    ):
        port = free_port()
        base_url = f"http://{HOST}:{port}"
        penv = {**env, "GUNICORN_BIND": f"{HOST}:{port}"}
        services = Services(env=penv, logs=work)
        access = work / f"access-probe-{port}.log"
        try:
            services.start(f"gunicorn-probe-{port}", gunicorn_argv(work, conf=conf, access_log=access))
            wait_for(
                lambda u=base_url: server_up(u),
                timeout=90,
                what="gunicorn",
                procs=services,
                name=f"gunicorn-probe-{port}",
            )
            log = (work / f"gunicorn-probe-{port}.log").read_text(errors="replace")
            workers = len(re.findall(r"Booting worker", log))
            threads = int(env.get("GUNICORN_THREADS", "4"))
            wave = max(workers, 1) * threads
            study = study_create(
                slug=f"probe-{secrets.token_hex(3)}", title="First-question probe", status=Study.Status.OPEN
            )
            tokens = []
            for invitation in invitation_create_bulk(study=study, count=2 * wave):
                participation, _ = invitation_join(token=invitation.token, annotator=None, consent=True)
                persona_save(participation=participation, data=PERSONAS[0])
                tokens.append((participation.pk, Token.objects.get_or_create(user=participation.annotator)[0].key))
            connections.close_all()
            # Let every worker finish booting (the hook runs before it serves), then the same warm-up as the run.
            time.sleep(2)
            warm_up(base_url, requests=8 * max(workers, 1))
            offset = access.stat().st_size if access.exists() else 0

            def submit(pid: int, key: str, url: str = base_url) -> None:
                with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Token {key}"}) as c:
                    c.post(
                        f"/api/v1/participations/{pid}/queries/",
                        json={"text": QUESTIONS[0], "client_token": uuid.uuid4().hex},
                    )

            for part in (tokens[:wave], tokens[wave:]):
                ts = [threading.Thread(target=submit, args=t, daemon=True) for t in part]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(timeout=90)
            time.sleep(0.5)
            first: dict[str, float] = {}
            rest: list[float] = []
            with access.open("rb") as f:
                f.seek(offset)
                for line in f.read().decode(errors="replace").splitlines():
                    parts = line.split()
                    if len(parts) == 6 and parts[0] == "POST" and parts[1].endswith("/queries/") and parts[3].isdigit():
                        ms = int(parts[3]) / 1000
                        if parts[4] not in first:
                            first[parts[4]] = ms
                        else:
                            rest.append(ms)
            values = sorted(first.values())
            lines.append(
                f"  {label:<42} first question per worker (ms): {', '.join(f'{v:.0f}' for v in values)}; "
                f"others median {percentile(rest, 50):.0f} ms (n={len(rest)})"
            )
        finally:
            services.stop_all()
            flush_broker(f"{args.redis}/{args.redis_db}")
    return lines


def run(args: argparse.Namespace, env: dict[str, str], services: Services, port: int, work: Path) -> int:
    """0: answers verified and latency target met; 2: verified but target missed; 1: anything lost or failed."""
    base_url = f"http://{HOST}:{port}"
    print(f"database {args.db_name}, broker {args.redis}/{args.redis_db}, server {base_url}")
    t0 = time.monotonic()
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    manage(env, "migrate", "--noinput")
    manage(env, "collectstatic", "--noinput")
    flush_broker(f"{args.redis}/{args.redis_db}")

    import django

    sys.path.insert(0, str(REPO))
    django.setup()
    from django.db import connections

    from studies.models import Study
    from studies.services.invitation import invitation_create_bulk
    from studies.services.study import study_create

    probe: list[str] = []
    if not args.no_first_question:
        print("first-question probe: fresh web workers without and with the broker warm-up ...")
        probe = first_question_probe(args, env, work)
        for line in probe:
            print(line)

    nices: list[int | None] = list(args.worker_nice) if args.worker_nice else [None]
    phases = []
    for nice in nices:
        for arrival in args.arrivals:
            slug = f"bench-{arrival}-{secrets.token_hex(3)}"
            study = study_create(
                slug=slug,
                title="Load benchmark",
                status=Study.Status.OPEN,
                queries_per_annotator=max(args.queries, 2) + 1,
            )
            # More than the annotators: the in-process query count warms up on one and measures the others.
            tokens = [i.token for i in invitation_create_bulk(study=study, count=args.annotators + 1 + args.cpu_walks)]
            phases.append((nice, arrival, study, slug, tokens))
    connections.close_all()
    print(f"setup (database, migrations, static files, studies) {time.monotonic() - t0:.1f}s")

    conf = REPO / "platform" / "gunicorn.conf.py"
    services.env = db_named(env, WEB_DB_NAME)
    services.start("gunicorn", gunicorn_argv(work, conf=conf, access_log=work / "access.log"))
    services.env = env
    # The workers as docker-compose.yml runs them (platform/celery-worker.sh): one per queue, its concurrency and
    # niceness; the research worker idles here but shares the host as it does in the one-host deployment.
    worker_script = ["sh", str(REPO / "platform" / "celery-worker.sh")]
    name = f"bench-load-{os.getpid()}"

    def annotator_worker(nice: int | None) -> dict[str, str]:
        """(Re)start the annotator-queue worker as docker-compose.yml runs it, or at niceness `nice`."""
        worker_env = compose_worker_env("worker-annotator")
        if args.celery_concurrency is not None:
            worker_env["CELERY_CONCURRENCY"] = str(args.celery_concurrency)
        if nice is not None:
            worker_env["WORKER_NICE"] = str(nice)
        worker_env = {k: v for k, v in worker_env.items() if not (k == "WORKER_NICE" and v in ("", "0"))}
        old = services.procs.pop("celery", None)
        if old is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(old.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                old.wait(timeout=60)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(old.pid, signal.SIGKILL)
            (work / "celery.log").unlink(missing_ok=True)
        services.env = {**db_named(env, WORKER_DB_NAME), **worker_env}
        services.start("celery", [*worker_script, "-n", f"{name}-annotator@%h", "--without-gossip", "--without-mingle"])
        services.env = env
        wait_for(
            lambda: " ready." in (work / "celery.log").read_text(errors="replace"),
            timeout=90,
            what="annotator worker",
            procs=services,
            name="celery",
        )
        return worker_env

    annotator_env = annotator_worker(nices[0])
    for role in ("retrieval", "research"):
        services.env = {**db_named(env, WORKER_DB_NAME), **compose_worker_env(f"worker-{role}")}
        services.start(
            f"celery-{role}", [*worker_script, "-n", f"{name}-{role}@%h", "--without-gossip", "--without-mingle"]
        )
    services.env = env

    wait_for(lambda: server_up(base_url), timeout=90, what="gunicorn", procs=services, name="gunicorn")
    for worker in ("celery-retrieval", "celery-research"):
        wait_for(
            lambda w=worker: " ready." in (work / f"{w}.log").read_text(errors="replace"),
            timeout=90,
            what=f"{worker} worker",
            procs=services,
            name=worker,
        )
    workers = len(re.findall(r"Booting worker", (work / "gunicorn.log").read_text(errors="replace")))
    warm_up(base_url, requests=8 * max(workers, 1))
    setup = (
        f"gunicorn ({workers} workers x {env.get('GUNICORN_THREADS', '4')} threads, platform/gunicorn.conf.py); "
        f"annotator worker concurrency {annotator_env.get('CELERY_CONCURRENCY', '4 (script default)')}, "
        f"nice {'/'.join(str(n) for n in args.worker_nice) if args.worker_nice else annotator_env.get('WORKER_NICE', '0')}"
        f"; research worker {compose_worker_env('worker-research')}"
    )
    print(f"{setup}; up after {time.monotonic() - t0:.1f}s")

    status = 0
    summary: list[str] = []
    current = nices[0]
    for nice, arrival, study, slug, tokens in phases:
        if nice != current:
            annotator_worker(nice)
            current = nice
        code, line = run_phase(args, services, base_url, work, arrival=arrival, study=study, slug=slug, tokens=tokens)
        status = max(status, code) if code != 1 and status != 1 else 1
        worker_nice = nice if nice is not None else annotator_env.get("WORKER_NICE", "0")
        summary.append(f"worker nice {worker_nice}, {line}")
    if not args.no_query_count:
        count_queries(args, phases[-1][4][-(1 + args.cpu_walks) :], phases[-1][3])
    print("\nsummary (p95 ms, first sends):")
    print(f"  setup: {setup}")
    for line in probe:
        print(line)
    for line in summary:
        print(f"  {line}")
    return status


def run_phase(
    args: argparse.Namespace,
    services: Services,
    base_url: str,
    work: Path,
    *,
    arrival: str,
    study: Any,
    slug: str,
    tokens: list[str],
) -> tuple[int, str]:
    access_offset = (work / "access.log").stat().st_size if (work / "access.log").exists() else 0
    recorder = Recorder()
    stop = threading.Event()
    deadline = time.monotonic() + args.deadline + (args.ramp if arrival == "ramp" else 0)
    spread = args.ramp if arrival == "ramp" else 0.0
    arrivals = random.Random(f"{args.seed}:arrivals")
    annotators = [
        Annotator(
            number=n,
            args=args,
            base_url=base_url,
            token=tokens[n],
            slug=slug,
            recorder=recorder,
            stop=stop,
            deadline=deadline,
            html=n < args.html_sample,
            start_delay=(
                arrivals.uniform(0, args.burst) if arrival == "human" else spread * n / max(args.annotators, 1)
            ),
            reading=(args.reading[0], args.reading[1]) if arrival == "human" else None,
        )
        for n in range(args.annotators)
    ]
    threads = [threading.Thread(target=a.run, name=f"annotator-{a.journey.number}", daemon=True) for a in annotators]
    how = {
        "all": "all at once",
        "human": f"starting within {args.burst:g}s, reading {args.reading[0]:g}-{args.reading[1]:g}s",
        "ramp": f"arriving over {args.ramp:.0f}s",
    }[arrival]
    pause = "reading" if arrival == "human" else f"think {args.think}s"
    print(
        f"\n=== {args.annotators} annotators {how} x {args.queries} queries, {pause}, "
        f"resend {args.resend:.0%}, HTML sample {min(args.html_sample, args.annotators)} ..."
    )
    names = ("gunicorn", "celery", "celery-retrieval", "celery-research")
    cpu_before = {name: services.cpu_seconds(name) for name in names}
    admin_url = f"{args.postgres}/postgres"
    pg_web = PostgresCpu(admin_url, database=args.db_name, application_name=WEB_DB_NAME)
    pg_workers = PostgresCpu(admin_url, database=args.db_name, application_name=WORKER_DB_NAME)
    for pg in (pg_web, pg_workers):
        pg.start()
    load_before = os.getloadavg()
    client_cpu_before = time.process_time()
    if load_before[0] > (os.cpu_count() or 1):
        print(
            f"warning: load average {load_before[0]:.1f} on {os.cpu_count()} cores before the run; "
            "other work on this machine inflates the latencies"
        )
    started = time.monotonic()
    # (perf_counter, gunicorn's CPU seconds, the annotator worker's, the machine's steal) once a second, for
    # the timeline.
    cpu_samples: list[tuple[float, float, float, float]] = []

    def sample_cpu() -> None:
        cpu_samples.append(
            (
                time.perf_counter(),
                services.cpu_seconds("gunicorn"),
                services.cpu_seconds("celery"),
                machine_cpu_seconds()[1],
            )
        )

    sample_cpu()
    clients = ClientProcesses(annotators, processes=args.client_processes, recorder=recorder, stop=stop)
    try:
        clients.start(threads)
        sampled = time.monotonic()
        while clients.running():
            if time.monotonic() - sampled > 1.0:  # backends that end between samples keep their last figure
                sampled = time.monotonic()
                for pg in (pg_web, pg_workers):
                    pg.sample()
                sample_cpu()
    finally:
        stop.set()
        clients.finish(timeout=args.request_timeout + 5)
    wall = time.monotonic() - started
    sample_cpu()
    load_after = os.getloadavg()
    cpu_used = {name: services.cpu_seconds(name) - cpu_before[name] for name in names}
    steal = (cpu_samples[-1][3] - cpu_samples[0][3]) / (wall * (os.cpu_count() or 1))
    for pg in (pg_web, pg_workers):
        pg.sample()
    time.sleep(0.5)  # let gunicorn flush its access log
    server = server_latencies(work / "access.log", access_offset)

    client_cpu = time.process_time() - client_cpu_before + clients.cpu_seconds
    passed = report(args, recorder, annotators, wall, server)
    print(
        f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} at the end, on {os.cpu_count()} cores; "
        f"CPU used during the run: gunicorn {cpu_used['gunicorn']:.1f}s, annotator worker {cpu_used['celery']:.1f}s, "
        f"retrieval worker {cpu_used['celery-retrieval']:.1f}s, research worker {cpu_used['celery-research']:.1f}s, "
        f"this client {client_cpu:.1f}s (of {wall * (os.cpu_count() or 1):.0f} core-seconds); PostgreSQL backends: "
        f"the web server's {pg_web.seconds():.1f}s, the workers' {pg_workers.seconds():.1f}s; "
        f"stolen by the hypervisor for other guests: {steal:.0%} of the cores"
    )
    served = sum(len(v) for v in server.values())
    if served:
        web_ms = cpu_used["gunicorn"] * 1000 / served
        pg_ms = pg_web.seconds() * 1000 / served
        cores = os.cpu_count() or 1
        mean_in_flight, at_send = recorder.in_flight()
        queue95 = percentile([float(n) for n in at_send], 95)
        print(
            f"server CPU per request (all {served} requests): gunicorn {web_ms:.1f} ms + its PostgreSQL backends "
            f"{pg_ms:.1f} ms = {web_ms + pg_ms:.1f} ms; requests in flight: mean {mean_in_flight:.1f} (Little's law), "
            f"at send p50 {percentile([float(n) for n in at_send], 50):.0f}, p95 {queue95:.0f}, max {max(at_send)}; "
            f"CPU floor for a request sent behind the p95 queue: {web_ms + pg_ms:.1f} ms x {queue95:.0f} / {cores} "
            f"cores = {(web_ms + pg_ms) * queue95 / cores:.0f} ms (before the workers' share of the cores)"
        )
    timeline(recorder, cpu_samples)
    verified = verify(args, study.pk, annotators)
    waits = generation_waits(study.pk)
    if waits:
        print(
            f"questions ready (asked -> bracket drawn, from the database: what an annotator waits on the waiting "
            f"page), {len(waits)}: p50 {percentile(waits, 50):.2f} s, p95 {percentile(waits, 95):.2f} s, "
            f"max {max(waits):.2f} s"
        )
    p95s = ", ".join(
        f"{name} {percentile(recorder.latencies.get(route, []), 95):.0f}" for route, name in TARGETS.items()
    )
    resent = ", ".join(
        f"{route.split()[1].split('/')[3]} {percentile(recorder.latencies.get(route, []), 95):.0f}"
        for route in (CHOICE_RESENT, SUBMIT_RESENT)
        if recorder.latencies.get(route)
    )
    line = (
        f"{args.annotators} {how}: {p95s}; re-sent {resent or '-'}; "
        f"question ready p50/p95 {percentile(waits, 50):.1f}/{percentile(waits, 95):.1f} s; "
        f"load {load_before[0]:.1f}->{load_after[0]:.1f}; steal {steal:.0%}; "
        f"{'verified' if verified else 'VERIFICATION FAILED'}; target {'met' if passed else 'MISSED'}"
    )
    if not verified or recorder.problems or passed is None:
        return 1, line
    return (0 if passed else 2), line


def timeline(recorder: Recorder, cpu_samples: list[tuple[float, float, float, float]]) -> None:
    """The phase in windows of 5 s (or a twelfth of the phase when longer), by when requests were sent: how
    many, the count and p95 of the three target routes, the most requests in flight, and the share of the
    machine's cores that gunicorn and the annotator worker used, and that the hypervisor gave to other guests
    (steal), from the once-a-second samples. It tells a p95 made by the start's burst from one made while
    generation shares the cores, or while a neighbour on the host took them."""
    if not recorder.spans or len(cpu_samples) < 2:
        return
    cores = os.cpu_count() or 1
    start, end = cpu_samples[0][0], max(cpu_samples[-1][0], max(t1 for _, t1 in recorder.spans))
    width = max(5.0, (end - start) / 12)
    windows = max(1, math.ceil((end - start) / width))

    def cpu_at(t: float, column: int) -> float:
        """A process group's CPU seconds at `t`, linear between the samples around it."""
        before = max((s for s in cpu_samples if s[0] <= t), default=cpu_samples[0], key=lambda s: s[0])
        after = min((s for s in cpu_samples if s[0] >= t), default=cpu_samples[-1], key=lambda s: s[0])
        if after[0] <= before[0]:
            return before[column]
        return before[column] + (after[column] - before[column]) * (t - before[0]) / (after[0] - before[0])

    sent = [0] * windows
    target: list[dict[str, list[float]]] = [defaultdict(list) for _ in range(windows)]
    for (t0, t1), route in zip(recorder.spans, recorder.routes, strict=True):
        w = min(windows - 1, max(0, int((t0 - start) // width)))
        sent[w] += 1
        if route in TARGETS:
            target[w][route].append((t1 - t0) * 1000)
    # The most requests in flight in each window: the count after every send and answer, and the count
    # carried into the window from the one before.
    peak = [0] * windows
    current = 0
    for t, step in sorted([(t0, 1) for t0, _ in recorder.spans] + [(t1, -1) for _, t1 in recorder.spans]):
        w = min(windows - 1, max(0, int((t - start) // width)))
        current += step
        peak[w] = max(peak[w], current)
    carried = 0
    for w in range(windows):
        peak[w] = max(peak[w], carried)
        window_end = start + (w + 1) * width
        carried = sum(1 for t0, t1 in recorder.spans if t0 < window_end <= t1)

    widths = {route: max(len(name), 11) for route, name in TARGETS.items()}

    def cell(values: list[float]) -> str:
        return f"{len(values):>4} {percentile(values, 95):>6.0f}" if values else f"{0:>4} {'-':>6}"

    names = " | ".join(f"{name:>{widths[route]}}" for route, name in TARGETS.items())
    print(f"\ntimeline ({width:.0f} s windows by send time; target routes: count and p95 ms; CPU: % of {cores} cores)")
    print(f"{'t (s)':>9} {'sent':>5} | {names} | {'in flight':>9} | {'gunicorn':>8} {'annotator':>9} {'steal':>5}")
    print(f"{'':>9} {'':>5} | " + " | ".join(f"{'n    p95':>{widths[route]}}" for route in TARGETS) + " |")
    for w in range(windows):
        a, b = start + w * width, min(end, start + (w + 1) * width)
        span = max(b - a, 1e-9)
        web = (cpu_at(b, 1) - cpu_at(a, 1)) / span / cores * 100
        worker = (cpu_at(b, 2) - cpu_at(a, 2)) / span / cores * 100
        stolen = (cpu_at(b, 3) - cpu_at(a, 3)) / span / cores * 100
        cells = " | ".join(f"{cell(target[w].get(route, [])):>{widths[route]}}" for route in TARGETS)
        print(
            f"{a - start:>4.0f}-{b - start:<4.0f} {sent[w]:>5} | {cells} | {peak[w]:>9} | {web:>7.0f}% {worker:>8.0f}% {stolen:>4.0f}%"
        )


def warm_up(base_url: str, *, requests: int) -> None:
    """Each gunicorn worker imports the URLconf, DRF and the templates on its first requests; a few unmeasured
    concurrent requests spread over the workers keep that one-off cost out of the percentiles."""

    def hit() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for path in ("/", "/api/v1/queries/1/", "/api/v1/queries/1/current-match/", "/study/x/q/1/compare/"):
                with contextlib.suppress(httpx.HTTPError):
                    client.get(path)

    threads = [threading.Thread(target=hit, daemon=True) for _ in range(requests // 4 or 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)


def server_latencies(path: Path, offset: int) -> dict[str, list[float]]:
    """Milliseconds gunicorn spent on each request of the run, grouped by route pattern."""
    result: dict[str, list[float]] = defaultdict(list)
    if not path.exists():
        return result
    with path.open("rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 6 or not parts[3].isdigit():
                continue
            key = f"{parts[0]} {parts[1]}"
            for pattern, route in ROUTE_PATTERNS:
                if pattern.match(key):
                    if parts[5] == "resent":
                        route = RESENT_OF.get(route, route)
                    result[route].append(int(parts[3]) / 1000)
                    break
    return result


def report(
    args: argparse.Namespace,
    recorder: Recorder,
    annotators: list[Annotator],
    wall: float,
    server: dict[str, list[float]],
) -> bool | None:
    total = sum(len(v) for v in recorder.latencies.values())
    print()
    print("client-observed latency (ms); 'server' = time inside gunicorn from its access log")
    header = (
        f"{'endpoint':<48} {'count':>6} {'non-2xx':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7}"
        f" | {'server p50':>10} {'p95':>7}"
    )
    print(header)
    print("-" * len(header))
    for route in ROUTE_ORDER:
        values = recorder.latencies.get(route)
        if not values:
            continue
        bad = sum(n for status, n in recorder.statuses[route].items() if not (isinstance(status, int) and status < 400))
        own = server.get(route)
        own_cols = f"{percentile(own, 50):>10.1f} {percentile(own, 95):>7.1f}" if own else f"{'-':>10} {'-':>7}"
        print(
            f"{route:<48} {len(values):>6} {bad:>7} {percentile(values, 50):>7.1f} {percentile(values, 95):>7.1f} "
            f"{percentile(values, 99):>7.1f} {max(values):>7.1f} | {own_cols}"
        )
    print("-" * len(header))
    done = sum(a.journey.finished for a in annotators)
    print(
        f"wall time {wall:.1f}s, {total} requests, {total / wall:.1f} req/s; "
        f"{done}/{len(annotators)} annotators finished, "
        f"{sum(a.journey.queries_ranked for a in annotators)} queries ranked, "
        f"{sum(len(a.journey.first_choices) for a in annotators)} choices (+{sum(a.journey.resends for a in annotators)} re-sent)"
    )
    print()
    verdict: bool | None = True
    for route, name in TARGETS.items():
        values = recorder.latencies.get(route)
        if not values:
            verdict = None
            continue
        p95 = percentile(values, 95)
        ok = p95 < TARGET_MS
        required = True  # the target: the match page, the current match and submitting a choice
        if required and not ok:
            verdict = False
        print(
            f"target: p95 {name} < {TARGET_MS:.0f} ms at {args.annotators} annotators: "
            f"{p95:.1f} ms {'PASS' if ok else 'FAIL'}{'' if required else ' (informational)'}"
        )
    if recorder.problems:
        print(f"\n{len(recorder.problems)} problems during the run (first 15):")
        for line in recorder.problems[:15]:
            print(f"  {line}")
    return verdict


def verify(args: argparse.Namespace, study_id: int, annotators: list[Annotator]) -> bool:
    """Compare what the database holds with what the clients sent."""
    from django.db import connection
    from django.db.models import Count

    from annotation.models import Judgment, Match, Participation, Query

    failures: list[str] = []
    sent: dict[int, str] = {}
    for a in annotators:
        sent.update(a.journey.first_choices)
    judgments = {
        j.match_id: j for j in Judgment.objects.filter(match__bracket__query__participation__study_id=study_id)
    }

    duplicated = list(
        Judgment.objects.values("match_id").annotate(n=Count("id")).filter(n__gt=1).values_list("match_id", flat=True)
    )
    if duplicated:
        failures.append(f"matches with more than one judgment: {duplicated[:10]}")
    lost = sorted(set(sent) - set(judgments))
    extra = sorted(set(judgments) - set(sent))
    if lost:
        failures.append(f"{len(lost)} answered matches have no judgment: {lost[:10]}")
    if extra:
        failures.append(f"{len(extra)} judgments no client sent first: {extra[:10]}")
    changed = [m for m, choice in sent.items() if m in judgments and judgments[m].choice != choice]
    if changed:
        failures.append(f"{len(changed)} judgments differ from the choice sent: {changed[:10]}")
    if len(judgments) != len(sent):
        failures.append(f"{len(judgments)} judgments in the database, {len(sent)} distinct first submissions")

    queries = list(Query.objects.filter(participation__study_id=study_id).prefetch_related("bracket__matches"))
    expected_queries = args.annotators * args.queries
    ranked = [q for q in queries if q.status == Query.Status.RANKED]
    if len(queries) != expected_queries:
        failures.append(f"{len(queries)} queries stored, {expected_queries} asked (duplicate or lost submissions)")
    if len(ranked) != expected_queries:
        failures.append(f"{len(ranked)} of {expected_queries} queries ranked")
    finals_played = finals_skipped = 0
    for q in ranked:
        matches = {m.label: m for m in q.bracket.matches.all()}
        first = [matches.get("round1_ab"), matches.get("round1_cd")]
        final = matches.get("final")
        if None in first or final is None or len(matches) != 3:
            failures.append(f"query {q.pk}: matches {sorted(matches)}")
            continue
        decided = all(m.pk in judgments and judgments[m.pk].choice != "neither" for m in first)
        answered = [m for m in matches.values() if m.pk in judgments]
        if any(m.pk not in judgments for m in first):
            failures.append(f"query {q.pk}: a first-round match has no judgment")
        elif decided:
            finals_played += 1
            if final.pk not in judgments or len(answered) != 3:
                failures.append(f"query {q.pk}: both round-1 matches decided but {len(answered)} judgments")
        else:
            finals_skipped += 1
            if final.status != Match.Status.SKIPPED or final.pk in judgments or len(answered) != 2:
                failures.append(
                    f"query {q.pk}: a 'neither' in round 1 but final {final.status}, {len(answered)} judgments"
                )
        for m in matches.values():
            has = m.pk in judgments
            if (m.status == Match.Status.ANSWERED) != has:
                failures.append(f"match {m.pk}: status {m.status} but judgment {'present' if has else 'absent'}")
    unfinished_count = Participation.objects.filter(study_id=study_id, completed_at__isnull=True).count()
    finished_clients = {a.journey.participation_id for a in annotators if a.journey.finished}
    stored_finished = set(
        Participation.objects.filter(study_id=study_id, completed_at__isnull=False).values_list("pk", flat=True)
    )
    if finished_clients != stored_finished:
        failures.append(
            f"finished participations differ: clients {len(finished_clients)}, database {len(stored_finished)}"
        )
    connection.close()

    print()
    print(
        f"database check: {len(judgments)} judgments for {len(sent)} distinct first submissions; "
        f"{len(ranked)}/{expected_queries} queries ranked ({finals_played} with a final, {finals_skipped} final skipped); "
        f"{len(stored_finished)} participations finished, {unfinished_count} not"
    )
    if failures:
        print("VERIFICATION FAILED:")
        for line in failures[:30]:
            print(f"  {line}")
        return False
    print(
        "VERIFICATION PASSED: no answer lost or duplicated; every ranked query holds exactly the judgments its matches need"
    )
    return True


def generation_waits(study_id: int) -> list[float]:
    """Seconds from each question's submission to its bracket: retrieval and the four generations, what the
    annotator waits for (the bracket is drawn once the last candidate has committed)."""
    from django.db import connection

    from annotation.models import Bracket

    rows = Bracket.objects.filter(query__participation__study_id=study_id).values_list(
        "created_at", "query__created_at"
    )
    waits = [(drawn - asked).total_seconds() for drawn, asked in rows]
    connection.close()
    return waits


def count_queries(args: argparse.Namespace, tokens: list[str], slug: str) -> None:
    """Extra annotators walk the journey in-process (same database, same running worker) so that the SQL, the
    Python CPU and the PostgreSQL backend's CPU behind each endpoint can be measured without contention; the
    first walk only warms up imports and caches. These are the numbers to optimise when the latency target is
    missed. Each walker joins in a browser session (the HTML match page is its page, not a redirect to sign in)
    and answers through the API with its token, like the HTML sample of the load phases."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    counts: dict[str, list[int]] = defaultdict(list)
    # One handler for every walker's clients: a new Client loads the middleware on its first request
    # (whitenoise scans every static file, ~80 ms), which would be counted to that request's route.
    handler = Client().handler
    cpu: dict[str, list[float]] = defaultdict(list)
    pg_cpu: dict[str, list[float]] = defaultdict(list)
    sql: dict[str, list[str]] = {}

    def walk(token: str, *, mode: str) -> bool:
        """mode 'warm': nothing recorded; 'count': the SQL statements; 'time': the CPU."""

        def measure(route: str, client: Client, method: str, url: str, data: Any = None) -> Any:
            if mode == "count":
                with CaptureQueriesContext(connection) as ctx:
                    response = getattr(client, method)(url, data=data, content_type="application/json")
                counts[route].append(len(ctx.captured_queries))
                if len(ctx.captured_queries) >= len(sql.get(route, [])):
                    sql[route] = [q["sql"] for q in ctx.captured_queries]  # keep the heaviest request's SQL
                return response
            connection.ensure_connection()
            backend = connection.connection.info.backend_pid
            pg_start = process_cpu_ns(backend)
            # CaptureQueriesContext's debug cursor is kept out of the CPU figures: one pass counts, one times.
            start = time.thread_time()
            response = getattr(client, method)(url, data=data, content_type="application/json")
            spent = (time.thread_time() - start) * 1000
            pg_end = process_cpu_ns(backend)
            if mode == "time":
                cpu[route].append(spent)
                if pg_start is not None and pg_end is not None:
                    pg_cpu[route].append((pg_end - pg_start) / 1e6)
            return response

        browser = Client(HTTP_HOST=HOST)
        browser.handler = handler
        browser.post(f"/join/{token}/", {"consent": "on"})
        r = measure(ACCEPT, browser, "post", f"/api/v1/invitations/{token}/accept/", {"consent": True})
        if r.status_code != 200:
            print(f"\nquery count skipped: accept answered {r.status_code}")
            return False
        body = r.json()
        pid = body["id"]
        api = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Token {body['token']}")
        api.handler = handler
        measure(PERSONA, api, "put", f"/api/v1/participations/{pid}/persona/", PERSONAS[0])
        payload = {"text": QUESTIONS[0], "client_token": uuid.uuid4().hex}
        r = measure(SUBMIT, api, "post", f"/api/v1/participations/{pid}/queries/", payload)
        qid, index = r.json()["id"], r.json()["index"]
        end = time.monotonic() + args.generation_timeout
        while measure(STATUS, api, "get", f"/api/v1/queries/{qid}/").json()["status"] != "ready":
            if time.monotonic() > end:
                print("\nquery count skipped: generation did not finish")
                return False
            time.sleep(0.5)
        for _ in range(8):
            measure(COMPARE_HTML, browser, "get", f"/study/{slug}/q/{index}/compare/")
            r = measure(CURRENT, api, "get", f"/api/v1/queries/{qid}/current-match/")
            if r.status_code == 204:
                break
            url = f"/api/v1/matches/{r.json()['id']}/choice/"
            choice = "left"  # always decided, so the final (the heaviest choice request) is played
            measure(CHOICE, api, "post", url, {"choice": choice})
            measure(CHOICE, api, "post", url, {"choice": choice})  # the idempotent repeat
        measure(FINISH, api, "post", f"/api/v1/participations/{pid}/finish/")
        return True

    try:
        modes = ["warm", "count"] + ["time"] * (len(tokens) - 2)
        if not all(walk(token, mode=mode) for token, mode in zip(tokens, modes, strict=True)):
            return
    finally:
        connection.close()
    print(
        "\nSQL statements and CPU per request (in-process, no load; Django test client, same database; "
        f"statements from one walk, CPU from {len(tokens) - 2}: Python thread time + the PostgreSQL backend's):"
    )
    for route in ROUTE_ORDER:
        if route in counts and cpu.get(route):
            values = counts[route]
            web, pg = percentile(cpu[route], 50), percentile(pg_cpu.get(route, []), 50)
            print(
                f"  {route:<48} {min(values):>3}-{max(values):<3} statements   CPU median {web:5.1f} ms "
                f"+ PostgreSQL {pg:4.1f} ms = {web + pg:5.1f} ms, max {max(cpu[route]):5.1f} ms   (n={len(cpu[route])})"
            )
    if args.show_sql:
        for route in ROUTE_ORDER:
            if route not in sql:
                continue
            print(f"\n{route} (heaviest request):")
            for statement in sql.get(route, []):
                print(f"  {statement[:200]}")


if __name__ == "__main__":
    sys.exit(main())
