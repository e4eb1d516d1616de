"""The research storage holds only what jobs list: a rerun's leftovers, a deleted job's files and a failed
attempt's uploads are deleted (in a local folder and in an S3 bucket, moto in server mode)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import connection
from django.test import override_settings

from analysis import services
from analysis.models import ResearchJob
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.integration.test_object_storage import _web_storages, s3  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["folder", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path) -> Iterator[Any]:
    if request.param == "folder":
        with override_settings(MEDIA_ROOT=str(tmp_path)):
            yield storages["research"]
    else:
        env = request.getfixturevalue("s3")
        with override_settings(STORAGES=_web_storages(env)):
            bucket = storages["research"]
            # moto keeps its buckets in this process across servers: start from an empty one.
            for key in services.stored_keys(bucket, "research"):
                bucket.delete(key)
            yield bucket


@pytest.fixture
def study() -> Study:
    study = StudyFactory(slug="kept")
    participation = join(study)
    query = query_submit(participation=participation, text="Does sleep affect memory?", client_token="")
    rng = random.Random(3)
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice=rng.choice(["left", "right"]), by=participation)
    return study


def _job(study: Study, status: str = ResearchJob.Status.QUEUED) -> ResearchJob:
    return ResearchJob.objects.create(
        study=study, kind=ResearchJob.Kind.EXPORT, options={"format": "csv", "include_texts": False}, status=status
    )


def _keys(storage: Any, job: ResearchJob) -> set[str]:
    return set(services.stored_keys(storage, f"research/job-{job.pk}"))


def test_a_rerun_replaces_what_an_earlier_attempt_left(storage: Any, study: Study) -> None:
    job = _job(study)
    storage.save(services.job_file_key(job.pk, "from-attempt-1.csv"), ContentFile(b"old"))
    job = services.research_job_run(job_id=job.pk)
    assert job.status == ResearchJob.Status.DONE and job.files
    assert _keys(storage, job) == {services.job_file_key(job.pk, name) for name in job.files}


def test_the_sweeper_deletes_files_no_job_lists(storage: Any, study: Study) -> None:
    done = services.research_job_run(job_id=_job(study).pk)
    deleted = services.research_job_run(job_id=_job(study).pk)
    failed, running = _job(study, ResearchJob.Status.FAILED), _job(study, ResearchJob.Status.RUNNING)
    storage.save(services.job_file_key(failed.pk, "half.csv"), ContentFile(b"half"))
    storage.save(services.job_file_key(running.pk, "uploading.csv"), ContentFile(b"part"))
    gone = _keys(storage, deleted)
    deleted.delete()  # as the admin deletes a job (or its study)

    assert services.research_storage_sweep() == {"research_files_deleted": len(gone) + 1}
    assert _keys(storage, done) == {services.job_file_key(done.pk, name) for name in done.files}
    assert not services.stored_keys(storage, f"research/job-{deleted.pk}")
    assert not _keys(storage, failed)
    assert _keys(storage, running) == {services.job_file_key(running.pk, "uploading.csv")}
    # The researcher still downloads the kept job's files; a second sweep finds nothing to do.
    assert storage.open(services.job_file_key(done.pk, done.files[0])).read()
    assert services.research_storage_sweep() == {"research_files_deleted": 0}


def test_a_job_that_finishes_while_the_sweeper_reads_the_jobs_keeps_its_files(storage: Any, study: Study) -> None:
    # The worker uploads, then marks the job done with its files: here it commits that mark just after the
    # sweeper's first read of the jobs, the moment the sweeper once read them a second time.
    running = _job(study, ResearchJob.Status.RUNNING)
    key = services.job_file_key(running.pk, "comparisons.csv")
    storage.save(key, ContentFile(b"rows"))
    finished: list[bool] = []

    def worker_finishes_after_the_first_read(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if not finished and sql.startswith("SELECT") and '"analysis_researchjob"' in sql:
            finished.append(True)
            ResearchJob.objects.filter(pk=running.pk).update(status=ResearchJob.Status.DONE, files=["comparisons.csv"])
        return result

    with connection.execute_wrapper(worker_finishes_after_the_first_read):
        services.research_storage_sweep()
    assert finished and ResearchJob.objects.get(pk=running.pk).status == ResearchJob.Status.DONE
    assert _keys(storage, running) == {key}, "the finished job's file was deleted"
    assert storage.open(key).read() == b"rows"
    # Once settled, the next sweep keeps it too.
    assert services.research_storage_sweep() == {"research_files_deleted": 0}
