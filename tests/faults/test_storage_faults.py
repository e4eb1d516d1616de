"""The research storage failing under a running research job, caused for real: a real Celery worker uploads an
export to a local S3 (moto in server mode) that is stopped mid-job, loses its bucket, refuses the worker's key,
throttles, or hangs (a TCP front that takes requests and never answers). What the researcher sees on the research
page and the API is asserted: a transient fault is tried again and said while it lasts, a permanent one is a reason
at once, a hang ends at the store's time-outs; no text shows the store's address or a credential."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from analysis.models import ResearchJob
from annotation.models import Judgment
from studies.models import Study
from tests.annotation.factories import played_study
from tests.faults import actions
from tests.faults.scenarios import lock_waiters, table_locked
from tests.integration.worker import CeleryWorker, WorkerPool, wait_for
from tests.support.s3_standin import S3StandIn, bucket_client, s3_standin, store_front, use_s3

pytestmark = [pytest.mark.worker, pytest.mark.timeout(300)]

BUCKET = "research-faults"
PREFIX = "faults"
# The worker's own credentials: moto takes any key until it is told to check them.
KEY_ID, SECRET = "AKIAFAULTSUITE0000042", "faults-suite-secret-never-shown"
TERMINAL = (ResearchJob.Status.DONE, ResearchJob.Status.FAILED)
QUESTION = "Does sleep affect memory?"


@pytest.fixture
def store() -> Iterator[S3StandIn]:
    with s3_standin(bucket=BUCKET) as s3:
        yield s3


@pytest.fixture
def answered(transactional_db: None) -> Study:
    """Two annotators, one question each, every match answered (eager Celery, offline backends)."""
    return played_study(slug="stored-faults", title="Storage faults", annotators=2, questions=[QUESTION], seed=5)


def s3_env(endpoint: str, **settings: str) -> dict[str, str]:
    return {
        "RESEARCH_STORAGE": "s3",
        "AWS_STORAGE_BUCKET_NAME": BUCKET,
        "AWS_S3_ENDPOINT_URL": endpoint,
        "RESEARCH_STORAGE_PREFIX": PREFIX,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_S3_REGION_NAME": "us-east-1",
        **settings,
    }


def start_worker(pool: WorkerPool, env: dict[str, str], media: Path) -> CeleryWorker:
    return pool.start("s3", extra_env={**env, "MEDIA_ROOT": str(media)})


def researcher(study: Study) -> Client:
    client = Client()
    client.force_login(actions.researcher(study))
    # Once before any fault: the page's first request in this process imports the statistics stack (seconds on a
    # busy machine), longer than the waits a test watches for.
    assert client.get(f"/research/studies/{study.slug}/").status_code == 200
    return client


def start_export(client: Client, study: Study) -> int:
    response = client.post(
        f"/api/v1/research/studies/{study.slug}/jobs/",
        {"kind": "export", "options": {"format": "csv"}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def seen(client: Client, study: Study, job_id: int) -> tuple[dict[str, Any], str]:
    """The job as the API gives it, and the study's research page as text."""
    api = client.get(f"/api/v1/research/jobs/{job_id}/")
    assert api.status_code == 200, api.content
    page = client.get(f"/research/studies/{study.slug}/")
    assert page.status_code == 200
    return api.json(), unescape(page.content.decode())


def hides_the_store(text: str, endpoint: str) -> None:
    """Nothing a researcher sees names the store's address (botocore's messages do) or a credential."""
    address = endpoint.removeprefix("http://")
    for secret in (address, endpoint, KEY_ID, SECRET, "http://"):
        assert secret not in text, f"{secret!r} shown to the researcher: {text[:500]}"


def ended(job_id: int, pool: WorkerPool, timeout: float) -> ResearchJob:
    return wait_for(
        lambda: ResearchJob.objects.filter(pk=job_id, status__in=TERMINAL).first(),
        timeout=timeout,
        message=lambda: f"job {job_id} did not end: {ResearchJob.objects.get(pk=job_id).__dict__}\n{pool.logs()}",
    )


