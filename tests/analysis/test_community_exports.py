"""The Hugging Face datasets folder and the Croissant metadata: read back by ``datasets`` and checked."""

from __future__ import annotations

import hashlib
import io
import json

import pandas as pd
import pytest
import yaml
from django.core.management import call_command

from analysis.community_exports import export_community
from analysis.importers import judgments_table
from analysis.models import ResearchJob
from analysis.selectors import analysis_frame

datasets = pytest.importorskip("datasets")


def read_card(path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


@pytest.mark.django_db
def test_study_export_loads_with_datasets_and_matches_the_database(played_study, tmp_path):
    call_command("export_comparisons", study="played", out=tmp_path, formats="csv", hf=True, stdout=io.StringIO())
    # A cache of this test's own: the shared one (~/.cache/huggingface) once gave a folder named "hf" of an earlier
    # run back instead of this one's export (another study's annotator codes).
    loaded = datasets.load_dataset(str(tmp_path / "hf"), split="train", cache_dir=str(tmp_path / "cache")).to_pandas()
    frame, _ = analysis_frame(study=played_study, exclude=None)
    assert len(loaded) == len(frame) > 0
    key = ["annotator", "query_id", "match"]
    ours = frame[[*key, "left_system", "right_system", "choice"]].astype(str).sort_values(key).reset_index(drop=True)
    theirs = loaded[[*key, "left_system", "right_system", "choice"]].astype(str).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    card = read_card(tmp_path / "hf" / "README.md")
    assert card["configs"][0]["data_files"][0] == {"split": "train", "path": "data/train.parquet"}
    assert card["license"] == "other"
    assert {f["name"] for f in card["dataset_info"]["features"]} == set(loaded.columns)
    assert "@misc{" in (tmp_path / "hf" / "README.md").read_text()


def test_croissant_metadata_describes_the_parquet_file(tmp_path):
    records = [
        {"item": "d1", "annotator": "a1", "systems": "A|B|C", "best": "A", "worst": "C"},
        {"item": "d1", "annotator": "a2", "systems": "A|B|C", "best": "B", "worst": "A"},
    ]
    table = judgments_table(records, kind="best-worst").table
    export_community(table, tmp_path, study="bw")
    meta = json.loads((tmp_path / "croissant.json").read_text())
    assert meta["@type"] == "sc:Dataset"
    assert meta["@context"]["cr"] == "http://mlcommons.org/croissant/"
    assert meta["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    (file_object,) = meta["distribution"]
    assert file_object["@type"] == "cr:FileObject"
    parquet = tmp_path / file_object["contentUrl"]
    assert file_object["sha256"] == hashlib.sha256(parquet.read_bytes()).hexdigest()
    (record_set,) = meta["recordSet"]
    types = {f["name"]: f["dataType"] for f in record_set["field"]}
    assert list(types) == list(pd.read_parquet(parquet).columns)
    assert types["annotator"] == "sc:Text"
    assert types["placement_recorded"] == "sc:Boolean"
    assert types["source_row"] == "sc:Integer"
    assert all(f["source"]["fileObject"]["@id"] == file_object["@id"] for f in record_set["field"])
    assert all(f["source"]["extract"]["column"] == f["name"] for f in record_set["field"])
    loaded = datasets.load_dataset(str(tmp_path), split="train")
    assert loaded.num_rows == 6


@pytest.mark.django_db
def test_the_research_page_and_api_offer_the_hugging_face_dataset(
    played_study, researcher_client, django_capture_on_commit_callbacks, tmp_path
):
    page = researcher_client.get(f"/research/studies/{played_study.slug}/").content.decode()
    assert 'name="format" value="hf"' in page and "Hugging Face dataset" in page
    with django_capture_on_commit_callbacks(execute=True):
        posted = researcher_client.post(
            f"/research/studies/{played_study.slug}/jobs/", {"kind": "export", "format": "hf"}
        )
    assert posted.status_code == 302 and "error" not in posted["Location"]
    job = ResearchJob.objects.get()
    assert job.status == ResearchJob.Status.DONE, job.error
    assert {"data/train.parquet", "README.md", "croissant.json"} <= set(job.files)
    # Downloaded file by file as the page links them, the folder is a dataset `datasets` loads.
    for name in ("data/train.parquet", "README.md", "croissant.json"):
        response = researcher_client.get(f"/research/jobs/{job.pk}/files/{name}")
        assert response.status_code == 200
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"".join(response.streaming_content))
    loaded = datasets.load_dataset(str(tmp_path), split="train").to_pandas()
    frame, _ = analysis_frame(study=played_study, exclude=None)
    assert len(loaded) == len(frame) == job.manifest["rows"] > 0
    assert read_card(tmp_path / "README.md")["dataset_info"]["splits"][0]["num_examples"] == len(frame)

    # The research API: the same option; the summary table has no dataset form (a 400 naming the field).
    url = f"/api/v1/research/studies/{played_study.slug}/jobs/"
    with django_capture_on_commit_callbacks(execute=True):
        started = researcher_client.post(
            url, {"kind": "export", "options": {"format": "hf"}}, content_type="application/json"
        )
    assert started.status_code in (201, 202), started.content
    assert ResearchJob.objects.get(pk=started.json()["id"]).files == job.files
    refused = researcher_client.post(
        url, {"kind": "export", "options": {"format": "hf", "table": "summaries"}}, content_type="application/json"
    )
    assert refused.status_code == 400 and "format" in refused.json()["extra"]["fields"]
