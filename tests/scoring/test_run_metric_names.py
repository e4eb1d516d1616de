"""`offline` names every offline metric wherever a metric list is taken (docs/metrics.md): `scoring.cli`, the
stress tests, and a study's scoring run through `score_study` and the research API."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.test import APIClient

from analysis.permissions import RESEARCHERS_GROUP
from scoring.core.api import offline_metrics
from scoring.models import ScoringRun
from studies.models import StudyMembership
from studies.services.membership import membership_set
from tests.annotation.factories import StudyFactory

pytestmark = pytest.mark.django_db


def test_the_research_api_takes_offline_as_every_offline_metric():
    study = StudyFactory(slug="offline")
    user = get_user_model().objects.create_user("researcher")
    user.groups.add(Group.objects.get_or_create(name=RESEARCHERS_GROUP)[0])
    membership_set(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    api = APIClient()
    api.force_authenticate(user)
    response = api.post("/api/v1/research/studies/offline/scoring-runs/", {"metrics": ["offline"]}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["metrics"] == list(offline_metrics())
    assert "rouge1" in response.json()["metrics"]


def test_score_study_takes_offline_as_every_offline_metric():
    study = StudyFactory(slug="offline")
    call_command("score_study", "--study", "offline", "--metrics", "offline")
    assert ScoringRun.objects.get(study=study).metrics == list(offline_metrics())


def test_offline_beside_other_names_is_still_an_unknown_metric():
    StudyFactory(slug="offline")
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    response = api.post(
        "/api/v1/research/studies/offline/scoring-runs/", {"metrics": ["rouge1", "offline"]}, format="json"
    )
    assert response.status_code == 400
    assert "offline" in " ".join(response.json()["extra"]["fields"]["metrics"])
