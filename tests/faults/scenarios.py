"""Fault scenarios shared by tests/faults and bench/faults.py. Each one causes its fault for real (a
worker process killed, a closed broker port, a hanging model server, two requests at the same moment),
then reports what the annotator (or researcher) saw and what was stored: rows left in a non-terminal
state after the sweepers ran, answers or questions lost, rows or answers duplicated."""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import unescape
from typing import Any

from django.db import connections
from django.test import Client

from analysis.models import ResearchJob
from annotation.models import Bracket, Candidate, Judgment, Match, Participation, Query
from scoring.models import CandidateScore, ScoringRun
from studies.models import Study
from tests.faults import actions
from tests.integration.worker import CeleryWorker, WorkerPool, celery_app_sending_to
from tests.support.openai_standin import default_responder, openai_standin
from tests.support.openalex_standin import openalex_standin

# The target: a killed worker's work is picked up (and the row ends) in under one minute.
BOUND_S = 60.0
CLOSED_BROKER = "redis://127.0.0.1:1/0"
QUESTION = "How does rotating night shift work affect nurses' sleep and patient safety?"
OPENALEX_QUESTION = "How do persona-aware summaries of scientific abstracts change which summary readers prefer?"
TERMINAL_QUERY = (Query.Status.READY, Query.Status.FAILED, Query.Status.RANKED, Query.Status.DISCARDED)
TERMINAL_CANDIDATE = (Candidate.Status.DONE, Candidate.Status.FAILED)
TERMINAL_JOB = ("done", "failed")


# --- what a scenario reports ----------------------------------------------------------------------


@dataclass
class Outcome:
    fault: str
    case: str
    stuck: int = 0
    lost: int = 0
    duplicated: int = 0
    visible: str = ""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settled_s: float | None = None

    def expect(self, ok: Any, problem: str) -> bool:
        if not ok:
            self.problems.append(problem)
        return bool(ok)

    def see(self, text: str) -> None:
        self.visible = f"{self.visible}; {text}" if self.visible else text

    def report(self) -> str:
        lines = [f"{self.fault} [{self.case}]: stuck {self.stuck}, lost {self.lost}, duplicated {self.duplicated}"]
        lines.append(f"  annotator saw: {self.visible}")
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# --- the rig: workers, sweepers, a live server and a browser when there is one ------------------------


@dataclass
class Rig:
    pool: WorkerPool
    live_url: str | None = None
    browser: Any = None
    slug_prefix: str = "fault"
    _sweepers: dict[str, float] | None = None

    def slug(self, name: str) -> str:
        return f"{self.slug_prefix}-{name}-{secrets.token_hex(3)}"

    def start_worker(
        self, name: str, *, env: dict[str, str] | None = None, concurrency: int = 2, pool: str = "prefork"
    ) -> CeleryWorker:
        worker = CeleryWorker(
            database_url=self.pool.database_url,
            broker=self.pool.broker,
            log_dir=self.pool.log_dir,
            name=name,
            concurrency=concurrency,
        )
        worker.env.update(env or {})
        worker.args = [f"--pool={pool}" if arg.startswith("--pool=") else arg for arg in worker.args]
        self.pool.workers.append(worker)
        return worker.start()

    def kill(self, worker: CeleryWorker) -> float:
        """SIGKILL the worker's whole process group (main process and pool): nothing is handed back."""
        os.killpg(worker.pid, signal.SIGKILL)
        assert worker.process is not None
        worker.process.wait(timeout=10)
        return time.monotonic()

    def stop_workers(self) -> None:
        for worker in self.pool.workers:
            worker.stop()
        self.pool.workers.clear()

    @property
    def sweepers(self) -> dict[str, float]:
        """Each sweeper task and the seconds between its runs in the beat schedule (inf: never run)."""
        if self._sweepers is None:
            self._sweepers = actions.sweeper_schedule()
        return self._sweepers

    def sweep(self, names: list[str] | None = None) -> None:
        """Send sweeper tasks by name, as beat would."""
        from config.celery import app

        for name in self.sweepers if names is None else names:
            app.send_task(name, queue="default")

    def settle(self, done: Callable[[], bool], *, since: float, bound: float = BOUND_S) -> float | None:
        """Poll until done() or `bound` seconds after `since`, running each sweeper on its beat schedule
        in the worst phase (first run one interval after the fault); the seconds it took, or None."""
        due = {name: since + every for name, every in self.sweepers.items() if every < float("inf")}
        while True:
            if done():
                return time.monotonic() - since
            now = time.monotonic()
            if now - since >= bound:
                return None
            ready = [name for name, at in due.items() if at <= now]
            if ready:
                self.sweep(ready)
                for name in ready:
                    due[name] += self.sweepers[name]
            time.sleep(0.5)


