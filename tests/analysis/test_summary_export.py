"""The summary table (manage.py export_summaries): one row per candidate of a study, saying how it was generated,
joining the comparison table on the candidate id, and flagging a summary cut off at max_tokens."""

from __future__ import annotations

import hashlib
import io
import json

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from analysis.exports import read_comparisons
from analysis.models import ResearchJob
from analysis.stats import table_checksum
from annotation.models import Candidate
from annotation.services.participation import participation_preview_start
from annotation.services.persona import persona_save
from studies.models import StudyMembership
from tests.annotation.factories import PERSONA, StudyFactory, ask_and_answer, join, served_study
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db

KEY_ENV = "SATISFY_TEST_SUMMARY_EXPORT_KEY"
SECRET = "sk-test-summary-export-0123456789"
MAX_TOKENS = 12
FITS = "Shift work disturbs sleep [1]."
# 48 words: the stand-in stops it after 12, as a server does at max_tokens, and says "length".
RUNS_ON = "Night shifts shorten sleep and raise the rate of medication errors [1] " * 4
QUESTIONS = [
    "How does night shift work affect nurses' sleep and patient safety?",
    "Do mRNA vaccines protect older adults against severe disease?",
    "How should we evaluate summaries written by large language models?",
]


@pytest.fixture
def study(django_capture_on_commit_callbacks, monkeypatch):
    """Two annotators' questions, each summarised by an extractive system and a served model with a
    12-token budget: the first question's served summary fits, the second's is cut off (finish "length"),
    and both are compared. A researcher's preview asks a third question, which is no data."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    replies = iter([FITS, RUNS_ON])
    with openai_standin(lambda body: next(replies, "A preview's summary [1]."), api_key=SECRET) as server:
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "use_cache": False, "max_tokens": MAX_TOKENS}
        study = served_study(settings, slug="summaries")
        for text in QUESTIONS[:2]:
            ask_and_answer(join(study), django_capture_on_commit_callbacks, text)
        researcher = get_user_model().objects.create_user(username="previewer")
        researcher.groups.add(Group.objects.get_or_create(name="researchers")[0])
        StudyMembership.objects.create(study=study, user=researcher, role="researcher")
        preview = participation_preview_start(study=study, by=researcher)
        persona_save(participation=preview, data=PERSONA)
        ask_and_answer(preview, django_capture_on_commit_callbacks, QUESTIONS[2])
        assert server.completions == 3
    return study


def _export(study, out, *extra):
    call_command("export_summaries", "--study", study.slug, "--out", str(out), *extra)
    return json.loads((out / "summaries.manifest.json").read_text())


def _read(path):
    if path.suffix == ".csv":
        return pd.read_csv(path)
    if path.suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    return pd.read_parquet(path)


def _data_candidates(study):
    return Candidate.objects.filter(query__participation__study=study).exclude(query__participation__source="preview")


def test_every_summary_compared_has_one_row_whose_id_and_system_join_the_comparison_table(study, tmp_path):
    call_command("export_comparisons", "--study", study.slug, "--out", str(tmp_path / "c"), "--formats", "csv")
    comparisons = read_comparisons(tmp_path / "c" / "comparisons.csv")
    assert len(comparisons) == 2  # one final per question
    manifest = _export(study, tmp_path / "s")
    expected = set(_data_candidates(study).values_list("pk", flat=True))
    assert len(expected) == 4  # the preview's two summaries are not data
    for fmt in ("csv", "jsonl", "parquet"):
        summaries = _read(tmp_path / "s" / f"summaries.{fmt}")
        assert set(summaries["candidate"]) == expected, fmt
        assert summaries["candidate"].is_unique
        for side in ("left", "right"):
            joined = comparisons.merge(
                summaries, left_on=f"{side}_candidate", right_on="candidate", how="left", validate="many_to_one"
            )
            assert joined["candidate"].notna().all(), fmt
            assert list(joined["system"]) == list(joined[f"{side}_system"])
            assert list(joined["model"]) == list(joined[f"{side}_model"])
            assert list(joined["annotator_y"]) == list(joined["annotator_x"])
    assert manifest["rows"] == 4 and manifest["study"] == "summaries"
    assert manifest["format"] == "satisfy.summary-export/1" and manifest["code_version"]


def test_the_summary_cut_off_at_max_tokens_is_flagged_truncated(study, tmp_path):
    _export(study, tmp_path, "--formats", "csv,parquet")
    for fmt in ("csv", "parquet"):
        rows = _read(tmp_path / f"summaries.{fmt}").set_index(["query_index", "annotator", "system_label"])
        by_label = {
            (label, finish): truncated
            for (_, _, label), finish, truncated in zip(
                rows.index, rows["finish_reason"], rows["truncated"], strict=True
            )
        }
        assert sorted(by_label.items()) == [
            (("extractive", "stop"), False),
            (("served", "length"), True),
            (("served", "stop"), False),
        ], fmt
        cut = rows[rows["truncated"]]
        assert len(cut) == 1 and cut["completion_tokens"].tolist() == [MAX_TOKENS]
        assert cut["status"].tolist() == ["done"]
        assert cut["system"].tolist() == ["standin-model-generic"]
    truncated = Candidate.objects.get(finish_reason="length")
    assert len(truncated.text.split()) == MAX_TOKENS  # accepted as done, though it stops mid-sentence


def test_texts_are_written_only_when_asked_for(study, tmp_path):
    plain = _export(study, tmp_path / "plain")
    assert plain["includes_texts"] is False and "summary" not in plain["columns"]
    for f in plain["files"]:
        body = (tmp_path / "plain" / f["path"]).read_bytes()
        assert b"Shift work disturbs sleep" not in body and b"Night shifts shorten sleep" not in body
        assert "summary" not in _read(tmp_path / "plain" / f["path"]).columns
    texts = _export(study, tmp_path / "texts", "--include-texts")
    assert texts["includes_texts"] is True and texts["columns"][-1] == "summary"
    stored = dict(_data_candidates(study).values_list("pk", "text"))
    assert FITS in stored.values()
    for f in texts["files"]:
        rows = _read(tmp_path / "texts" / f["path"])
        assert dict(zip(rows["candidate"], rows["summary"], strict=True)) == stored, f["path"]


def test_generation_settings_are_written_as_stored_and_name_the_keys_variable_not_the_key(study, tmp_path):
    manifest = _export(study, tmp_path)
    served = _data_candidates(study).filter(system__label="served")
    stored = {c.pk: c.generation_settings for c in served}
    assert all(s["api_key_env"] == KEY_ENV and s["max_tokens"] == MAX_TOKENS for s in stored.values())
    for f in manifest["files"]:
        body = (tmp_path / f["path"]).read_bytes()
        assert SECRET.encode() not in body, f["path"]  # the stand-in refused any call without it: it was used
        rows = _read(tmp_path / f["path"]).set_index("candidate")
        for pk, settings in stored.items():
            assert json.loads(rows.loc[pk, "generation_settings"]) == settings
        extractive = rows[rows["system_label"] == "extractive"]
        assert set(extractive["generation_settings"]) == {"{}"}
        assert set(extractive["generation_backend"]) == {"extractive"}
        template = served.first().prompt_template  # the study's, recorded on each candidate
        assert template is not None
        assert set(zip(rows["prompt_template"], rows["prompt_template_version"], strict=True)) == {
            (template.name, template.version)
        }
        assert (rows["attempts"] == 1).all() and (rows["status"] == "done").all()
        finished = pd.to_datetime(rows["finished_at"], utc=True)
        assert (finished >= pd.to_datetime(rows["queued_at"], utc=True)).all()


def test_the_manifest_states_each_files_checksum_and_the_tables(study, tmp_path):
    manifest = _export(study, tmp_path)
    assert [f["format"] for f in manifest["files"]] == ["csv", "jsonl", "parquet"]
    for f in manifest["files"]:
        body = (tmp_path / f["path"]).read_bytes()
        assert hashlib.sha256(body).hexdigest() == f["sha256"] and len(body) == f["bytes"] and f["rows"] == 4
    back = pd.read_parquet(tmp_path / "summaries.parquet")
    assert str(back["finished_at"].dtype) == "datetime64[us, UTC]"
    assert table_checksum(back) == manifest["table_sha256"]


def test_a_study_without_candidates_gives_files_of_no_rows_whose_checksums_match(tmp_path):
    empty = StudyFactory(slug="no-summaries")
    manifest = _export(empty, tmp_path)
    assert manifest["rows"] == 0 and manifest["table_sha256"] == hashlib.sha256(b"").hexdigest()
    assert "truncated" in manifest["columns"]
    for f in manifest["files"]:
        body = (tmp_path / f["path"]).read_bytes()
        assert hashlib.sha256(body).hexdigest() == f["sha256"] and f["rows"] == 0
    header = pd.read_csv(tmp_path / "summaries.csv")
    assert len(header) == 0 and list(header.columns) == manifest["columns"]
    assert manifest["columns"][:3] == ["candidate", "annotator", "query_id"]
    assert (tmp_path / "summaries.jsonl").read_bytes() == b""
    assert len(pd.read_parquet(tmp_path / "summaries.parquet")) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--study", "summaries", "--formats", "csv,xlsx"], "Unknown format(s) xlsx"),
        (["--study", "summaries", "--formats", ","], "--formats: give at least one of csv, jsonl, parquet"),
        (["--study", "no-such-study"], "No study with the slug 'no-such-study'"),
    ],
)
def test_a_wrong_format_or_study_is_an_error_naming_it_and_writes_nothing(tmp_path, args, message):
    StudyFactory(slug="summaries")
    with pytest.raises(CommandError) as error:
        call_command("export_summaries", *args, "--out", str(tmp_path / "out"))
    assert message in str(error.value)
    assert not (tmp_path / "out").exists()


def test_an_out_path_that_is_a_file_is_refused_naming_out(tmp_path):
    StudyFactory(slug="summaries")
    (tmp_path / "taken").write_text("keep me")
    with pytest.raises(CommandError, match="--out: .*taken exists and is not a folder"):
        call_command("export_summaries", "--study", "summaries", "--out", str(tmp_path / "taken"))
    assert (tmp_path / "taken").read_text() == "keep me"


def _researcher(study):
    client = Client()
    client.force_login(get_user_model().objects.get(username="previewer"))
    return client


def test_an_export_job_writes_the_summary_table_through_the_api(study, django_capture_on_commit_callbacks):
    client = _researcher(study)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/api/v1/research/studies/{study.slug}/jobs/",
            {"kind": "export", "options": {"format": "jsonl", "table": "summaries", "include_texts": True}},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    job = ResearchJob.objects.get(pk=response.json()["id"])
    assert job.status == ResearchJob.Status.DONE, job.error
    assert job.files == ["summaries.jsonl", "summaries.manifest.json"]
    assert job.manifest["format"] == "satisfy.summary-export/1" and job.manifest["includes_texts"] is True
    body = b"".join(client.get(f"/api/v1/research/jobs/{job.pk}/files/summaries.jsonl").streaming_content)
    assert hashlib.sha256(body).hexdigest() == job.manifest["files"][0]["sha256"]
    rows = pd.read_json(io.BytesIO(body), lines=True, dtype=False)
    assert set(rows["candidate"]) == set(_data_candidates(study).values_list("pk", flat=True))
    assert rows.loc[rows["truncated"], "finish_reason"].tolist() == ["length"]
    assert "exclude" not in job.options  # the rule does not apply to this table


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"format": "csv", "table": "votes"}, "table"),
        ({"format": "csv", "table": "summaries", "exclude": "checks"}, "exclude"),
    ],
)
def test_an_export_job_of_an_unknown_table_or_an_exclusion_on_summaries_is_a_400_naming_it(study, options, field):
    response = _researcher(study).post(
        f"/api/v1/research/studies/{study.slug}/jobs/",
        {"kind": "export", "options": options},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["extra"]["fields"]
    assert not ResearchJob.objects.exists()
