"""A study with real answers, played through the services on the offline backends."""

from __future__ import annotations

import random

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.selectors.tournament import match_current
from annotation.services.participation import participation_finish
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from tests.annotation.factories import StudyFactory, join

QUESTIONS = [
    "How does night shift work affect nurses' sleep and patient safety?",
    "Do mRNA vaccines protect older adults against severe disease?",
    "How should we evaluate summaries written by large language models?",
]


@pytest.fixture
def played_study(django_capture_on_commit_callbacks):
    """Three annotators, two questions each, seeded choices (some "neither")."""
    study = StudyFactory(slug="played", title="Played study")
    rng = random.Random(7)
    for _ in range(3):
        participation = join(study)
        for text in QUESTIONS[:2]:
            with django_capture_on_commit_callbacks(execute=True):
                query = query_submit(participation=participation, text=text, client_token="")
            while (match := match_current(query=query)) is not None:
                choice = rng.choices(["left", "right", "neither"], weights=[4, 4, 1])[0]
                judgment_record(match=match, choice=choice, by=participation)
        participation_finish(participation=participation)
    return study


@pytest.fixture
def researcher_client(played_study) -> Client:
    """A researcher of the played study: in the researchers group, a member with the researcher role, not
    staff (the research pages need no admin rights)."""
    from django.contrib.auth.models import Group

    from studies.models import StudyMembership

    user = get_user_model().objects.create_user("researcher", password="pw")
    user.groups.add(Group.objects.get_or_create(name="researchers")[0])
    StudyMembership.objects.create(study=played_study, user=user, role="researcher")
    client = Client()
    client.force_login(user)
    return client
