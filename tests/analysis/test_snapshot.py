"""Exported comparisons say which model and condition produced each summary as it was when the summary
was created: a later attempt to rename a system changes no exported row."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from analysis.exports import read_comparisons, write_comparisons
from analysis.selectors import comparison_frame, comparison_rows
from annotation.models import Candidate
from studies.models import StudySystem

pytestmark = pytest.mark.django_db


def test_candidates_record_what_produced_them(played_study):
    candidate = Candidate.objects.select_related("system", "query__participation__study").first()
    system, study = candidate.system, candidate.query.participation.study
    assert (candidate.system_label, candidate.model_name, candidate.condition) == (
        system.label,
        system.model_name,
        system.condition,
    )
    assert candidate.generation_backend == "extractive" and candidate.generation_settings == {}
    assert candidate.prompt_template_id == study.prompt_template_id
    assert candidate.prompt_template_version == study.prompt_template.version


def test_a_rename_attempt_leaves_the_exported_rows_alone(played_study, tmp_path):
    before = comparison_rows(study=played_study)
    admin = APIClient()
    admin.force_authenticate(get_user_model().objects.create_superuser("root", "r@example.org", "pw"))
    systems = admin.get(f"/api/v1/admin/studies/{played_study.slug}/").json()["systems"]
    renamed = [{**systems[0], "model_name": "gpt-4o", "label": "gpt-4o-persona"}, *systems[1:]]
    refused = admin.patch(f"/api/v1/admin/studies/{played_study.slug}/", {"systems": renamed}, format="json")
    assert refused.status_code == 409 and "systems" in refused.json()["extra"]["fields"]
    # Even a rename that bypasses the rules (straight in the database) does not relabel past rows.
    StudySystem.objects.filter(pk=systems[0]["id"]).update(
        model_name="gpt-4o", label="gpt-4o-persona", condition="generic"
    )
    after = comparison_rows(study=played_study)
    assert after == before
    assert not any("gpt-4o" in (r["left_model"], r["right_model"], r["winner_model"]) for r in after)
    write_comparisons(comparison_frame(study=played_study), tmp_path / "comparisons.csv")
    exported = read_comparisons(tmp_path / "comparisons.csv")
    assert set(exported["left_model"]) | set(exported["right_model"]) == {"extractive-centroid", "extractive-mmr"}
    assert set(exported["left_condition"]) | set(exported["right_condition"]) == {"persona", "generic"}
    assert "gpt-4o-persona" not in set(exported["left_system"]) | set(exported["right_system"])


def test_rows_without_a_snapshot_fall_back_to_their_system(played_study):
    """Legacy imports create candidates outside query_retrieve; their rows still name a model."""
    Candidate.objects.update(system_label="", model_name="", condition="")
    rows = comparison_rows(study=played_study)
    assert {r["left_model"] for r in rows} | {r["right_model"] for r in rows} == {
        "extractive-centroid",
        "extractive-mmr",
    }


def test_the_data_migration_fills_the_snapshot_from_the_system(played_study):
    migration = importlib.import_module("annotation.migrations.0003_fill_candidate_snapshot_from_system")
    Candidate.objects.update(system_label="", model_name="", condition="", generation_backend="", prompt_template=None)
    migration.fill_snapshot(apps, None)
    for candidate in Candidate.objects.select_related("system"):
        assert (candidate.system_label, candidate.model_name, candidate.condition, candidate.generation_backend) == (
            candidate.system.label,
            candidate.system.model_name,
            candidate.system.condition,
            candidate.system.generation_backend,
        )
        assert candidate.prompt_template_id == played_study.prompt_template_id
