"""Upgrade rehearsal (issue 31, "Upgrade it"): a study running on the previous release is migrated while that
release still serves, then continued on this one; nothing may be lost.

    .venv/bin/python bench/upgrade.py                 # previous release: the commit in PREVIOUS_RELEASE
    .venv/bin/python bench/upgrade.py --previous <git ref> --annotators 12

1. The previous release's tree (a `git worktree` of the ref, on this virtualenv) migrates a new database, creates
   a study with invitations and serves it: gunicorn with its platform/gunicorn.conf.py and a Celery worker.
2. N annotators (threads speaking the annotator API, docs/api.md) accept, describe themselves, ask a question,
   wait for it and answer its first match.
3. This release's `upgrade_plan` and `migrate` run against the database while the previous release serves; the
   annotators then answer their next match on the previous release (an expand keeps it working).
4. The previous release stops; this one starts (gunicorn and a worker from this tree); the annotators finish the
   question, ask and rank a second one, and finish.
5. The database is checked against what the clients sent: every first answer stored once, with the choice sent;
   every question ranked; every participation finished.

It prints per phase the release serving, requests, 5xx answers and answers sent, then the check. Exit 0 when
nothing was lost, duplicated or refused with a 5xx.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import psycopg
from _shared import (  # bench/ is the script directory
    QUESTIONS,
    REPO,
    VENV_BIN,
    flush_broker,
    production_env,
    recreate_database,
)
from load import PERSONAS

# The release before this session's work (stop 35, CI passed): what a running deployment had on 2026-12-06.
PREVIOUS_RELEASE = "d7c46ff"
HOST = "127.0.0.1"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Release:
    """One release's web server and worker, from its own tree."""

    def __init__(self, name: str, tree: Path, env: dict[str, str], work: Path) -> None:
        self.name, self.tree, self.env, self.work = name, tree, env, work
        self.procs: list[subprocess.Popen[bytes]] = []

    def manage(self, *argv: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "python"), "manage.py", *argv],
            cwd=self.tree,
            env=self.env | {"PYTHONPATH": str(self.tree)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode not in (0, 1) or "Traceback" in result.stderr:
            raise SystemExit(f"{self.name}: manage.py {' '.join(argv)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def python(self, code: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "python"), "-c", code],
            cwd=self.tree,
            env=self.env | {"PYTHONPATH": str(self.tree)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            raise SystemExit(f"{self.name}: setup failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def start(self, port: int) -> None:
        env = self.env | {"PYTHONPATH": str(self.tree), "GUNICORN_BIND": f"{HOST}:{port}", "GUNICORN_WORKERS": "2"}
        for name, argv in (
            ("web", [str(VENV_BIN / "gunicorn"), "config.wsgi", "-c", "platform/gunicorn.conf.py"]),
            (
                "worker",
                [str(VENV_BIN / "celery"), "-A", "config", "worker", "-l", "INFO", "--concurrency", "4",
                 "--prefetch-multiplier", "1", "--without-gossip", "--without-mingle",
                 "-n", f"upgrade-{self.name}-{os.getpid()}@%h"],
            ),
        ):  # fmt: skip
            log = open(self.work / f"{self.name}-{name}.log", "wb")  # noqa: SIM115 - the process holds it
            self.procs.append(
                subprocess.Popen(argv, cwd=self.tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{HOST}:{port}/healthz/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit(f"{self.name}: the web server did not answer (logs in {self.work})")
        while b" ready." not in (self.work / f"{self.name}-worker.log").read_bytes():
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: the worker did not start (logs in {self.work})")
            time.sleep(0.5)

    def stop(self) -> None:
        import signal

        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs = []


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.server_errors: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.problems: list[str] = []

    def note(self, phase: str, status: int) -> None:
        with self.lock:
            self.requests[phase] += 1
            if status >= 500:
                self.server_errors[phase] += 1


class Annotator:
    def __init__(self, number: int, invitation: str, tally: Tally) -> None:
        self.number, self.invitation, self.tally = number, invitation, tally
        self.rng = random.Random(number)
        self.choices: dict[int, str] = {}
        self.token = ""
        self.participation = 0
        self.queries: list[int] = []
        self.finished = False
        self.base_url = ""
        self.phase = ""

    def call(self, method: str, path: str, expect: tuple[int, ...] = (200,), **kwargs: object) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        for attempt in range(6):  # a 503 (one moment) or a dropped connection is sent again, as the client does
            try:
                response = httpx.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)  # type: ignore[arg-type]
            except httpx.HTTPError as error:
                self.tally.problems.append(f"annotator {self.number}: {method} {path}: {error!r}")
                time.sleep(0.5 * (attempt + 1))
                continue
            self.tally.note(self.phase, response.status_code)
            if response.status_code in expect:
                return response
            if response.status_code != 503:
                raise RuntimeError(f"{method} {path} -> {response.status_code} {response.text[:200]}")
            time.sleep(float(response.headers.get("Retry-After", "1")))
        raise RuntimeError(f"{method} {path}: no answer after 6 tries")

    def join_and_ask(self) -> None:
        body = self.call(
            "POST", f"/api/v1/invitations/{self.invitation}/accept/", (201,), json={"consent": True}
        ).json()
        self.token, self.participation = body["token"], body["id"]
        self.call("PUT", f"/api/v1/participations/{self.participation}/persona/", json=self.rng.choice(PERSONAS))
        self.ask()

    def ask(self) -> None:
        payload = {"text": self.rng.choice(QUESTIONS), "client_token": uuid.uuid4().hex}
        query = self.call("POST", f"/api/v1/participations/{self.participation}/queries/", (201,), json=payload).json()
        self.queries.append(query["id"])
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            status = self.call("GET", f"/api/v1/queries/{query['id']}/").json()["status"]
            if status in ("ready", "ranked"):
                return
            if status in ("failed", "discarded"):
                raise RuntimeError(f"question {query['id']} {status}")
            time.sleep(1.0)
        raise RuntimeError(f"question {query['id']} not ready after 240 s")

    def answer(self, matches: int) -> int:
        """Answer up to `matches` matches of the current question; how many were answered."""
        answered = 0
        while answered < matches:
            current = self.call("GET", f"/api/v1/queries/{self.queries[-1]}/current-match/", (200, 204))
            if current.status_code == 204:
                break
            match = current.json()
            choice = self.rng.choice(["left", "right", "neither"])
            stored = self.call("POST", f"/api/v1/matches/{match['id']}/choice/", json={"choice": choice}).json()
            if stored.get("choice") != choice:
                self.tally.problems.append(f"match {match['id']}: stored {stored.get('choice')!r}, sent {choice!r}")
            self.choices.setdefault(match["id"], choice)
            with self.tally.lock:
                self.tally.answers[self.phase] += 1
            answered += 1
        return answered

    def finish_question(self) -> None:
        self.answer(8)

    def finish(self) -> None:
        self.call("POST", f"/api/v1/participations/{self.participation}/finish/")
        self.finished = True


def each(annotators: list[Annotator], phase: str, base_url: str, work: str) -> None:
    def run(a: Annotator) -> None:
        a.phase, a.base_url = phase, base_url
        try:
            if work == "join":
                a.join_and_ask()
                a.answer(1)
            elif work == "one":
                a.answer(1)
            else:
                a.finish_question()
                a.ask()
                a.finish_question()
                a.finish()
        except Exception as error:  # noqa: BLE001 - reported in the table, the others go on
            a.tally.problems.append(f"annotator {a.number} ({phase}): {error!r}")

    threads = [threading.Thread(target=run, args=(a,)) for a in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def verify(database_url: str, slug: str, annotators: list[Annotator]) -> list[str]:
    sent = {m: c for a in annotators for m, c in a.choices.items()}
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select j.match_id, j.choice from annotation_judgment j join annotation_match m on m.id = j.match_id "
            "join annotation_bracket b on b.id = m.bracket_id join annotation_query q on q.id = b.query_id "
            "join annotation_participation p on p.id = q.participation_id join annotation_study s on s.id = p.study_id "
            "where s.slug = %s",
            [slug],
        ).fetchall()
        statuses = conn.execute(
            "select q.status, count(*) from annotation_query q join annotation_participation p on p.id = "
            "q.participation_id join annotation_study s on s.id = p.study_id where s.slug = %s group by q.status",
            [slug],
        ).fetchall()
        finished = conn.execute(
            "select count(*) from annotation_participation p join annotation_study s on s.id = p.study_id "
            "where s.slug = %s and p.completed_at is not null",
            [slug],
        ).fetchone()
    stored: dict[int, str] = {}
    failures = []
    for match, choice in rows:
        if match in stored:
            failures.append(f"match {match} has two judgments")
        stored[match] = choice
    lost = sorted(set(sent) - set(stored))
    extra = sorted(set(stored) - set(sent))
    changed = sorted(m for m in sent if m in stored and stored[m] != sent[m])
    if lost:
        failures.append(f"{len(lost)} answers sent and not stored: {lost[:10]}")
    if extra:
        failures.append(f"{len(extra)} judgments nobody sent: {extra[:10]}")
    if changed:
        failures.append(f"{len(changed)} judgments differ from the choice sent: {changed[:10]}")
    by_status = dict(statuses)
    asked = sum(len(a.queries) for a in annotators)
    if by_status.get("ranked", 0) != asked:
        failures.append(f"{by_status.get('ranked', 0)} of {asked} questions ranked ({by_status})")
    if finished and finished[0] != len(annotators):
        failures.append(f"{finished[0]} of {len(annotators)} participations finished")
    print(
        f"\ndatabase: {len(stored)} judgments for {len(sent)} answers sent; questions {by_status}; "
        f"{finished[0] if finished else 0} of {len(annotators)} participations finished"
    )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=PREVIOUS_RELEASE, help="git ref of the release running before")
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--db-name", default="bench_upgrade")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    if not args.db_name.startswith("bench"):
        parser.error("--db-name must start with 'bench' (it is dropped and made again)")

    work = Path(f"/tmp/satisfy-upgrade-{os.getpid()}")
    work.mkdir(parents=True)
    old_tree = work / "previous"
    subprocess.run(["git", "worktree", "add", "--detach", str(old_tree), args.previous], cwd=REPO, check=True,
                   capture_output=True)  # fmt: skip
    database_url = f"{args.postgres}/{args.db_name}"
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    flush_broker(args.redis)
    # Plain HTTP on 127.0.0.1: no HTTPS redirect (docs/deploy.md); every queue on the one worker.
    env = production_env(database_url=database_url, broker_url=args.redis, work=work, SECURE_SSL_REDIRECT="false")
    previous = Release(f"previous ({args.previous})", old_tree, env, work)
    current = Release("this release", REPO, env, work)
    previous.name, current.name = "previous", "current"
    tally = Tally()
    rows: list[tuple[str, str, str]] = []
    try:
        previous.manage("migrate", "--noinput")
        slug = f"upgrade-{secrets.token_hex(3)}"
        tokens = previous.python(
            # The previous release's own module names (d7c46ff), not this one's.
            "import django; django.setup()\n"
            "from annotation.models import Study\n"
            "from annotation.services.study import study_create\n"
            "from annotation.services.participation import invitation_create_bulk\n"
            f"study = study_create(slug={slug!r}, title='Upgrade rehearsal', status=Study.Status.OPEN,"
            " queries_per_annotator=3)\n"
            f"print(' '.join(i.token for i in invitation_create_bulk(study=study, count={args.annotators})))\n"
        ).split()
        annotators = [Annotator(n, token, tally) for n, token in enumerate(tokens)]
        port = free_port()
        base_url = f"http://{HOST}:{port}"
        previous.start(port)
        started = time.monotonic()
        each(annotators, "A", base_url, "join")
        rows.append(("A", f"previous ({args.previous})", "join, ask, answer a match"))
        if tally.problems:
            raise SystemExit("the previous release did not serve the study:\n" + "\n".join(tally.problems[:10]))

        print("upgrade_plan (this release, against the running database):")
        print(current.manage("upgrade_plan"))
        current.manage("migrate", "--noinput")
        each(annotators, "B", base_url, "one")
        rows.append(("B", f"previous ({args.previous}), schema migrated", "answer the next match"))

        previous.stop()
        current.start(port)
        each(annotators, "C", base_url, "rest")
        rows.append(("C", "this release", "finish, ask and rank a second question, finish"))
        elapsed = time.monotonic() - started
        failures = verify(database_url, slug, annotators)
    finally:
        previous.stop()
        current.stop()
        subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=REPO, capture_output=True)
    print(f"\n{args.annotators} annotators, {elapsed:.0f} s from the first request\n")
    print("| phase | serving | what the annotators did | requests | 5xx | answers |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for phase, serving, what in rows:
        print(
            f"| {phase} | {serving} | {what} | {tally.requests[phase]} | {tally.server_errors[phase]} | "
            f"{tally.answers[phase]} |"
        )
    problems = tally.problems + failures
    server_errors = sum(tally.server_errors.values())
    if problems or server_errors:
        print("\nREHEARSAL FAILED:")
        for line in problems[:30]:
            print(f"  {line}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("\nREHEARSAL PASSED: nothing lost or duplicated, no 5xx, across the upgrade")
    return 0


if __name__ == "__main__":
    sys.exit(main())
