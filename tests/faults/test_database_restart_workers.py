"""A PostgreSQL restart under real Celery workers: the workers, gunicorn and `manage.py` all on a PostgreSQL server
of the test's own (tests/support/site.py), a redis-server of its own as the broker, and a model stand-in that
holds its answers until the database is gone, so that work finishes while the database is away. A thread sends
the sweepers every 2 s, as the deployment's beat does.

What the field test (issue 30) lost to a PostgreSQL restart: a scoring chunk's judged scores (the chunk's store
failed and the chunk began again, asking the judges everything again: 1,457 judge calls, 0 chunks counted), and
10 summaries failed for good ("couldn't get a connection after 5.00 sec")."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kernel.tasks import task_signature
from tests.faults.test_database_blip import Annotator
from tests.integration.worker import CeleryWorker, celery_app_sending_to, flush_broker
from tests.support.openai_standin import openai_standin
from tests.support.redis_server import RedisServer
from tests.support.site import BIN, REPO, Site

pytestmark = [pytest.mark.worker, pytest.mark.timeout(300)]

JUDGE_METRICS = ["geval_relevance", "geval_coherence", "geval_consistency", "geval_fluency"]
SWEEPERS = ("annotation.tasks.sweep_generation", "scoring.tasks.sweep_scoring_runs")


@contextmanager
def beat(url: str, *, every: float = 2.0) -> Iterator[None]:
    """The beat's part: the sweepers sent to the broker at `url` every `every` seconds while the block runs."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            for name in SWEEPERS:
                try:
                    task_signature(name).apply_async()
                except Exception:  # noqa: BLE001, S112 - the broker is the test's own and up; a lost tick is skipped
                    continue

    with celery_app_sending_to(url):
        for name in SWEEPERS:
            task_signature(name)  # registered here, not in the thread
        thread = threading.Thread(target=run, name="beat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)


def worker(site: Site, redis: RedisServer, folder: Path, *, queues: list[str], pool: str, **env: str) -> CeleryWorker:
    return CeleryWorker(
        database_url=site.cluster.url,
        broker=redis.url,
        log_dir=folder,
        name=queues[0],
        queues=queues,
        pool=pool,
        concurrency=8 if pool == "threads" else 1,
        extra_env={"LLM_CACHE": "off", "JUDGE_CACHE_DIR": str(folder / "judge-cache"), **env},
    )


def wait_until(predicate: Any, *, timeout: float, what: str, logs: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"{what} not within {timeout:g} s\n{logs() if logs else ''}")


@pytest.mark.parametrize(
    ("back_before_the_store", "database_pool"),
    [(False, "true"), (True, "true"), (True, "false")],
    ids=["store-while-down", "store-after-restart", "store-after-restart-connection-per-thread"],
)
def test_a_scoring_chunk_keeps_its_judged_scores_across_a_database_restart(
    own_site: Site, own_redis: RedisServer, tmp_path: Path, back_before_the_store: bool, database_pool: str
) -> None:
    """A chunk of 4 LLM-judge metrics waits on the judge while PostgreSQL stops; the judge answers while the
    database is down (or once it is back). The run ends done, each (candidate, metric) scored once, and the judge
    was asked each question once: nothing it answered was asked again."""
    site = own_site
    site.start_server()  # eager: each question's four summaries are written inside the request
    for _ in range(2):  # one open question per annotator
        assert Annotator(site).ask(uuid.uuid4().hex).status_code == 201
    site.stop_server()

    answered_before_the_fault = 6
    release = threading.Event()
    lock = threading.Lock()
    calls: list[dict[str, Any]] = []

    def judge(body: dict[str, Any]) -> str:
        """A rating of 4 for every question; from the 7th on, only once the test releases it."""
        with lock:
            calls.append(body)
            held = len(calls) > answered_before_the_fault
        if held:
            release.wait(120)
        return "4"

    flush_broker(own_redis.url)
    research = worker(site, own_redis, tmp_path, queues=["research"], pool="prefork", DATABASE_POOL=database_pool)
    with openai_standin(judge, hang_s=120) as server, beat(own_redis.url):
        research.start()
        try:
            env = {**site.env, "CELERY_TASK_ALWAYS_EAGER": "false", "CELERY_BROKER_URL": own_redis.url}
            started = subprocess.run(
                [str(BIN / "python"), "manage.py", "score_study", "--study", "demo", "--metrics",
                 ",".join(JUDGE_METRICS), "--judge-model", "standin-model", "--judge-base-url", server.base_url,
                 "--judge-name", "judge"],
                cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
            assert "Queued scoring run" in started.stdout, started.stdout + started.stderr
            run_id, total = map(
                int, site.cluster.psql("SELECT id, total FROM scoring_scoringrun ORDER BY id DESC LIMIT 1").split()
            )
            assert total >= 8  # this test's two questions' summaries, and those of the session's other tests
            # The judge has answered some and holds the next ones: the chunk waits on it.
            wait_until(
                lambda: len(calls) > answered_before_the_fault + 1, timeout=90, what="the judge's calls",
                logs=research.log,
            )  # fmt: skip
            site.cluster.stop()
            if back_before_the_store:
                time.sleep(2)
                site.cluster.start()
                release.set()
            else:
                release.set()
                time.sleep(4)  # the judge answers everything, and the chunk has its scores to store meanwhile
                site.cluster.start()

            def run_state() -> tuple[str, int] | None:
                try:
                    found = site.cluster.psql(f"SELECT status, done FROM scoring_scoringrun WHERE id = {run_id}")  # noqa: S608
                    status, done = found.split()
                except Exception:  # noqa: BLE001 - the server is still starting
                    return None
                return (status, int(done)) if status != "running" else None

            ended = wait_until(run_state, timeout=120, what="the scoring run's end", logs=research.log)
        finally:
            research.stop()
    assert ended == ("done", total), research.log()[-4000:]
    since = f"(SELECT created_at FROM scoring_scoringrun WHERE id = {run_id})"  # noqa: S608 - an id read from the database
    scores = site.cluster.psql(
        "SELECT count(*), count(DISTINCT (candidate_id, metric)), count(value) FROM scoring_candidatescore"  # noqa: S608
        f" WHERE judge_server = 'judge' AND computed_at >= {since}"
    )
    assert scores.split() == [str(total * len(JUDGE_METRICS))] * 3
    # Every question the judge answered was asked once: the chunk did not begin again after the restart.
    assert len(calls) == total * len(JUDGE_METRICS), f"{len(calls)} judge calls for {total} x {len(JUDGE_METRICS)}"


@contextmanager
def systems_on(site: Site, base_url: str) -> Iterator[None]:
    """The seeded demo study's four systems on the OpenAI stand-in at `base_url` (the client's own retries off, so
    every fault costs a task attempt) while the block runs; as seeded afterwards, for the session's other tests."""
    demo = "study_id = (SELECT id FROM annotation_study WHERE slug = 'demo')"
    seeded = json.loads(
        site.cluster.psql(
            "SELECT json_agg(json_build_object('id', id, 'backend', generation_backend, 'settings', backend_settings))"  # noqa: S608
            f" FROM annotation_studysystem WHERE {demo}"
        )
    )
    settings = json.dumps({"base_url": base_url, "max_retries": 0, "timeout": 30, "use_cache": False})
    site.cluster.psql(
        f"UPDATE annotation_studysystem SET generation_backend = 'openai', backend_settings = '{settings}' WHERE {demo}"  # noqa: S608
    )
    try:
        yield
    finally:
        for system in seeded:
            site.cluster.psql(
                f"UPDATE annotation_studysystem SET generation_backend = '{system['backend']}',"  # noqa: S608 - the seed's own
                f" backend_settings = '{json.dumps(system['settings'])}' WHERE id = {int(system['id'])}"
            )


def test_summaries_whose_database_went_away_as_the_model_answered_end_done(
    own_site: Site, own_redis: RedisServer, tmp_path: Path
) -> None:
    """A question's four summaries are at the model (a threads-pool annotator worker, as deployed) when PostgreSQL
    stops; the model answers while the database is down, for about 4 s, longer than a pooled connection is
    waited for (DATABASE_POOL_TIMEOUT_S, 5 s, from the first failed connection attempt: the pool tries again
    after 1, 2, 4 s). Each summary's store fails; the task sends it again (kernel.tasks.unreachable_service), and
    once the database is back every summary ends done and the question reaches its first comparison. Before,
    Django's OperationalError was not retried: the failure was stored as soon as the database answered again,
    "couldn't get a connection after 5.00 sec" (10 summaries in the field test)."""
    site = own_site
    release = threading.Event()
    flush_broker(own_redis.url)
    annotators = worker(site, own_redis, tmp_path, queues=["annotator", "retrieval"], pool="threads")
    with openai_standin(hold=release, hang_s=90) as server, systems_on(site, server.base_url), beat(own_redis.url):
        annotators.start()
        try:
            site.start_server(CELERY_TASK_ALWAYS_EAGER="false", CELERY_BROKER_URL=own_redis.url)
            annotator = Annotator(site)
            asked = annotator.ask(uuid.uuid4().hex)
            assert asked.status_code == 201, asked.text
            query_id = int(asked.json()["id"])
            wait_until(
                lambda: server.completions >= 4, timeout=90, what="four summaries at the model", logs=annotators.log
            )
            site.cluster.stop()
            release.set()  # the model answers; the database is down
            time.sleep(3.5)
            site.cluster.start()
            site.wait_for_database()
            statuses = (
                f"SELECT string_agg(status, ',' ORDER BY id) FROM annotation_candidate WHERE query_id = {query_id}"  # noqa: S608
            )

            def settled() -> str | None:
                found = site.cluster.psql(statuses)
                return found if "failed" in found or set(found.split(",")) == {"done"} else None

            ended = wait_until(settled, timeout=120, what="the summaries' end", logs=annotators.log)
            assert ended == "done,done,done,done", annotators.log()[-6000:]
            first = wait_until(
                lambda: (r := annotator.api.get(f"/api/v1/queries/{query_id}/current-match/")).status_code == 200 and r,
                timeout=60,
                what="the first comparison",
            )
            assert first.json()["id"]
        finally:
            site.stop_server()
            annotators.stop()
