#!/usr/bin/env python
"""Label Studio as the peer: its annotation POST beside our choice POST, with the same client at 1, 10 and 50
concurrent clients, both apps on the same PostgreSQL server (own databases) behind the same gunicorn settings.

Installs nothing: give it a Label Studio environment, e.g.

    python3.11 -m venv /work/ls-venv && /work/ls-venv/bin/pip install label-studio==1.23.2   # once, outside the repo
    .venv/bin/python bench/labelstudio.py --label-studio-python /work/ls-venv/bin/python

Without one it measures our side only and says so. Run from the repository root.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _shared import (  # bench/ is the script directory
    QUESTIONS,
    REPO,
    VENV_BIN,
    check_db_name,
    manage,
    percentile,
    production_env,
    recreate_database,
    spawn,
    use_in_this_process,
)

HOST = "127.0.0.1"
PERSONA = {
    "role": "Clinician",
    "domain": "Medicine",
    "expertise": "expert",
    "research_area": "cardiology",
    "use_case": "deciding on a treatment policy",
}
# A pairwise task as Label Studio's own template has it: two texts, one Pairwise control.
PAIRWISE_CONFIG = """<View>
  <Header value="Which summary answers the question better?"/>
  <Text name="left" value="$left"/>
  <Text name="right" value="$right"/>
  <Pairwise name="pw" toName="left,right"/>
