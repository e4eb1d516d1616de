"""Research outputs through S3-compatible object storage: a worker with its own MEDIA_ROOT writes an export,
the web side (another MEDIA_ROOT: no shared disk) serves it from the bucket. The bucket is moto in server
mode, a local process speaking the real S3 protocol over HTTP."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client, override_settings

from analysis import services
from analysis.models import ResearchJob
from annotation.models import Judgment
from studies.models import Study, StudyMembership
from tests.annotation.factories import played_study
from tests.integration.worker import CeleryWorker, WorkerPool, wait_for
from tests.support.s3_standin import bucket_client, s3_server

BUCKET = "satisfy-research"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_S3_REGION_NAME": "us-east-1"}


@pytest.fixture
def s3() -> Iterator[dict[str, str]]:
    """A moto S3 server with an empty bucket; yields the settings' environment for it."""
    with s3_server() as endpoint:
        bucket_client(endpoint).create_bucket(Bucket=BUCKET)
        yield {
            **CREDENTIALS,
            "RESEARCH_STORAGE": "s3",
            "AWS_STORAGE_BUCKET_NAME": BUCKET,
            "AWS_S3_ENDPOINT_URL": endpoint,
        }


def _bucket(env: dict[str, str]) -> Any:
    return bucket_client(env["AWS_S3_ENDPOINT_URL"])


def _web_storages(env: dict[str, str]) -> dict[str, Any]:
    return {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        "research": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": env["AWS_S3_ENDPOINT_URL"],
                "access_key": "testing",
                "secret_key": "testing",
                "region_name": "us-east-1",
                "file_overwrite": True,
            },
        },
    }


@pytest.fixture
def played(transactional_db: None) -> Study:
    """Three annotators, two questions each, answered through the services (eager Celery, offline backends)."""
    questions = ("Does sleep affect memory?", "Do vaccines protect older adults?")
    return played_study(slug="stored", title="Stored outputs", annotators=3, questions=questions, seed=11)


def _researcher(study: Study) -> Client:
    user = get_user_model().objects.create_user("s3-researcher", password="pw")
    user.groups.add(Group.objects.get_or_create(name="researchers")[0])
    StudyMembership.objects.create(study=study, user=user, role="researcher")
    client = Client()
    client.force_login(user)
    return client


def _worker(pool: WorkerPool, env: dict[str, str], media: Path) -> CeleryWorker:
    return pool.start("s3", extra_env={**env, "MEDIA_ROOT": str(media)})


def _export_done(study: Study, pool: WorkerPool) -> ResearchJob:
    job = services.research_job_start(study=study, kind="export", options={"format": "parquet"})
    return wait_for(
        lambda: ResearchJob.objects.filter(pk=job.pk, status__in=["done", "failed"]).first(),
        timeout=90,
        message=lambda: f"the export did not finish:\n{pool.logs()}",
    )


def test_an_export_written_by_a_worker_downloads_from_the_bucket(
    played: Study, s3: dict[str, str], celery_workers: WorkerPool, tmp_path: Path
) -> None:
    worker_media, web_media = tmp_path / "worker-media", tmp_path / "web-media"
    client = _researcher(played)
    _worker(celery_workers, s3, worker_media)
    with override_settings(STORAGES=_web_storages(s3), MEDIA_ROOT=str(web_media)):
        job = _export_done(played, celery_workers)
        assert job.status == ResearchJob.Status.DONE, job.error
        assert "comparisons.parquet" in job.files

        keys = {o["Key"] for o in _bucket(s3).list_objects_v2(Bucket=BUCKET)["Contents"]}
        assert {f"research/job-{job.pk}/{name}" for name in job.files} <= keys
        # Neither side kept the files on its disk: the worker's scratch folder is gone, the web side never had one.
        assert not any(p.is_file() for p in worker_media.rglob("*"))
        assert not web_media.exists()

        page = client.get(f"/research/jobs/{job.pk}/files/comparisons.parquet")
        assert page.status_code == 200
        frame = pd.read_parquet(io.BytesIO(b"".join(page.streaming_content)))
        assert len(frame) == Judgment.objects.filter(match__bracket__query__participation__study=played).count()

        api = client.get(f"/api/v1/research/jobs/{job.pk}/files/comparisons.manifest.json")
        assert api.status_code == 200
        assert (
            b"".join(api.streaming_content)
            == _bucket(s3)
            .get_object(Bucket=BUCKET, Key=f"research/job-{job.pk}/comparisons.manifest.json")["Body"]
            .read()
        )

        # A presigned redirect instead of streaming: the URL alone fetches the same bytes from the bucket.
        with override_settings(RESEARCH_DOWNLOAD_REDIRECT=True):
            moved = client.get(f"/research/jobs/{job.pk}/files/comparisons.parquet")
        assert moved.status_code == 302 and moved["Location"].startswith(s3["AWS_S3_ENDPOINT_URL"])
        fetched = requests.get(moved["Location"], timeout=10)
        assert fetched.status_code == 200
        assert len(pd.read_parquet(io.BytesIO(fetched.content))) == len(frame)

        # The object is deleted from the bucket behind the platform's back: a 404 that says so, not a 500.
        _bucket(s3).delete_object(Bucket=BUCKET, Key=f"research/job-{job.pk}/comparisons.parquet")
        gone = client.get(f"/research/jobs/{job.pk}/files/comparisons.parquet")
        assert gone.status_code == 404
        assert b"no longer on the server (not in the research storage)" in gone.content
        gone_api = client.get(f"/api/v1/research/jobs/{job.pk}/files/comparisons.parquet")
        assert gone_api.status_code == 404
        assert "no longer on the server (not in the research storage)" in gone_api.json()["message"]
