"""The S3 research storage in a deployment (docs/deploy.md, "Object storage"): a prefix per deployment keeps two
deployments sharing a bucket from deleting each other's files; presigned downloads are signed for the address
browsers use; `check --deploy` finds a missing bucket, a shared top level and an internal download address."""

from __future__ import annotations

import io
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from analysis.services import research_storage_sweep
from tests.support import s3_standin
from tests.support.s3_standin import bucket_client, s3_server

pytestmark = pytest.mark.django_db
BUCKET = "shared-research"


@pytest.fixture
def endpoint() -> Iterator[str]:
    with s3_server() as url:
        bucket_client(url).create_bucket(Bucket=BUCKET)
        yield url


def use_s3(settings, endpoint: str, *, prefix: str = "", public: str | None = None, bucket: str = BUCKET) -> None:
    s3_standin.use_s3(settings, endpoint, bucket=bucket, prefix=prefix, public=public)


def keys(endpoint: str) -> set[str]:
    listed = bucket_client(endpoint).list_objects_v2(Bucket=BUCKET)
    return {item["Key"] for item in listed.get("Contents", [])}


def test_a_prefix_keeps_another_deployments_files_from_its_sweep(settings, endpoint):
    # Deployment "east" wrote job 1's file; this deployment ("west") has no job 1 and sweeps hourly.
    use_s3(settings, endpoint, prefix="east")
    storages["research"].save("research/job-1/comparisons.csv", ContentFile(b"east's export\n"))
    use_s3(settings, endpoint, prefix="west")
    storages["research"].save("research/job-1/comparisons.csv", ContentFile(b"west's stray file\n"))
    assert research_storage_sweep()["research_files_deleted"] == 1  # its own stray file, no job lists it
    assert keys(endpoint) == {"east/research/job-1/comparisons.csv"}


def test_a_presigned_download_is_signed_for_the_public_address(settings, endpoint):
    public = endpoint.replace("127.0.0.1", "localhost")
    use_s3(settings, endpoint, prefix="east", public=public)
    storage = storages["research"]
    storage.save("research/job-2/report.html", ContentFile(b"<p>report</p>"))
    url = storage.url("research/job-2/report.html")
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == public and parts.path == f"/{BUCKET}/east/research/job-2/report.html"
    assert "Signature=" in url
    assert requests.get(url, timeout=10).content == b"<p>report</p>"


def check_deploy() -> str:
    out = io.StringIO()
    try:
        call_command("check", "--deploy", stdout=out, stderr=out)
    except SystemCheckError as error:
        return out.getvalue() + str(error)
    return out.getvalue()


def test_check_deploy_finds_a_missing_bucket_and_a_shared_top_level(settings, endpoint):
    use_s3(settings, endpoint, bucket="no-such-bucket", prefix="east")
    report = check_deploy()
    assert "satisfy.E003" in report and "'no-such-bucket' cannot be written" in report
    use_s3(settings, endpoint, prefix="")
    report = check_deploy()
    assert "satisfy.E003" not in report and "satisfy.W004" in report
    settings.RESEARCH_DOWNLOAD_REDIRECT = True
    assert "satisfy.W005" in check_deploy()
    use_s3(settings, endpoint, prefix="east", public=endpoint.replace("127.0.0.1", "localhost"))
    report = check_deploy()
    assert not [code for code in ("satisfy.E003", "satisfy.W004", "satisfy.W005") if code in report], report
    assert not any(key.startswith("east/research/.deploy-check") for key in keys(endpoint))  # the probe is gone
