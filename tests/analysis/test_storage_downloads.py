"""A finished job's file asked for while the research storage fails (docs/deploy.md, "When the store fails"): the
store stopped, or refusing the key. The research page and the API answer 503 with a reason naming the setting to
look at, never a 500, botocore's message or the store's address; once the store is back the file downloads."""

from __future__ import annotations

from collections.abc import Iterator
from html import unescape

import pytest
from django.test import Client

from analysis.models import ResearchJob
from tests.annotation.factories import StudyFactory
from tests.faults import actions
from tests.support.s3_standin import S3StandIn, bucket_client, s3_standin, use_s3

pytestmark = pytest.mark.django_db
BUCKET = "downloads"
CSV = b"match_id,winner\n1,left\n"


@pytest.fixture
def store() -> Iterator[S3StandIn]:
    with s3_standin(bucket=BUCKET) as s3:
        yield s3


@pytest.fixture
def done(settings, store: S3StandIn) -> tuple[ResearchJob, Client]:
    """A finished export whose file is in the bucket, and a researcher of its study."""
    use_s3(settings, store.endpoint, bucket=BUCKET, prefix="site")
    study = StudyFactory(slug="downloads")
    job = ResearchJob.objects.create(study=study, kind="export", status="done", files=["comparisons.csv"])
    bucket_client(store.endpoint).put_object(Bucket=BUCKET, Key=f"site/research/job-{job.pk}/comparisons.csv", Body=CSV)
    client = Client(raise_request_exception=False)
    client.force_login(actions.researcher(study))
    return job, client


def fetched(client: Client, job: ResearchJob, path: str) -> tuple[int, str]:
    response = client.get(f"{path}{job.pk}/files/comparisons.csv")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, unescape(body.decode())


@pytest.mark.parametrize("path", ["/research/jobs/", "/api/v1/research/jobs/"], ids=["page", "api"])
def test_a_download_while_the_store_is_down_or_refuses_the_key_is_a_503_with_the_reason(
    done: tuple[ResearchJob, Client], store: S3StandIn, path: str
) -> None:
    job, client = done
    store.stop()
    status, text = fetched(client, job, path)
    assert status == 503
    assert "The research storage could not be reached (the connection was refused or dropped)" in text
    assert "AWS_S3_ENDPOINT_URL" in text and store.endpoint.removeprefix("http://") not in text

    store.start()
    store.check_keys()  # every key is unknown to it now
    status, text = fetched(client, job, path)
    assert status == 503
    assert f"refused these credentials access to the bucket '{BUCKET}'" in text
    assert "then download the file again" in text and store.endpoint.removeprefix("http://") not in text

    store.check_keys(on=False)
    assert fetched(client, job, path) == (200, CSV.decode())