</View>"""
# The legacy API token of the user `label-studio start` creates on its first run in a fresh database (it keeps
# the user, and this token, on later runs).
LS_TOKEN = "benchtoken123456"  # noqa: S105 - a local throwaway instance
# Cheap authenticated reads, for the warm-up and to open each client's connection before the clock starts.
LS_GET = "/api/projects/"
OUR_GET = "/api/v1/participations/"
PAIRWISE_RESULT = [
    {"from_name": "pw", "to_name": "left,right", "type": "pairwise", "value": {"selected": "left"}, "origin": "manual"}
]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label-studio-python", type=Path, default=None, help="python of an environment with label-studio")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    p.add_argument(
        "--requests", type=int, default=20, help="answers per client at each concurrency (see --min-answers)"
    )
    p.add_argument("--min-answers", type=int, default=200, help="answers per concurrency level at least")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    p.add_argument(
        "--db-name", default="bench_peer", help="our database, dropped and recreated; must start with 'bench'"
    )
    p.add_argument(
        "--ls-db-name", default="bench_labelstudio", help="Label Studio's database (kept: migrating is slow)"
    )
    p.add_argument("--fresh-label-studio", action="store_true", help="drop and recreate Label Studio's database first")
    p.add_argument(
        "--label-studio-server",
        choices=["gunicorn", "start"],
        default="gunicorn",
        help="gunicorn: its WSGI app under the same gunicorn settings as ours (gunicorn from this venv, on its path); "
        "start: `label-studio start` (Django's runserver)",
    )
    p.add_argument("--target", type=float, default=5.0, help="required ratio of our throughput to Label Studio's")
    p.add_argument("--keep-logs", action="store_true")
    args = p.parse_args()
    check_db_name(p, args.db_name)
    check_db_name(p, args.ls_db_name)
    return args


def per_level(args: argparse.Namespace, clients: int) -> int:
    """Answers each client sends at this concurrency: --requests, or more so a level has --min-answers."""
    return max(args.requests, -(-args.min_answers // clients))


def gunicorn_flags(bind: str) -> list[str]:
    """The settings of platform/gunicorn.conf.py, spelled out for a server that cannot read that file."""
    workers = str((os.cpu_count() or 1) + 1)
    return ["--bind", bind, "--workers", workers, "--worker-class", "gthread", "--threads", "4", "--timeout", "60"]


class Server:
    def __init__(self, name: str, argv: list[str], *, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        self.proc = spawn(argv, env=env, log=log)

    def wait(self, url: str, *, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=3).status_code < 500:
                    return
            time.sleep(1)
        raise RuntimeError(f"{self.name} not up after {timeout:.0f}s:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --- the same client for both -----------------------------------------------------------------------


def warm_up(base_url: str, path: str, token: str) -> None:
    """Unmeasured authenticated GETs, concurrent, so every gunicorn worker has loaded the app, its URLconf and
    its database connection before the clock starts (a cold worker's first request takes seconds)."""

    def hit() -> None:
        with httpx.Client(base_url=base_url, timeout=120, headers={"Authorization": f"Token {token}"}) as c:
            for _ in range(4):
                with contextlib.suppress(httpx.HTTPError):
                    c.get(path)

    threads = [threading.Thread(target=hit, daemon=True) for _ in range(4 * ((os.cpu_count() or 1) + 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)


def hammer(base_url: str, work: list[tuple[str, list[tuple[str, dict[str, Any]]]]], *, path: str) -> dict[str, Any]:
    """One thread per client, each with its own API token and keep-alive connection, POSTing its own list of
    (url, body) back to back once all are connected; returns throughput, latencies and any answer that was
    not 200/201."""
    latencies: list[float] = []
    bad: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(work) + 1)

    def client(token: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": f"Token {token}"}) as c:
            with contextlib.suppress(httpx.HTTPError):
                c.get(path)  # the connection, opened before the clock starts
            barrier.wait()
            for url, body in items:
                start = time.perf_counter()
                try:
                    status: int | str = c.post(url, json=body).status_code
                except httpx.HTTPError as error:
                    status = type(error).__name__
                ms = (time.perf_counter() - start) * 1000
                with lock:
                    latencies.append(ms)
                    if status not in (200, 201):
                        bad.append(f"{url} -> {status}")

    threads = [threading.Thread(target=client, args=w, daemon=True) for w in work]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"n": len(latencies), "rps": len(latencies) / wall, "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95), "bad": bad}  # fmt: skip


# --- our side ---------------------------------------------------------------------------------------


def our_matches(levels: list[tuple[int, int]]) -> list[list[tuple[str, list[tuple[str, dict[str, Any]]]]]]:
    """One participation per client and level, each with enough ready questions (done candidates, a drawn
    bracket) for its answers: both first-round matches of each question, the second of which creates the
    final, as in a real bracket. Returns, per level, each client's API token and list of choice requests."""
    from django.db import connections, transaction
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from annotation.models import Candidate, Match, Query
    from annotation.services.participation import invitation_join
    from annotation.services.persona import persona_save
    from annotation.services.tournament import bracket_create
    from studies.models import Study
    from studies.services.invitation import invitation_create_bulk
    from studies.services.study import study_create

    study = study_create(slug=f"peer-{secrets.token_hex(3)}", title="Peer benchmark", status=Study.Status.OPEN)
    systems = list(study.systems.order_by("order"))
    per_level_work = []
    for clients, answers in levels:
        level = []
        for invitation in invitation_create_bulk(study=study, count=clients):
            participation, _ = invitation_join(token=invitation.token, annotator=None, consent=True)
            persona = persona_save(participation=participation, data=PERSONA)
            # The token of each client's own participation: the API answers only one's own matches.
            key = Token.objects.get_or_create(user=participation.annotator)[0].key
            items = []
            for index in range(1, -(-answers // 2) + 1):
                with transaction.atomic():
                    query = Query.objects.create(
                        participation=participation,
                        persona=persona,
                        index=index,
                        text=QUESTIONS[index % len(QUESTIONS)],
                        client_token=uuid.uuid4().hex,
                        status=Query.Status.GENERATING,
                    )
                    now = timezone.now()
                    Candidate.objects.bulk_create(
                        Candidate(query=query, system=s, status=Candidate.Status.DONE, text=f"{s.label}: {query.text} " * 8,
                                  finished_at=now, system_label=s.label, model_name=s.model_name, condition=s.condition)
                        for s in systems
                    )  # fmt: skip
                    bracket_create(query=query)
                for match in Match.objects.filter(bracket__query=query, round=1).order_by("index"):
                    items.append((f"/api/v1/matches/{match.pk}/choice/", {"choice": "left"}))
            level.append((key, items[:answers]))
        per_level_work.append(level)
    connections.close_all()
    return per_level_work


# --- Label Studio -----------------------------------------------------------------------------------


def label_studio_env(args: argparse.Namespace, data_dir: Path) -> dict[str, str]:
    from urllib.parse import urlparse

    server = urlparse(args.postgres)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "PYTHON"))}
    env.update(
        DJANGO_DB="default",
        POSTGRE_NAME=args.ls_db_name,
        POSTGRE_USER=server.username or "postgres",
        POSTGRE_PASSWORD=server.password or "",
        POSTGRE_HOST=server.hostname or HOST,
        POSTGRE_PORT=str(server.port or 5432),
        LABEL_STUDIO_BASE_DATA_DIR=str(data_dir),
        DEBUG="false",
        LOG_LEVEL="WARNING",
        SECRET_KEY=secrets.token_urlsafe(40),
        PYTHONUNBUFFERED="1",
    )
    return env


def label_studio_up(args: argparse.Namespace, work: Path, token: str) -> tuple[Server, str]:
    """Start Label Studio on its own database (created, migrated and given a user with a legacy API token by
    `label-studio start` on its first run), then, for --label-studio-server gunicorn, restart its WSGI app
    under gunicorn with our settings."""
    py = str(args.label_studio_python)
    data_dir = work / "ls-data"
    data_dir.mkdir(exist_ok=True)
    env = label_studio_env(args, data_dir)
    port = free_port()
    url = f"http://{HOST}:{port}"
    start = Server(
        "label-studio start",
        [str(Path(py).parent / "label-studio"), "start", "--no-browser", "--internal-host", HOST, "--port", str(port),
         "--username", "bench@example.com", "--password", "bench-password-1", "--user-token", token,
         "--enable-legacy-api-token", "--log-level", "WARNING"],
        env=env,
        log=work / "label-studio-start.log",
    )  # fmt: skip
    start.wait(f"{url}/health", timeout=1800)  # the first run migrates a fresh database: minutes
    if args.label_studio_server == "start":
        return start, url
    start.stop()
    # gunicorn is pure Python: this venv's copy goes on Label Studio's path through a folder holding only it.
    shim = work / "gunicorn-shim"
    shim.mkdir(exist_ok=True)
    import gunicorn

    link = shim / "gunicorn"
    if not link.exists():
        link.symlink_to(Path(gunicorn.__file__).parent)
    ls_path = subprocess.run(
        [py, "-c", "import label_studio, os; print(os.path.dirname(label_studio.__file__))"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    env = {**env, "PYTHONPATH": f"{shim}{os.pathsep}{ls_path}",
           "DJANGO_SETTINGS_MODULE": "label_studio.core.settings.label_studio"}  # fmt: skip
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = Server(
        "label-studio (gunicorn)",
        [py, "-m", "gunicorn", "label_studio.core.wsgi:application", *gunicorn_flags(f"{HOST}:{port}")],
        env=env,
        log=work / "label-studio-gunicorn.log",
    )
    server.wait(f"{url}/health", timeout=300)
    return server, url


def label_studio_tasks(
    url: str, token: str, levels: list[tuple[int, int]]
) -> list[list[tuple[str, list[tuple[str, dict[str, Any]]]]]]:
    """A project with the pairwise config and one task per answer, imported through its API."""
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=url, timeout=300, headers=headers) as c:
        r = c.post("/api/projects/", json={"title": f"peer {secrets.token_hex(3)}", "label_config": PAIRWISE_CONFIG})
        r.raise_for_status()
        project = r.json()["id"]
        total = sum(clients * answers for clients, answers in levels)
        tasks = [{"data": {"left": f"left summary {n} " * 8, "right": f"right summary {n} " * 8}} for n in range(total)]
        c.post(f"/api/projects/{project}/import", json=tasks).raise_for_status()
        ids: list[int] = []
        page = 1
        while len(ids) < total:
            r = c.get("/api/tasks/", params={"project": project, "page": page, "page_size": 1000, "fields": "all"})
            r.raise_for_status()
            body = r.json()
            batch = body["tasks"] if isinstance(body, dict) else body
            if not batch:
                break
            ids += [t["id"] for t in batch]
            page += 1
    if len(ids) < total:
        raise RuntimeError(f"Label Studio listed {len(ids)} of {total} imported tasks")
    body = {"result": PAIRWISE_RESULT, "lead_time": 1.0}
    work = []
    it = iter(sorted(ids))
    for clients, answers in levels:
        work.append(
            [(token, [(f"/api/tasks/{next(it)}/annotations/", body) for _ in range(answers)]) for _ in range(clients)]
        )
    return work


# --- the run ----------------------------------------------------------------------------------------


def main() -> int:
    args = parse_args()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    servers: list[Server] = []
    try:
        return run(args, work, servers)
    finally:
        for server in servers:
            server.stop()
        if args.keep_logs:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path, servers: list[Server]) -> int:
    levels = [(c, per_level(args, c)) for c in args.clients]
    load_before = os.getloadavg()
    print(f"load average {load_before[0]:.1f} on {os.cpu_count()} cores at the start")
    port = free_port()
    env = production_env(
        database_url=f"{args.postgres}/{args.db_name}",
        broker_url="redis://127.0.0.1:1/0",  # answers enqueue nothing; no broker is needed
        work=work,
        ALLOWED_HOSTS=HOST,
        SECURE_SSL_REDIRECT="false",
        SESSION_COOKIE_SECURE="false",
        CSRF_COOKIE_SECURE="false",
        SECURE_HSTS_SECONDS="0",
        STATIC_ROOT=str(work / "static"),
        GUNICORN_BIND=f"{HOST}:{port}",
    )
    use_in_this_process(env, ("ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "STATIC_ROOT"))
    recreate_database(f"{args.postgres}/postgres", args.db_name)
    manage(env, "migrate", "--noinput")
    import django

    sys.path.insert(0, str(REPO))
    django.setup()
    t0 = time.monotonic()
    ours_work = our_matches(levels)
    print(f"our side: {sum(c * a for c, a in levels)} pending matches ready in {time.monotonic() - t0:.1f}s")

    theirs_work = None
    ls_note = "not measured (no --label-studio-python)"
    ls_url, token = "", ""
    if args.label_studio_python is not None:
        if args.fresh_label_studio:
            recreate_database(f"{args.postgres}/postgres", args.ls_db_name)
        else:
            with contextlib.suppress(Exception):
                create_database_if_missing(f"{args.postgres}/postgres", args.ls_db_name)
        token = LS_TOKEN
        t0 = time.monotonic()
        ls_server, ls_url = label_studio_up(args, work, token)
        servers.append(ls_server)
        version = subprocess.run(
            [str(args.label_studio_python), "-c", "import label_studio; print(label_studio.__version__)"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        ls_note = f"Label Studio {version} ({args.label_studio_server}), up in {time.monotonic() - t0:.0f}s"
        theirs_work = label_studio_tasks(ls_url, token, levels)
        print(f"{ls_note}; {sum(c * a for c, a in levels)} pairwise tasks imported")

    ours = Server(
        "gunicorn (ours)",
        [str(VENV_BIN / "gunicorn"), "config.wsgi", "-c", str(REPO / "platform" / "gunicorn.conf.py")],
        env=env,
        log=work / "gunicorn.log",
    )
    servers.append(ours)
    our_url = f"http://{HOST}:{port}"
    ours.wait(f"{our_url}/healthz/", timeout=120)

    if theirs_work is not None:
        warm_up(ls_url, LS_GET, token)
    warm_up(our_url, OUR_GET, ours_work[0][0][0])
    rows = []
    failed = False
    for n, (clients, answers) in enumerate(levels):
        # Label Studio first at each level, then ours, with the other server idle.
        theirs = hammer(ls_url, theirs_work[n], path=LS_GET) if theirs_work is not None else None
        mine = hammer(our_url, ours_work[n], path=OUR_GET)
        rows.append((clients, answers, mine, theirs))
        for side, result in (("ours", mine), ("Label Studio", theirs)):
            if result and result["bad"]:
                failed = True
                print(f"{side} at {clients} clients: {len(result['bad'])} failed answers, first: {result['bad'][:3]}")
    load_after = os.getloadavg()
    print()
    print(f"answers per second, same client (httpx, one keep-alive connection per client thread); {ls_note}")
    header = f"{'clients':>7} {'answers':>7} | {'ours req/s':>10} {'p50':>6} {'p95':>6} | {'LS req/s':>8} {'p50':>6} {'p95':>6} | {'ratio':>6} {'target':>7}"
    print(header)
    print("-" * len(header))
    met = True
    for clients, answers, mine, theirs in rows:
        if theirs is None:
            print(
                f"{clients:>7} {clients * answers:>7} | {mine['rps']:>10.1f} {mine['p50']:>6.1f} {mine['p95']:>6.1f} | {'-':>8} {'-':>6} {'-':>6} | {'-':>6}"
            )
            continue
        ratio = mine["rps"] / theirs["rps"]
        met = met and ratio >= args.target
        print(
            f"{clients:>7} {clients * answers:>7} | {mine['rps']:>10.1f} {mine['p50']:>6.1f} {mine['p95']:>6.1f} | "
            f"{theirs['rps']:>8.1f} {theirs['p50']:>6.1f} {theirs['p95']:>6.1f} | {ratio:>5.1f}x {'>= ' + str(args.target) + 'x':>7} "
            f"{'PASS' if ratio >= args.target else 'FAIL'}"
        )
    print(
        f"load average (1 min) {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end, on {os.cpu_count()} cores"
    )
    if failed:
        return 1
    return 0 if met else 2


def create_database_if_missing(server_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    sys.exit(main())