def test_a_store_stopped_mid_job_is_waited_for_and_the_export_finishes_when_it_is_back(
    answered: Study, store: S3StandIn, celery_workers: WorkerPool, tmp_path: Path, settings: Any
) -> None:
    client = researcher(answered)
    start_worker(celery_workers, s3_env(store.endpoint, RESEARCH_STORAGE_RETRY_S="3"), tmp_path / "media")
    judgments = Judgment._meta.db_table
    with table_locked(judgments):  # the export waits at the comparisons while the store goes away
        job_id = start_export(client, answered)
        wait_for(lambda: lock_waiters(judgments), timeout=60, message=lambda: celery_workers.logs())
        assert client.get(f"/api/v1/research/jobs/{job_id}/").json()["status"] == "running"  # the page reads judgments
        store.stop()

    def waiting() -> tuple[dict[str, Any], str] | None:
        api, page = seen(client, answered, job_id)
        return (api, page) if api["stage"].startswith("try 1 of 3 failed") else None

    api, page = wait_for(waiting, timeout=60, message=lambda: celery_workers.logs())
    assert api["status"] == "running" and api["stage"] == "try 1 of 3 failed; trying again in 3 s"
    assert api["error"].startswith("The research storage could not be reached")
    assert "AWS_S3_ENDPOINT_URL" in api["error"]
    assert api["stage"] in page and api["error"] in page
    hides_the_store(str(api) + page, store.endpoint)

    store.start()
    job = ended(job_id, celery_workers, timeout=60)
    assert job.status == ResearchJob.Status.DONE, job.error
    assert job.attempts == 2 and job.error == ""
    listed = bucket_client(store.endpoint).list_objects_v2(Bucket=BUCKET)["Contents"]
    assert {f"{PREFIX}/research/job-{job_id}/{name}" for name in job.files} == {o["Key"] for o in listed}

    use_s3(settings, store.endpoint, bucket=BUCKET, prefix=PREFIX)  # the web side reads the same bucket
    download = client.get(f"/research/jobs/{job_id}/files/comparisons.csv")
    assert download.status_code == 200
    rows = b"".join(download.streaming_content).decode().strip().splitlines()
    assert len(rows) - 1 == Judgment.objects.filter(match__bracket__query__participation__study=answered).count()


def test_a_missing_bucket_and_a_refused_key_are_reasons_at_once_not_retried(
    answered: Study, store: S3StandIn, celery_workers: WorkerPool, tmp_path: Path
) -> None:
    client = researcher(answered)
    # A retry would wait a minute: a job that ends well before it was not retried.
    start_worker(celery_workers, s3_env(store.endpoint, RESEARCH_STORAGE_RETRY_S="60"), tmp_path / "media")
    bucket_client(store.endpoint).delete_bucket(Bucket=BUCKET)

    job = ended(start_export(client, answered), celery_workers, timeout=40)
    api, page = seen(client, answered, job.pk)
    assert api["status"] == "failed" and job.attempts == 1
    assert api["error"] == (
        f"The research storage has no bucket '{BUCKET}' (AWS_STORAGE_BUCKET_NAME). An administrator must create "
        "it, or set the name of the bucket to use (docs/deploy.md, 'Object storage'); then run the job again."
    )
    assert api["error"] in page
    hides_the_store(str(api) + page, store.endpoint)

    bucket_client(store.endpoint).create_bucket(Bucket=BUCKET)
    store.check_keys()  # the store now knows no key: the worker's is wrong
    job = ended(start_export(client, answered), celery_workers, timeout=40)
    api, page = seen(client, answered, job.pk)
    assert api["status"] == "failed" and job.attempts == 1
    assert "does not accept the access key in AWS_ACCESS_KEY_ID (InvalidAccessKeyId)" in api["error"]
    assert f"may write to the bucket '{BUCKET}'" in api["error"] and api["error"] in page
    hides_the_store(str(api) + page, store.endpoint)


def test_a_throttling_then_hanging_store_ends_the_job_at_its_time_outs_with_the_reason(
    answered: Study, store: S3StandIn, celery_workers: WorkerPool, tmp_path: Path
) -> None:
    client = researcher(answered)
    with store_front(store.port) as front:
        front.mode = "slowdown"
        env = s3_env(
            front.endpoint,
            AWS_S3_CONNECT_TIMEOUT_S="1",
            AWS_S3_READ_TIMEOUT_S="2",
            AWS_S3_MAX_ATTEMPTS="1",
            RESEARCH_STORAGE_RETRY_S="2",
        )
        start_worker(celery_workers, env, tmp_path / "media")
        job_id = start_export(client, answered)

        def stage(prefix: str) -> dict[str, Any] | None:
            api = seen(client, answered, job_id)[0]
            return api if api["stage"].startswith(prefix) else None

        api = wait_for(lambda: stage("try 1 of 3 failed"), timeout=60, message=lambda: celery_workers.logs())
        assert api["error"].startswith("The research storage answered with a temporary error (SlowDown, HTTP 503)")
        front.mode = "hang"  # from now on the store takes every request and never answers

        # While it hangs the researcher is told where the job waits, not the stage before it.
        api = wait_for(lambda: stage("uploading"), timeout=30, interval=0.05, message=lambda: celery_workers.logs())
        assert api["status"] == "running"
        assert re.fullmatch(r"uploading \d+ files? to the research storage", api["stage"]), api["stage"]

        job = ended(job_id, celery_workers, timeout=90)  # the store never answers: the time-outs end it
        api, page = seen(client, answered, job_id)
        assert front.accepted["hang"] >= 2
    assert api["status"] == "failed" and job.attempts == 3
    assert api["error"] == (
        "Gave up after 3 tries. The research storage did not answer within 2 s (AWS_S3_READ_TIMEOUT_S): if it goes "
        "on, an administrator should check that the store at AWS_S3_ENDPOINT_URL is running and that the servers "
        "reach it. Once it works again, run the job again."
    )
    assert api["error"] in page
    hides_the_store(str(api) + page, front.endpoint)