def poll(predicate: Callable[[], Any], *, timeout: float, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# --- an annotator, through the HTTP API and the pages ------------------------------------------------


@dataclass
class Annotator:
    participation: Participation
    html: Client  # the browser's session: pages
    api: Client  # an API client with the participation's token

    @classmethod
    def join(cls, study: Study) -> Annotator:
        html = Client(raise_request_exception=False)
        accepted = html.post(
            f"/api/v1/invitations/{actions.invitation_token(study=study)}/accept/",
            {"consent": True},
            content_type="application/json",
        )
        assert accepted.status_code == 201, accepted.content
        body = accepted.json()
        # The accept API never signs a browser in (login CSRF): the pages get the account's session here.
        html.force_login(Participation.objects.get(pk=body["id"]).annotator)
        api = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {body['token']}")
        persona = api.put(
            f"/api/v1/participations/{body['id']}/persona/", actions.PERSONA_DATA, content_type="application/json"
        )
        assert persona.status_code == 200, persona.content
        return cls(Participation.objects.select_related("study").get(pk=body["id"]), html, api)

    @property
    def slug(self) -> str:
        return self.participation.study.slug

    def ask(self, text: str = QUESTION) -> Any:
        return self.api.post(
            f"/api/v1/participations/{self.participation.pk}/queries/",
            {"text": text, "client_token": secrets.token_hex(8)},
            content_type="application/json",
        )

    def ask_page(self, text: str = QUESTION) -> Any:
        return self.html.post(
            f"/study/{self.slug}/ask/", {"text": text, "client_token": secrets.token_hex(8)}, follow=False
        )

    def queries(self) -> list[Query]:
        return list(Query.objects.filter(participation=self.participation).order_by("index"))

    def status(self, index: int) -> dict[str, Any]:
        response = self.html.get(f"/study/{self.slug}/q/{index}/status/")
        return response.json() if response.status_code == 200 else {"http": response.status_code}

    def current_match(self, query_id: int) -> tuple[int, dict[str, Any]]:
        response = self.api.get(f"/api/v1/queries/{query_id}/current-match/")
        return response.status_code, (response.json() if response.status_code == 200 else {})

    def choose(self, match_id: int, choice: str) -> Any:
        return self.api.post(f"/api/v1/matches/{match_id}/choice/", {"choice": choice}, content_type="application/json")

    def walk(self, path: str | None = None, *, limit: int = 10) -> tuple[list[str], Any]:
        """Follow redirects from the study page like a browser, stopping at a page or after `limit`."""
        path = path or f"/study/{self.slug}/"
        seen = [path]
        response = self.html.get(path)
        while response.status_code in (301, 302, 303) and len(seen) <= limit:
            path = response["Location"]
            seen.append(path)
            response = self.html.get(path)
        return seen, response

    def close(self) -> None:
        connections.close_all()


def page_text(response: Any) -> str:
    """The visible text of a page's main content (no header, scripts or hidden blocks)."""
    html = response.content.decode(errors="replace")
    main = re.search(r"(?s)<main\b.*?</main>", html)
    html = main.group(0) if main else html
    html = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", html)
    html = re.sub(r"(?s)<[^>]+\bhidden\b[^>]*>.*?</div>", " ", html)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def short(text: str, n: int = 110) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --- studies ---------------------------------------------------------------------------------------


def openai_systems(base_url: str, **settings: Any) -> list[dict[str, Any]]:
    """Four systems on the OpenAI stand-in; the client's own retries off so every fault costs a task attempt."""
    backend_settings = {"base_url": base_url, "max_retries": 0, "timeout": 30, "use_cache": False, **settings}
    return [
        {
            "label": f"{model}-{condition}",
            "model_name": model,
            "condition": condition,
            "generation_backend": "openai",
            "backend_settings": backend_settings,
        }
        for model in ("model-one", "model-two")
        for condition in ("persona", "generic")
    ]


# --- what is stored: the audit every annotation scenario ends with -----------------------------------


def describe_query(query_id: int) -> str:
    query = Query.objects.get(pk=query_id)
    rows = [
        f"{c.status}/{c.attempts}{(':' + short(c.failure_reason, 70)) if c.failure_reason else ''}"
        for c in Candidate.objects.filter(query_id=query_id).order_by("system__order")
    ]
    reason = f" ({short(query.failure_reason, 80)})" if query.failure_reason else ""
    return f"query {query.status}{reason}, candidates [{', '.join(rows)}]"


def query_settled(query_id: int) -> bool:
    """Background work on the query has ended: the query and every candidate are in a terminal state,
    and a failure is visible (the query failed or a candidate did)."""
    query = Query.objects.get(pk=query_id)
    candidates = list(Candidate.objects.filter(query_id=query_id).values_list("status", flat=True))
    if query.status in (Query.Status.RETRIEVING,):
        return False
    if any(status not in TERMINAL_CANDIDATE for status in candidates):
        return False
    if query.status == Query.Status.GENERATING:
        return bool(candidates) and Candidate.Status.FAILED in candidates
    return True


def audit_query(outcome: Outcome, query_id: int, *, systems: int) -> None:
    """Count what a query left behind: stuck rows, lost or duplicated candidates, a dead bracket."""
    query = Query.objects.get(pk=query_id)
    candidates = list(Candidate.objects.filter(query_id=query_id))
    unfinished = [c for c in candidates if c.status not in TERMINAL_CANDIDATE]
    if query.status == Query.Status.RETRIEVING or (
        query.status == Query.Status.GENERATING and not any(c.status == Candidate.Status.FAILED for c in candidates)
    ):
        outcome.stuck += 1
        outcome.problems.append(f"query {query_id} still {query.status}: {describe_query(query_id)}")
    if unfinished:
        outcome.stuck += len(unfinished)
        outcome.problems.append(
            f"{len(unfinished)} candidates of query {query_id} not finished: {describe_query(query_id)}"
        )
    for c in candidates:
        if c.status == Candidate.Status.FAILED:
            outcome.expect(
                c.failure_reason.strip() and "Traceback" not in c.failure_reason,
                f"candidate {c.pk} failed without a readable reason: {c.failure_reason!r}",
            )
    if query.status == Query.Status.FAILED:
        outcome.expect(query.failure_reason.strip(), f"query {query_id} failed without a reason")
    per_system: dict[int, int] = {}
    for c in candidates:
        per_system[c.system_id] = per_system.get(c.system_id, 0) + 1
    outcome.duplicated += sum(n - 1 for n in per_system.values() if n > 1)
    if query.status in (Query.Status.GENERATING, Query.Status.READY, Query.Status.RANKED) and len(per_system) < systems:
        outcome.lost += systems - len(per_system)
        outcome.problems.append(f"query {query_id} has candidates for {len(per_system)} of {systems} systems")
    if query.status == Query.Status.READY:
        bracket = Bracket.objects.filter(query_id=query_id).first()
        if bracket is None or not bracket.matches.filter(status=Match.Status.PENDING).exists():
            outcome.stuck += 1
            outcome.problems.append(f"query {query_id} is ready but has no match left to answer (dead bracket)")
    outcome.duplicated += Bracket.objects.filter(query_id=query_id).count() > 1


def see_query(outcome: Outcome, annotator: Annotator, query_id: int) -> dict[str, Any]:
    """What the waiting page's poll (and, once ready, the match API) tells the annotator."""
    query = Query.objects.get(pk=query_id)
    status = annotator.status(query.index)
    when = f"at the {BOUND_S:.0f}s bound" if outcome.settled_s is None else f"after {outcome.settled_s:.0f}s"
    seen = f"waiting page {when}: {status.get('status', status)}"
    summaries = Counter(f"{c['label']} ({c['attempts']} att.)" for c in status.get("candidates") or [])
    if summaries and status.get("status") != Query.Status.READY:
        seen += " [" + ", ".join(f"{n}x {label}" for label, n in summaries.items()) + "]"
    if status.get("failed"):
        seen += ", failure shown"
    if status.get("status") == Query.Status.READY:
        code, match = annotator.current_match(query_id)
        seen += f", match API {code}{' ' + match.get('label', '') if match else ''}"
        outcome.expect(code == 200, f"query {query_id} is ready but the match API answers {code}")
    outcome.see(seen)
    background_done = status.get("status") in TERMINAL_QUERY or status.get("failed")
    outcome.expect(background_done, f"the annotator is still waiting ({status}) after {BOUND_S:.0f}s")
    return status


# --- kill the worker mid-retrieval / mid-generation ----------------------------------------------------


def kill_mid_retrieval(rig: Rig, *, delay: float = 4.0) -> Outcome:
    """The retrieval call (the OpenAlex stand-in answering after `delay`) is in flight when the
    worker's whole process group is SIGKILLed; a fresh worker and the sweepers must finish the query."""
    outcome = Outcome("kill worker mid-retrieval", f"OpenAlex answers after {delay:.0f}s")
    with openalex_standin(delay=delay) as openalex:
        env = {"OPENALEX_BASE_URL": openalex.base_url, "OPENALEX_MAX_RETRIES": "0", "OPENALEX_TIMEOUT": "30"}
        study = actions.study_open(slug=rig.slug("kill-retrieval"), retrieval_backend="openalex", retrieval_k=3)
        doomed = rig.start_worker("doomed", env=env)
        annotator = Annotator.join(study)
        response = annotator.ask(OPENALEX_QUESTION)
        outcome.expect(
            response.status_code == 201, f"submit answered {response.status_code}: {response.content[:200]!r}"
        )
        query_id = response.json()["id"]
        if not outcome.expect(poll(lambda: openalex.requests, timeout=20), "the worker never called OpenAlex"):
            return outcome
        killed_at = rig.kill(doomed)
        outcome.notes.append(f"killed during the OpenAlex call: {describe_query(query_id)}")
        rig.start_worker("rescuer", env=env)
        outcome.settled_s = rig.settle(lambda: query_settled(query_id), since=killed_at)
        audit_query(outcome, query_id, systems=4)
        see_query(outcome, annotator, query_id)
        outcome.notes.append(f"after the sweepers: {describe_query(query_id)}; OpenAlex calls {len(openalex.requests)}")
    return outcome


def kill_mid_generation(rig: Rig, *, delay: float = 5.0, pool: str = "prefork") -> Outcome:
    """Two generations (four with a threads pool, which holds every one in one process, as the annotator worker
    is deployed) are in flight at the model server (answering after `delay`) when the worker's whole process
    group is SIGKILLed; a fresh worker and the sweepers must finish every candidate once."""
    outcome = Outcome("kill worker mid-generation", f"LLM answers after {delay:.0f}s, {pool} pool")
    concurrency = 8 if pool == "threads" else 2
    with openai_standin(delay=delay) as llm:
        study = actions.study_open(slug=rig.slug("kill-generation"), systems=openai_systems(llm.base_url))
        doomed = rig.start_worker("doomed", pool=pool, concurrency=concurrency)
        annotator = Annotator.join(study)
        response = annotator.ask()
        outcome.expect(response.status_code == 201, f"submit answered {response.status_code}")
        query_id = response.json()["id"]
        running = poll(
            lambda: (
                llm.completions >= 2
                and Candidate.objects.filter(query_id=query_id, status=Candidate.Status.RUNNING).count() >= 2
            ),
            timeout=30,
        )
        if not outcome.expect(running, f"generation never started: {describe_query(query_id)}"):
            return outcome
        killed_at = rig.kill(doomed)
        outcome.notes.append(f"killed with {describe_query(query_id)}")
        rig.start_worker("rescuer", pool=pool, concurrency=concurrency)
        outcome.settled_s = rig.settle(lambda: query_settled(query_id), since=killed_at)
        audit_query(outcome, query_id, systems=4)
        see_query(outcome, annotator, query_id)
        done = Candidate.objects.filter(query_id=query_id, status=Candidate.Status.DONE).count()
        outcome.expect(done == 4, f"{done} of 4 candidates done: {describe_query(query_id)}")
        outcome.notes.append(f"after the sweepers: {describe_query(query_id)}; LLM calls {llm.completions}")
    return outcome


def kill_with_retries_waiting(rig: Rig, *, retry_after_s: int = 90, down_s: float = 5.0) -> Outcome:
    """The annotator worker (a threads pool, as deployed) holds a question's four summaries in their retries'
    countdown (the model answered 429, Retry-After `retry_after_s`) when its whole process group is SIGKILLed;
    it is started again `down_s` later, as in the field test. On Redis the messages it held stay unacknowledged
    until the visibility timeout (2 h) and the summaries are queued with no lease to lapse: each one must be sent
    again and done within a minute of the worker being back, at one model call more each."""
    outcome = Outcome("kill worker with retries waiting", f"Retry-After {retry_after_s}s, down {down_s:.0f}s")
    with openai_standin(script=[f"429:{retry_after_s}"] * 4) as llm:
        study = actions.study_open(slug=rig.slug("kill-retrying"), systems=openai_systems(llm.base_url))
        doomed = rig.start_worker("doomed", pool="threads", concurrency=8)
        annotator = Annotator.join(study)
        response = annotator.ask()
        outcome.expect(response.status_code == 201, f"submit answered {response.status_code}")
        query_id = response.json()["id"]
        waiting = poll(
            lambda: (
                llm.completions >= 4
                and Candidate.objects.filter(query_id=query_id, status=Candidate.Status.QUEUED, attempts=1).count() == 4
            ),
            timeout=30,
        )
        if not outcome.expect(waiting, f"the summaries never waited for a retry: {describe_query(query_id)}"):
            return outcome
        rig.kill(doomed)
        outcome.notes.append(f"killed with {describe_query(query_id)}")
        time.sleep(down_s)
        rig.start_worker("rescuer", pool="threads", concurrency=8)
        back_at = time.monotonic()
        outcome.settled_s = rig.settle(lambda: query_settled(query_id), since=back_at)
        audit_query(outcome, query_id, systems=4)
        see_query(outcome, annotator, query_id)
        done = Candidate.objects.filter(query_id=query_id, status=Candidate.Status.DONE).count()
        outcome.expect(done == 4, f"{done} of 4 candidates done: {describe_query(query_id)}")
        outcome.expect(llm.completions == 8, f"{llm.completions} model calls for 4 refused and 4 retried")
        outcome.notes.append(f"after the sweepers: {describe_query(query_id)}; LLM calls {llm.completions}")
    return outcome


# --- kill the worker mid-scoring / mid-export --------------------------------------------------------


@contextmanager
def table_locked(table: str) -> Iterator[Any]:
    """Hold an ACCESS EXCLUSIVE lock on a table from a separate connection: whoever touches it waits."""
    import psycopg

    conn = psycopg.connect(database_url(), autocommit=False)
    try:
        conn.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        yield conn
    finally:
        conn.rollback()
        conn.close()


def database_url() -> str:
    s = connections["default"].settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"postgresql://{s.get('USER') or 'postgres'}{password}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def lock_waiters(table: str) -> int:
    import psycopg

    with psycopg.connect(database_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass", [table]
        ).fetchone()
    return int(row[0]) if row else 0


def generated_study(rig: Rig, *, name: str, annotators: int, answer: bool = False) -> tuple[Study, list[Annotator]]:
    """An offline study whose annotators each asked one question, generated by a running worker;
    with `answer`, each also answers its first-round matches."""
    study = actions.study_open(slug=rig.slug(name))
    people = [Annotator.join(study) for _ in range(annotators)]
    ids = [a.ask().json()["id"] for a in people]
    poll(
        lambda: Query.objects.filter(pk__in=ids, status=Query.Status.READY).count() == len(ids),
        timeout=30 + 2 * annotators,
    )
    if answer:
        for a, query_id in zip(people, ids, strict=True):
            for _ in range(2):
                code, match = a.current_match(query_id)
                if code == 200:
                    a.choose(match["id"], "left")
    return study, people


def researcher_client(study: Study) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(actions.researcher(study))
    return client


def kill_mid_scoring(rig: Rig, *, annotators: int = 2) -> Outcome:
    """A scoring run's chunk is inside its transaction (held at the score table by a lock) when the
    worker's process group is SIGKILLed; a fresh worker and the sweepers must end the run once."""
    outcome = Outcome("kill worker mid-scoring", f"{annotators * 4} candidates, 1 chunk")
    doomed = rig.start_worker("doomed")
    study, _ = generated_study(rig, name="kill-scoring", annotators=annotators)
    researcher = researcher_client(study)
    table = CandidateScore._meta.db_table
    with table_locked(table):
        response = researcher.post(
            f"/api/v1/research/studies/{study.slug}/scoring-runs/",
            {"metrics": ["rouge1"]},
            content_type="application/json",
        )
        if not outcome.expect(response.status_code == 201, f"starting the run answered {response.status_code}"):
            return outcome
        run_id = response.json()["id"]
        if not outcome.expect(poll(lambda: lock_waiters(table), timeout=60), "the chunk never reached the score table"):
            return outcome
        killed_at = rig.kill(doomed)
    run = ScoringRun.objects.get(pk=run_id)
    outcome.notes.append(f"killed with run {run.status} {run.done}/{run.total}")
    rig.start_worker("rescuer")
    outcome.settled_s = rig.settle(lambda: ScoringRun.objects.get(pk=run_id).status in TERMINAL_JOB, since=killed_at)
    run = ScoringRun.objects.get(pk=run_id)
    status = researcher.get(f"/research/scoring/{run_id}/status/").json()
    outcome.see(
        f"researcher's progress: {status['status']} {status['progress']}%{' ' + short(status['error'], 60) if status['error'] else ''}"
    )
    if run.status not in TERMINAL_JOB:
        outcome.stuck += 1
        outcome.problems.append(
            f"scoring run still {run.status} ({run.done}/{run.total}) {BOUND_S:.0f}s after the kill"
        )
    if run.status == ScoringRun.Status.FAILED:
        outcome.expect(run.error.strip(), "the scoring run failed without a reason")
    scores = CandidateScore.objects.filter(candidate__query__participation__study=study, metric="rouge1").count()
    if run.status == ScoringRun.Status.DONE and scores < run.total:
        outcome.lost += run.total - scores
        outcome.problems.append(f"run done with {scores} of {run.total} scores stored")
    if run.done > run.total:
        outcome.duplicated += run.done - run.total
        outcome.problems.append(f"a chunk counted twice: done {run.done} of {run.total}")
    outcome.notes.append(f"after the sweepers: run {run.status} {run.done}/{run.total}, {scores} scores")
    return outcome


def kill_mid_export(rig: Rig, *, fmt: str = "csv") -> Outcome:
    """A research export is reading the comparisons (held at the judgment table by a lock) when the
    worker's process group is SIGKILLed; a fresh worker and the sweepers must end the job."""
    outcome = Outcome("kill worker mid-export", f"{fmt} export")
    doomed = rig.start_worker("doomed")
    study, _ = generated_study(rig, name="kill-export", annotators=2, answer=True)
    researcher = researcher_client(study)
    table = Judgment._meta.db_table
    with table_locked(table):
        response = researcher.post(
            f"/api/v1/research/studies/{study.slug}/jobs/",
            {"kind": "export", "options": {"format": fmt}},
            content_type="application/json",
        )
        if not outcome.expect(response.status_code == 201, f"starting the export answered {response.status_code}"):
            return outcome
        job_id = response.json()["id"]
        if not outcome.expect(poll(lambda: lock_waiters(table), timeout=60), "the export never read the comparisons"):
            return outcome
        killed_at = rig.kill(doomed)
    job = ResearchJob.objects.get(pk=job_id)
    outcome.notes.append(f"killed with the job {job.status} at {job.stage!r}")
    rig.start_worker("rescuer")
    outcome.settled_s = rig.settle(lambda: ResearchJob.objects.get(pk=job_id).status in TERMINAL_JOB, since=killed_at)
    job = ResearchJob.objects.get(pk=job_id)
    seen = researcher.get(f"/api/v1/research/jobs/{job_id}/").json()
    outcome.see(
        f"researcher's job: {seen.get('status')} {seen.get('progress')}% {short(seen.get('stage') or seen.get('error') or '', 50)}"
    )
    if job.status not in TERMINAL_JOB:
        outcome.stuck += 1
        outcome.problems.append(f"export still {job.status} at {job.stage!r} {BOUND_S:.0f}s after the kill")
    if job.status == ResearchJob.Status.FAILED:
        outcome.expect(job.error.strip(), "the export failed without a reason")
    if job.status == ResearchJob.Status.DONE:
        if not job.files:
            outcome.lost += 1
            outcome.problems.append("the export is done but lists no file")
        outcome.duplicated += len(job.files) - len(set(job.files))
    outcome.duplicated += ResearchJob.objects.filter(study=study).count() - 1
    outcome.notes.append(f"after the sweepers: job {job.status} {job.files}")
    return outcome


# --- the broker unreachable at submit -----------------------------------------------------------------


def broker_down_at_submit(rig: Rig, *, via: str = "api") -> Outcome:
    """A question is submitted while the broker port is closed. The annotator must get a clear message
    (not a 500), and the question is either not stored or picked up once the broker is back."""
    outcome = Outcome("broker unreachable at submit", f"submitted through the {via}")
    study = actions.study_open(slug=rig.slug(f"broker-{via}"))
    annotator = Annotator.join(study)
    with celery_app_sending_to(CLOSED_BROKER):
        started = time.monotonic()
        response = annotator.ask() if via == "api" else annotator.ask_page()
        elapsed = time.monotonic() - started
    code = response.status_code
    if via == "api":
        try:
            message = response.json().get("message", "")
        except ValueError:
            message = page_text(response)
    else:
        message = page_text(response) if code != 302 else f"redirect to {response['Location']}"
    outcome.see(f"{code} after {elapsed:.1f}s: {short(message, 70)}")
    outcome.expect(code < 500 or code == 503, f"the annotator got a {code} after {elapsed:.1f}s")
    outcome.expect(message and "Server Error" not in message, f"no readable message: {short(message)!r}")
    accepted = code in (200, 201, 202, 302, 303)
    stored = annotator.queries()
    if accepted and not stored:
        outcome.lost += 1
        outcome.problems.append(f"the question was accepted ({code}) but not stored")
    # The broker is back: a worker and the sweepers must pick up whatever was stored.
    back_at = time.monotonic()
    rig.start_worker("after-outage")
    ids = [q.pk for q in stored]
    outcome.settled_s = rig.settle(lambda: all(query_settled(i) for i in ids), since=back_at)
    for query_id in ids:
        audit_query(outcome, query_id, systems=4)
        outcome.notes.append(f"stored question: {describe_query(query_id)}")
    if ids:
        see_query(outcome, annotator, ids[-1])
    else:
        outcome.notes.append("nothing stored: the annotator can ask again")
    return outcome


# --- an LLM server that hangs past the soft time limit -------------------------------------------------


def llm_hangs_past_soft_limit(rig: Rig, *, hangs: int = 4, soft: int = 2) -> Outcome:
    """The model server holds the first `hangs` requests past the generation task's soft time limit
    (set to `soft` seconds through a task annotation). A hung attempt must be retried; in the end each
    candidate is done, or failed with a readable reason."""
    case = f"{hangs} requests hang, soft limit {soft}s" if hangs < 40 else f"every request hangs, soft limit {soft}s"
    outcome = Outcome("LLM hangs past the soft time limit", case)
    annotations = {"annotation.tasks.generate_candidate": {"soft_time_limit": soft, "time_limit": soft * 10}}
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings",
        "FAULTS_TASK_ANNOTATIONS": json.dumps(annotations),
    }
    with openai_standin(script=["timeout"] * hangs, hang_s=soft * 5) as llm:
        # The client would wait far longer than the soft limit: the limit, not the client, ends the call.
        study = actions.study_open(slug=rig.slug("soft-limit"), systems=openai_systems(llm.base_url, timeout=soft * 20))
        rig.start_worker("soft-limit", env=env)
        annotator = Annotator.join(study)
        query_id = annotator.ask().json()["id"]
        started = time.monotonic()
        outcome.settled_s = rig.settle(lambda: query_settled(query_id), since=started, bound=BOUND_S + hangs * soft)
        audit_query(outcome, query_id, systems=4)
        see_query(outcome, annotator, query_id)
        candidates = list(Candidate.objects.filter(query_id=query_id))
        once = [c for c in candidates if c.status == Candidate.Status.FAILED and c.attempts <= 1]
        outcome.expect(
            not once,
            f"{len(once)} candidates failed permanently after one hung attempt: {describe_query(query_id)}",
        )
        if hangs <= 4:
            # The server answers again after the hangs: a summary given up on is a summary lost.
            done = sum(c.status == Candidate.Status.DONE for c in candidates)
            if not outcome.expect(done == 4, f"{done} of 4 candidates done once the server answered again"):
                outcome.lost += sum(c.status == Candidate.Status.FAILED for c in candidates)
        outcome.notes.append(
            f"{describe_query(query_id)}; LLM calls {llm.completions}, hangs played {len(llm.script.played)}"
        )
    return outcome


# --- concurrent first-round answers ----------------------------------------------------------------------


def concurrent_first_round(rig: Rig, *, brackets: int = 50, batch: int = 10, seed: int = 1) -> Outcome:
    """Both first-round matches of each bracket answered at the same moment from two threads (a barrier
    per bracket, `batch` brackets at once) through the API on real PostgreSQL. Every bracket must get
    its final, or the skipped final a "neither" leads to, and the annotator must never loop."""
    import random

    outcome = Outcome("concurrent first-round answers", f"{brackets} brackets")
    rng = random.Random(seed)
    rig.start_worker("generator", concurrency=2)
    study, people = generated_study(rig, name="race", annotators=brackets)
    plans = []
    for a in people:
        query = a.queries()[0]
        matches = list(Match.objects.filter(bracket__query=query, round=1).order_by("index"))
        if len(matches) != 2:
            outcome.problems.append(
                f"query {query.pk} has {len(matches)} first-round matches: {describe_query(query.pk)}"
            )
            continue
        # Mostly winners on both sides; some brackets with a "neither", whose final is skipped.
        choices = [rng.choice(["left", "right"]), rng.choice(["left", "right"])]
        if rng.random() < 0.2:
            choices[rng.randrange(2)] = "neither"
        plans.append((a, query, matches, choices))
    answers: list[tuple[int, int, str]] = []  # (match id, http status, choice)
    lock = threading.Lock()

    def answer(a: Annotator, match: Match, choice: str, barrier: threading.Barrier) -> None:
        client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=a.api.defaults["HTTP_AUTHORIZATION"])
        try:
            barrier.wait(timeout=10)
            response = client.post(
                f"/api/v1/matches/{match.pk}/choice/", {"choice": choice}, content_type="application/json"
            )
            with lock:
                answers.append((match.pk, response.status_code, choice))
        finally:
            connections.close_all()

    for start in range(0, len(plans), batch):
        threads = []
        for a, _, matches, choices in plans[start : start + batch]:
            barrier = threading.Barrier(2)
            threads += [
                threading.Thread(target=answer, args=(a, m, c, barrier)) for m, c in zip(matches, choices, strict=True)
            ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    refused = [a for a in answers if a[1] != 200]
    outcome.expect(not refused, f"{len(refused)} simultaneous answers refused: {refused[:5]}")
    no_final = loops = ranked = finals = 0
    for a, query, matches, choices in plans:
        stored = dict(Judgment.objects.filter(match__in=matches).values_list("match_id", "choice"))
        for m, c in zip(matches, choices, strict=True):
            if stored.get(m.pk) != c:
                outcome.lost += 1
                outcome.problems.append(f"the answer {c} to match {m.pk} is stored as {stored.get(m.pk)}")
        final = Match.objects.filter(bracket__query=query, round=2).first()
        query.refresh_from_db()
        if final is None:
            no_final += 1
            outcome.stuck += 1
        path, page = a.walk()
        if page.status_code in (301, 302, 303):
            loops += 1
        code, current = a.current_match(query.pk)
        if "neither" in choices:
            outcome.expect(
                final is None or final.status == Match.Status.SKIPPED,
                f"bracket of query {query.pk}: a 'neither' yet the final is {final and final.status}",
            )
            outcome.expect(
                query.status == Query.Status.RANKED, f"query {query.pk} with a 'neither' is {query.status}, not ranked"
            )
        elif final is not None:
            outcome.expect(
                code == 200 and current.get("label") == "final",
                f"query {query.pk}: final exists but the match API answers {code} {current.get('label')}",
            )
            if code == 200 and a.choose(current["id"], "left").status_code == 200:
                finals += 1
        query.refresh_from_db()
        ranked += query.status == Query.Status.RANKED
        outcome.duplicated += max(0, Match.objects.filter(bracket__query=query, round=2).count() - 1)
    if no_final:
        outcome.problems.append(f"{no_final} of {len(plans)} brackets got no final (and no 'neither' outcome)")
    if loops:
        outcome.problems.append(
            f"{loops} annotators are sent round in a redirect loop (study page -> compare -> study page)"
        )
    outcome.see(
        f"{len(plans) - no_final}/{len(plans)} brackets moved on, {loops} redirect loops, {ranked} ranked in the end"
    )
    for a in people:
        a.close()
    return outcome


# --- a stale second tab --------------------------------------------------------------------------------


def _match_id(response: Any) -> int | None:
    found = re.search(r'name="match_id" value="(\d+)"', response.content.decode(errors="replace"))
    return int(found.group(1)) if found else None


SIDE_WORDS = {"left": ("left", "top"), "right": ("right", "bottom"), "neither": ("neither",)}


def tells_how(text: str, choice: str) -> bool:
    """The page says the match was already answered and what the answer was: a sentence with
    "already", or the one after it, names the first answer."""
    sentences = re.split(r"(?<=[.!?])\s+", text)
    for n, sentence in enumerate(sentences):
        if "already" in sentence.lower():
            window = " ".join(sentences[n : n + 2]).lower()
            if any(word in window for word in SIDE_WORDS[choice]):
                return True
    return False


def stale_tab(rig: Rig, *, first: str = "left", second: str = "right") -> Outcome:
    """Two tabs show the same match; the first answers `first`, then the stale second one answers
    `second`. The second must be told the match was already answered (and how), through the page and
    the API, and must not move on as if its answer counted."""
    outcome = Outcome("stale second tab", f"{first} then {second}")
    rig.start_worker("generator")
    study, (annotator,) = generated_study(rig, name="stale-tab", annotators=1)
    query = annotator.queries()[0]
    compare = f"/study/{study.slug}/q/{query.index}/compare/"
    tab1, tab2 = annotator.html.get(compare), annotator.html.get(compare)
    match_id = _match_id(tab1)
    if not outcome.expect(match_id and match_id == _match_id(tab2), "the two tabs do not show the same match"):
        return outcome
    annotator.html.post(compare, {"match_id": match_id, "choice": first})
    stale = annotator.html.post(compare, {"match_id": match_id, "choice": second}, follow=True)
    text = page_text(stale)
    shown = _match_id(stale)
    outcome.expect(stale.status_code < 500, f"the stale tab got a {stale.status_code}")
    told = tells_how(text, first)
    outcome.expect(
        told, f"the stale tab is not told the match was already answered {first}; it shows: {short(text, 160)!r}"
    )
    if shown and shown != match_id and not told:
        # The annotator believes the second answer counted; it was dropped without a word.
        outcome.lost += 1
        outcome.problems.append("the stale tab moved on to the next match as if its answer had counted")
    api = annotator.choose(match_id, second)
    api_body = api.json() if api.status_code < 500 else {}
    api_message = str(api_body.get("message", ""))
    api_tells = tells_how(api_message, first) or first in json.dumps(api_body.get("extra", {}))
    outcome.expect(api.status_code == 409, f"the API answered the stale choice with {api.status_code}")
    outcome.expect(api_tells, f"the API's refusal does not say how the match was answered: {api_message!r}")
    stored = list(Judgment.objects.filter(match_id=match_id).values_list("choice", flat=True))
    if stored != [first]:
        outcome.problems.append(f"stored answers for the match: {stored}")
        outcome.lost += first not in stored
        outcome.duplicated += max(0, len(stored) - 1) + (second in stored)
    outcome.see(
        f"page: {'told' if told else 'NOT told'} ({'next match' if shown and shown != match_id else 'no match'} shown); "
        f"API {api.status_code} {short(api_message, 60)!r}"
    )
    annotator.close()
    return outcome


# --- a double key press in the browser --------------------------------------------------------------------


READ_AT_LEAST_S = 0.5  # a press sooner than this after a match appears cannot have followed a reading of it
READABLE_AFTER_S = 5.0  # by then a press must count: the guard may not swallow real answers


def double_key_press(rig: Rig, *, second_after_ms: int = 100, on: str = "next") -> Outcome:
    """In Chromium, the choice key pressed twice. on="same": the second press `second_after_ms` after the
    first; on="next": `second_after_ms` after the next match appeared. One press answers one match; the
    next match ignores input until it has been on screen long enough to be read."""
    label = (
        f"2nd press {second_after_ms} ms after the next match appeared"
        if on == "next"
        else f"2 presses {second_after_ms} ms apart"
    )
    outcome = Outcome("double key press", label)
    if rig.browser is None or rig.live_url is None:
        outcome.problems.append("no browser or live server")
        return outcome
    rig.start_worker("generator")
    study, (annotator,) = generated_study(rig, name="double-key", annotators=1)
    query = annotator.queries()[0]
    judgments = Judgment.objects.filter(match__bracket__query=query)
    context = rig.browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        context.add_cookies(
            [{"name": "sessionid", "value": annotator.html.cookies["sessionid"].value, "url": rig.live_url}]
        )
        page = context.new_page()
        page.goto(f"{rig.live_url}/study/{study.slug}/q/{query.index}/compare/")
        page.wait_for_selector("#choice-form")
        first_id = page.input_value("input[name=match_id]")
        page.wait_for_timeout(READABLE_AFTER_S * 1000)  # the first match has been read
        if on == "same":
            page.keyboard.press("1")
            page.wait_for_timeout(second_after_ms)
            page.keyboard.press("1")
        else:
            with page.expect_navigation(wait_until="load"):
                page.keyboard.press("1")
            page.wait_for_timeout(second_after_ms)
            page.keyboard.press("1")
        appeared = time.monotonic()
        page.wait_for_timeout(1500)
        page.wait_for_load_state("load")
        after = judgments.count()
        shown = page.input_value("input[name=match_id]") if page.query_selector("input[name=match_id]") else None
        outcome.expect(after == 1, f"two presses answered {after} matches")
        if after > 1:
            outcome.duplicated += after - 1
        outcome.expect(shown and shown != first_id, "the next match is not on screen after the first answer")
        # The guard must let a reader answer: a press once the match has been on screen a while counts.
        page.wait_for_timeout(max(0, (READABLE_AFTER_S - (time.monotonic() - appeared)) * 1000))
        page.keyboard.press("2")
        counted = poll(lambda: judgments.count() >= after + 1, timeout=5)
        outcome.expect(counted, f"a press {READABLE_AFTER_S:.0f}s after the match appeared was ignored")
        if after <= 1 and not counted:
            outcome.lost += 1
        outcome.see(f"{after} match answered by the double press; a later press {'counted' if counted else 'IGNORED'}")
    finally:
        context.close()
        annotator.close()
    return outcome


# --- any exception in retrieval or generation --------------------------------------------------------------


STRAY_BRACE_BODY = "Answer {query} from these abstracts: {documents} {persona_block} Use a set literal like {1, 2."


def exception_in_background(rig: Rig, *, kind: str = "settings-list") -> Outcome:
    """A study whose retrieval settings are a JSON list (not an object), or whose prompt template has a
    stray "{": the query or its candidates must end failed with a readable reason, and the annotator
    can set the question aside and finish with a completion code."""
    cases = {
        "settings-list": "retrieval settings are a list",
        "settings-string": "retrieval settings are a string",
        "stray-brace": "prompt template with a stray {",
    }
    outcome = Outcome("exception in retrieval/generation", cases[kind])
    study = actions.study_open(slug=rig.slug(kind))
    if kind == "settings-list":
        actions.study_break_retrieval_settings(study=study, settings=[{"filters": {"from_year": 2020}}])
    elif kind == "settings-string":
        actions.study_break_retrieval_settings(study=study, settings="from_year=2020")
    else:
        actions.study_use_prompt(study=study, body=STRAY_BRACE_BODY, name=rig.slug("stray"))
    rig.start_worker("worker")
    annotator = Annotator.join(study)
    response = annotator.ask()
    query_id = response.json()["id"]
    started = time.monotonic()
    outcome.settled_s = rig.settle(lambda: query_settled(query_id), since=started)
    audit_query(outcome, query_id, systems=4)
    query = Query.objects.get(pk=query_id)
    wait_page = annotator.html.get(f"/study/{annotator.slug}/q/{query.index}/wait/")
    failure_shown = bool(re.search(r'id="failure"(?![^>]*\bhidden\b)', wait_page.content.decode(errors="replace")))
    outcome.expect(failure_shown, f"the waiting page does not show the failure ({describe_query(query_id)})")
    discard = annotator.html.post(f"/study/{annotator.slug}/q/{query.index}/discard/")
    finish = annotator.html.post(f"/study/{annotator.slug}/finish/", follow=True)
    annotator.participation.refresh_from_db()
    # Nothing was ranked, so stopping issues no completion code: the stop is recorded and the page gives
    # the participation's reference for the research team instead.
    reference = annotator.participation.code
    stopped = annotator.participation.stopped_at is not None and not annotator.participation.completion_code
    outcome.expect(
        discard.status_code in (302, 303),
        f"setting the question aside answered {discard.status_code}: {short(page_text(discard))!r}",
    )
    outcome.expect(
        stopped and reference in finish.content.decode(errors="replace"),
        f"the stop was not recorded with its reference on the page: {short(page_text(finish))!r}",
    )
    outcome.see(
        f"waiting page {'shows the failure' if failure_shown else 'keeps waiting'}; set aside {discard.status_code}; "
        f"finish {'records the stop, reference ' + reference if stopped else 'refused: ' + short(page_text(finish), 60)}"
    )
    outcome.notes.append(describe_query(query_id))
    annotator.close()
    return outcome


# --- the broker's Redis restarted without persistence ---------------------------------------------------
# The broker and the model-server limiter share one Redis (the default), a redis-server of the test's own
# (tests/support/redis_server.py). The sweepers' fallback windows are set far beyond the test, so that only
# the broker's restart can explain a re-send (docs/backends.md, "Sweepers").
LONG_WINDOWS = {
    "SWEEP_REQUEUE_QUEUED_AFTER_S": "3600",
    "SWEEP_RETRIEVAL_REQUEUE_AFTER_S": "3000",
    "SWEEP_RETRIEVAL_DEADLINE_S": "3600",
    "SWEEP_SCORING_WINDOW_S": "3600",
}
# The brief's target: work lost with the broker's queues is sent again within a minute of it being back.
RESEND_BOUND_S = 60.0


def _api_status(annotator: Annotator, query_id: int) -> str:
    response = annotator.api.get(f"/api/v1/queries/{query_id}/")
    return str(response.json().get("status")) if response.status_code == 200 else f"HTTP {response.status_code}"


def broker_restart_mid_generation(
    rig: Rig, server: Any, *, first: int = 3, later: int = 2, down_s: float = 2.0
) -> Outcome:
    """`first` questions are being written (two summaries held at the model server, the rest queued) and
    `later` questions wait for their search when the broker's Redis, also the model-server limiter, stops.
    The summaries held at the model server are answered while Redis is away: they must end done, not failed.
    Redis comes back empty: the queued summaries and searches must be sent again by the sweepers once it is
    back, every question must become ready, and no summary may be written twice."""
    from django.utils import timezone

    outcome = Outcome("broker restart mid-generation", f"{first}+{later} questions, Redis down {down_s:.0f}s")
    gate = threading.Event()

    def held(body: dict[str, Any]) -> str:
        gate.wait(120)
        time.sleep(0.3)  # slowed: a queue builds up behind the two worker processes
        return f"Stand-in summary {len(str(body))} grounded in the abstracts [1]."

    with openai_standin(held) as llm:
        study = actions.study_open(slug=rig.slug("broker-restart"), systems=openai_systems(llm.base_url))
        rig.start_worker("worker", env={"MODEL_SERVER_LIMIT_URL": server.url, **LONG_WINDOWS})
        people = [Annotator.join(study) for _ in range(first + later)]
        ids = [a.ask().json()["id"] for a in people[:first]]
        in_flight = poll(
            lambda: (
                llm.completions >= 2
                and list(
                    Candidate.objects.filter(query_id__in=ids, status=Candidate.Status.RUNNING).values_list(
                        "pk", flat=True
                    )
                )
            ),
            timeout=60,
        )
        if not outcome.expect(in_flight and len(in_flight) == 2, f"two summaries never reached the model: {in_flight}"):
            gate.set()
            return outcome
        ids += [a.ask().json()["id"] for a in people[first:]]
        queued = set(
            Candidate.objects.filter(query_id__in=ids, status=Candidate.Status.QUEUED).values_list("pk", flat=True)
        )
        searching = set(Query.objects.filter(pk__in=ids, status=Query.Status.RETRIEVING).values_list("pk", flat=True))
        outcome.notes.append(
            f"at the stop: {len(in_flight)} summaries at the model, {len(queued)} queued, {len(searching)} searches waiting"
        )

        server.stop()
        gate.set()  # the model answers while Redis is away: the limiter's slot cannot be given back
        finished = poll(
            lambda: (
                Candidate.objects.filter(pk__in=in_flight).exclude(status=Candidate.Status.RUNNING).count()
                == len(in_flight)
            ),
            timeout=60,
        )
        outcome.expect(finished, "the summaries at the model never ended while Redis was away")
        time.sleep(down_s)
        server.start()
        back_at, back = timezone.now(), time.monotonic()

        outcome.settled_s = rig.settle(
            lambda: Query.objects.filter(pk__in=ids, status=Query.Status.READY).count() == len(ids),
            since=back,
            bound=180.0,
        )
        outcome.see(
            f"{Query.objects.filter(pk__in=ids, status=Query.Status.READY).count()}/{len(ids)} questions ready "
            + ("at the bound" if outcome.settled_s is None else f"{outcome.settled_s:.0f}s after Redis was back")
        )
        for query_id in ids:
            audit_query(outcome, query_id, systems=4)
        for annotator, query_id in zip(people, ids, strict=True):
            status = _api_status(annotator, query_id)
            outcome.expect(status == Query.Status.READY, f"the API says question {query_id} is {status}")

        written = {c.pk: c for c in Candidate.objects.filter(pk__in=in_flight)}
        for pk, candidate in written.items():
            outcome.expect(
                candidate.status == Candidate.Status.DONE and candidate.attempts == 1,
                f"summary {pk}, at the model during the restart, ended {candidate.status} after "
                f"{candidate.attempts} attempts: {short(candidate.failure_reason)!r}",
            )
        failed = Candidate.objects.filter(query_id__in=ids, status=Candidate.Status.FAILED)
        outcome.expect(
            not failed.exists(), f"{failed.count()} summaries failed: {[short(c.failure_reason) for c in failed]}"
        )

        # Lost work, sent again from its own state: stamped again once Redis was back, within the bound.
        resent = list(
            Candidate.objects.filter(pk__in=queued, queued_at__gte=back_at).values_list("queued_at", flat=True)
        )
        outcome.expect(queued, "no summary was queued when Redis stopped: the scenario lost nothing")
        outcome.expect(
            len(resent) == len(queued),
            f"{len(queued) - len(resent)} of the {len(queued)} summaries queued at the restart were never sent again",
        )
        researched = list(
            Query.objects.filter(pk__in=searching, retrieval_requeued_at__gte=back_at).values_list(
                "retrieval_requeued_at", flat=True
            )
        )
        outcome.expect(
            len(researched) == len(searching),
            f"{len(searching) - len(researched)} of the {len(searching)} searches waiting at the restart were never sent again",
        )
        stamps = [*resent, *researched]
        if stamps:
            latest = max((stamp - back_at).total_seconds() for stamp in stamps)
            outcome.notes.append(f"lost work sent again at most {latest:.1f}s after Redis was back")
            outcome.expect(latest <= RESEND_BOUND_S, f"lost work was sent again {latest:.0f}s after Redis was back")
        # Nothing written twice: one model call per summary.
        total = Candidate.objects.filter(query_id__in=ids).count()
        outcome.expect(llm.completions == total, f"{llm.completions} model calls for {total} summaries")
        outcome.duplicated += max(0, llm.completions - total)
        outcome.notes.append(f"model calls {llm.completions} for {total} summaries")
    for annotator in people:
        annotator.close()
    return outcome


def broker_restart_with_research_queued(rig: Rig, server: Any, *, down_s: float = 2.0) -> Outcome:
    """A research export and a scoring run are waiting in the research queue (no worker serves it yet) when
    the broker's Redis restarts empty. Once a research worker runs, the sweepers must send both again from
    their own state, and each must end done once: one file list, every candidate scored once."""
    from django.utils import timezone

    outcome = Outcome("broker restart with research queued", f"Redis down {down_s:.0f}s")
    annotator_queues = ["annotator", "retrieval", "default"]
    rig.pool.start("annotator", queues=annotator_queues, extra_env=dict(LONG_WINDOWS))
    study, _ = generated_study(rig, name="restart-research", annotators=2, answer=True)
    researcher = researcher_client(study)
    job = researcher.post(
        f"/api/v1/research/studies/{study.slug}/jobs/", {"kind": "export", "options": {"format": "csv"}},
        content_type="application/json",
    )  # fmt: skip
    run = researcher.post(
        f"/api/v1/research/studies/{study.slug}/scoring-runs/", {"metrics": ["rouge1"]}, content_type="application/json"
    )
    if not outcome.expect(
        job.status_code == run.status_code == 201, f"starting answered {job.status_code}, {run.status_code}"
    ):
        return outcome
    job_id, run_id = job.json()["id"], run.json()["id"]
    outcome.expect(rig.pool.queued() >= 2, f"the research messages are not waiting in the broker ({rig.pool.queued()})")
    server.restart(down_s=down_s)
    rig.start_worker("research", env=dict(LONG_WINDOWS))
    # Redis and a research worker are both back from here.
    back_at, back = timezone.now(), time.monotonic()

    def ended() -> bool:
        return (
            ResearchJob.objects.get(pk=job_id).status in TERMINAL_JOB
            and ScoringRun.objects.get(pk=run_id).status in TERMINAL_JOB
        )

    outcome.settled_s = rig.settle(ended, since=back, bound=120.0)
    job_row, run_row = ResearchJob.objects.get(pk=job_id), ScoringRun.objects.get(pk=run_id)
    outcome.see(f"export {job_row.status} {job_row.files}; scoring {run_row.status} {run_row.done}/{run_row.total}")
    outcome.expect(job_row.status == ResearchJob.Status.DONE, f"the export ended {job_row.status}: {job_row.error!r}")
    outcome.expect(job_row.attempts == 1, f"the export ran {job_row.attempts} times")
    outcome.expect(
        job_row.queued_at is not None and job_row.queued_at >= back_at,
        "the export was never sent again after the restart",
    )
    if job_row.queued_at is not None and job_row.queued_at >= back_at:
        resent_s = (job_row.queued_at - back_at).total_seconds()
        outcome.notes.append(f"export sent again {resent_s:.1f}s after Redis was back")
        outcome.expect(resent_s <= RESEND_BOUND_S, f"the export was sent again {resent_s:.0f}s after Redis was back")
    outcome.expect(
        run_row.status == ScoringRun.Status.DONE, f"the scoring run ended {run_row.status}: {run_row.error!r}"
    )
    scores = CandidateScore.objects.filter(candidate__query__participation__study=study, metric="rouge1").count()
    outcome.expect(
        run_row.done == run_row.total == scores, f"scored {scores}, counted {run_row.done} of {run_row.total}"
    )
    outcome.duplicated += max(0, run_row.done - run_row.total) + max(0, len(job_row.files) - len(set(job_row.files)))
    if outcome.settled_s is not None:
        outcome.notes.append(f"both done {outcome.settled_s:.0f}s after Redis was back (restarts {run_row.restarts})")
    return outcome


# The field test's broker restart (bench/field.py): Redis killed, back empty 10 s later, while a worker has a summary
# in flight (late-acked, so its message is unacknowledged) and a process free, waiting on the broker for its next
# task, as a worker mostly is. That shape killed the worker's consumer in the field (config/celery.py).
FIELD_DOWN_S = 10.0
# A worker whose consumer stopped for good is gone within this long (config/celery.py, ExitingConsumer).
EXIT_BOUND_S = 15.0
# The worker the fault suite runs with kombu's Redis channel as released (tests/faults/worker_settings.py).
KOMBU_AS_RELEASED = {"DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings", "FAULTS_KOMBU_AS_RELEASED": "1"}
CONSUMER_DIED = "Unrecoverable error"
CONSUMER_STOPPED = "the broker consumer stopped for good"


def _first_held(gate: threading.Event) -> Callable[[dict[str, Any]], str]:
    """A model that holds the first request it gets until `gate` is set and answers every other at once."""
    calls = itertools.count(1)

    def answer(body: dict[str, Any]) -> str:
        if next(calls) == 1:
            gate.wait(300)
        return default_responder(body)

    return answer


def _one_summary_in_flight(outcome: Outcome, query_id: int) -> bool:
    """Wait until three of the question's summaries are written and the fourth is at the model: one worker process
    runs it, the other waits on the broker."""
    held = poll(
        lambda: (
            Candidate.objects.filter(query_id=query_id, status=Candidate.Status.DONE).count() == 3
            and Candidate.objects.filter(query_id=query_id, status=Candidate.Status.RUNNING).count() == 1
        ),
        timeout=60,
    )
    time.sleep(0.5)  # the free process's BRPOP, sent after the third summary's ack
    return outcome.expect(held, f"no summary held at the model with the others written: {describe_query(query_id)}")


def _both_ready(rig: Rig, outcome: Outcome, people: list[Annotator], ids: list[int], *, back: float) -> None:
    """Both questions ready (the sweepers running on their schedule) within a minute of Redis being back, each as
    the API tells its annotator, and every summary written once."""
    outcome.settled_s = rig.settle(
        lambda: Query.objects.filter(pk__in=ids, status=Query.Status.READY).count() == len(ids),
        since=back,
        bound=RESEND_BOUND_S,
    )
    for annotator, query_id in zip(people, ids, strict=True):
        audit_query(outcome, query_id, systems=4)
        status = _api_status(annotator, query_id)
        outcome.expect(status == Query.Status.READY, f"the API says question {query_id} is {status}")
    ready = Query.objects.filter(pk__in=ids, status=Query.Status.READY).count()
    outcome.see(
        f"{ready}/{len(ids)} questions ready "
        + (
            f"at the {RESEND_BOUND_S:.0f}s bound"
            if outcome.settled_s is None
            else f"{outcome.settled_s:.0f}s after Redis was back"
        )
    )
    failed = Candidate.objects.filter(query_id__in=ids, status=Candidate.Status.FAILED)
    outcome.expect(not failed.exists(), f"summaries failed: {[short(c.failure_reason) for c in failed]}")


def broker_restart_with_a_summary_in_flight(rig: Rig, server: Any, *, down_s: float = FIELD_DOWN_S) -> Outcome:
    """A question's last summary is at the model and the worker's other process waits on the broker when Redis is
    killed; it comes back empty `down_s` later and the summary is answered. The worker must live on and take new
    work: a question asked once Redis is back must be ready within a minute, and so must the one in flight, its
    summary written once."""
    outcome = Outcome("broker restart, a summary in flight", f"Redis killed, back empty after {down_s:.0f}s")
    gate = threading.Event()
    with openai_standin(_first_held(gate)) as llm:
        try:
            study = actions.study_open(slug=rig.slug("restart-in-flight"), systems=openai_systems(llm.base_url))
            worker = rig.start_worker("worker")
            people = [Annotator.join(study), Annotator.join(study)]
            ids = [people[0].ask().json()["id"]]
            if not _one_summary_in_flight(outcome, ids[0]):
                return outcome
            held = Candidate.objects.get(query_id=ids[0], status=Candidate.Status.RUNNING)
            server.stop()
            time.sleep(down_s)
            server.start()
            back = time.monotonic()
            gate.set()
            ids.append(people[1].ask().json()["id"])
            _both_ready(rig, outcome, people, ids, back=back)
        finally:
            gate.set()
        alive = worker.process is not None and worker.process.poll() is None
        outcome.expect(
            alive and CONSUMER_DIED not in worker.log(),
            f"the worker's consumer died (process {'alive' if alive else 'exited'}): "
            f"{short(_line_with(worker.log(), CONSUMER_DIED), 200)!r}",
        )
        held.refresh_from_db()
        outcome.expect(
            held.status == Candidate.Status.DONE and held.attempts == 1,
            f"the summary in flight ended {held.status} after {held.attempts} attempts",
        )
        total = Candidate.objects.filter(query_id__in=ids).count()
        outcome.expect(llm.completions == total, f"{llm.completions} model calls for {total} summaries")
        outcome.duplicated += max(0, llm.completions - total)
        outcome.notes.append(
            f"worker {'alive' if alive else 'gone'}; model calls {llm.completions} for {total} summaries"
        )
    for annotator in people:
        annotator.close()
    return outcome


def consumer_stopped_by_a_broker_restart(
    rig: Rig, server: Any, *, pool: str = "prefork", down_s: float = FIELD_DOWN_S
) -> Outcome:
    """The same restart, on a worker with kombu's Redis channel as released, whose consumer it kills for real
    (tests/faults/worker_settings.py). The worker must exit within seconds, not when its summary at the model ends,
    and with a failure code, so that its supervisor starts it again; started again (docker-compose.yml's restart
    policy), it must finish the question in flight, whose summary the sweepers send again, and a new one. A thread
    pool's running task cannot be ended: the worker then exits when its time is up (config/celery.py)."""
    outcome = Outcome(
        "consumer stopped by a broker restart", f"{pool} pool, kombu as released, Redis back after {down_s:.0f}s"
    )
    gate = threading.Event()
    with openai_standin(_first_held(gate)) as llm:
        try:
            study = actions.study_open(slug=rig.slug("consumer-stopped"), systems=openai_systems(llm.base_url))
            doomed = rig.start_worker("as-released", env=KOMBU_AS_RELEASED, pool=pool)
            people = [Annotator.join(study), Annotator.join(study)]
            ids = [people[0].ask().json()["id"]]
            if not _one_summary_in_flight(outcome, ids[0]):
                return outcome
            server.stop()
            killed = time.monotonic()
            assert doomed.process is not None
            poll(lambda: doomed.process is not None and doomed.process.poll() is not None, timeout=EXIT_BOUND_S + 30)
            code = doomed.process.poll()
            exit_s = time.monotonic() - killed
            outcome.expect(
                CONSUMER_DIED in doomed.log() or CONSUMER_STOPPED in doomed.log(),
                "the restart did not stop the consumer: the fault was not caused",
            )
            outcome.expect(
                code is not None and exit_s <= EXIT_BOUND_S,
                f"the worker was still running {exit_s:.0f}s after its consumer stopped",
            )
            outcome.expect(code not in (None, 0), f"the worker exited with {code}: its supervisor sees no failure")
            outcome.notes.append(
                "worker "
                + (f"exited with {code} {exit_s:.1f}s after Redis was killed" if code is not None else "still running")
            )
            time.sleep(max(0.0, down_s - (time.monotonic() - killed)))
            server.start()
            back = time.monotonic()
            rig.start_worker("restarted")
            ids.append(people[1].ask().json()["id"])
            _both_ready(rig, outcome, people, ids, back=back)
        finally:
            gate.set()
    for annotator in people:
        annotator.close()
    return outcome


def _line_with(log: str, text: str) -> str:
    return next((line for line in log.splitlines() if text in line), "")


def resend_while_queued(rig: Rig, *, questions: int = 3, window_s: int = 1) -> Outcome:
    """The fallback windows set to `window_s` seconds and the generation sweeper run every second while a
    backlog waits for a slowed model server: queued summaries and searches whose messages were never lost
    are sent again and again. Every question must still become ready with each summary written once."""
    outcome = Outcome("re-send of work merely queued", f"{questions} questions, windows {window_s}s")
    windows = {
        "SWEEP_REQUEUE_QUEUED_AFTER_S": str(window_s),
        "SWEEP_RETRIEVAL_REQUEUE_AFTER_S": str(window_s),
        "SWEEP_RETRIEVAL_DEADLINE_S": "600",
    }
    with openai_standin(delay=0.5) as llm:
        study = actions.study_open(slug=rig.slug("resend"), systems=openai_systems(llm.base_url))
        worker = rig.start_worker("worker", env=windows)
        people = [Annotator.join(study) for _ in range(questions)]
        ids = [a.ask().json()["id"] for a in people]
        started = time.monotonic()

        def ready() -> bool:
            return Query.objects.filter(pk__in=ids, status=Query.Status.READY).count() == len(ids)

        while not ready() and time.monotonic() - started < 120:
            rig.sweep(["annotation.tasks.sweep_generation"])
            time.sleep(1.0)
        outcome.settled_s = time.monotonic() - started if ready() else None
        for query_id in ids:
            audit_query(outcome, query_id, systems=4)
        resends = sum(int(n) for n in re.findall(r"sweeper: (\d+) candidate\(s\) sent again", worker.log()))
        outcome.expect(resends > 0, "no queued summary was sent again: the scenario proved nothing")
        total = Candidate.objects.filter(query_id__in=ids).count()
        outcome.expect(llm.completions == total, f"{llm.completions} model calls for {total} summaries")
        outcome.duplicated += max(0, llm.completions - total)
        attempts = sorted(Candidate.objects.filter(query_id__in=ids).values_list("attempts", flat=True))
        outcome.expect(set(attempts) == {1}, f"attempts per summary: {attempts}")
        outcome.see(
            f"{Query.objects.filter(pk__in=ids, status=Query.Status.READY).count()}/{len(ids)} ready; "
            f"{resends} re-sends of queued summaries; {llm.completions} model calls for {total} summaries"
        )
    for annotator in people:
        annotator.close()
    return outcome


def try_again_after_failure(rig: Rig) -> Outcome:
    """Every summary of a question fails (the model server refuses each first request with a 400): the API
    must say so as the waiting page does, and the annotator's "try again" through the API must bring the
    question to ready once the server answers."""
    outcome = Outcome("try again after every summary failed", "a 400 for each of the first 4 requests")
    with openai_standin(script=["400"] * 4) as llm:
        study = actions.study_open(slug=rig.slug("try-again"), systems=openai_systems(llm.base_url))
        rig.start_worker("worker")
        annotator = Annotator.join(study)
        query_id = annotator.ask().json()["id"]
        failed = poll(
            lambda: Candidate.objects.filter(query_id=query_id, status=Candidate.Status.FAILED).count() == 4,
            timeout=60,
        )
        if not outcome.expect(failed, f"the summaries did not fail: {describe_query(query_id)}"):
            return outcome
        body = annotator.api.get(f"/api/v1/queries/{query_id}/").json()
        page = annotator.status(Query.objects.get(pk=query_id).index)
        outcome.expect(
            (body.get("status"), body.get("failed"), body.get("failure_reason"))
            == ("failed", True, "4 of the summaries could not be written."),
            f"the API says {body.get('status')}, failed {body.get('failed')}, {body.get('failure_reason')!r}",
        )
        outcome.expect(
            (page.get("status"), page.get("failed"), page.get("failure_reason"))
            == (body.get("status"), body.get("failed"), body.get("failure_reason")),
            f"the page's poll says {page.get('status')}, the API {body.get('status')}",
        )
        retried = annotator.api.post(f"/api/v1/queries/{query_id}/retry/")
        outcome.expect(retried.status_code == 200, f"try again answered {retried.status_code}")
        ready = poll(lambda: _api_status(annotator, query_id) == Query.Status.READY, timeout=60)
        outcome.expect(ready, f"not ready after try again: {describe_query(query_id)}")
        audit_query(outcome, query_id, systems=4)
        outcome.expect(llm.completions == 8, f"{llm.completions} model calls for 4 refused and 4 answered")
        outcome.see(
            f"API {body.get('status')} ({body.get('failure_reason')}); after try again: {_api_status(annotator, query_id)}"
        )
        annotator.close()
    return outcome
