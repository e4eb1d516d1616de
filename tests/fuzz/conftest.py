"""The roles the fuzzer speaks as, set up in one place (`fuzz_roles`) so a new role is one more entry."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

from analysis.permissions import RESEARCHERS_GROUP
from annotation.models import Match
from annotation.services.query import query_submit
from studies.models import StudyMembership
from studies.services.invitation import invitation_create_bulk
from studies.services.membership import membership_set
from tests.annotation.factories import StudyFactory, join
from tests.fuzz.harness import Role


def _token(user) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


def fuzz_roles() -> dict[str, Role]:
    """An annotator with a participation and an open question with a pending match, a researcher (in the
    "researchers" group and a researcher member of the study), a superuser admin, and nobody signed in; each knows the ids of its objects."""
    users = get_user_model().objects
    study = StudyFactory(slug="fuzz")
    participation = join(study, user=users.create_user("fuzz-annotator"))
    query = query_submit(participation=participation, text="How does shift work affect sleep?", client_token="")
    match = Match.objects.filter(bracket__query=query, status=Match.Status.PENDING).first()
    assert match is not None, "the fuzzed annotator needs a question with a match to answer"
    invitation = invitation_create_bulk(study=study, count=1, max_uses=1000)[0]

    researcher = users.create_user("fuzz-researcher")
    researcher.groups.add(Group.objects.get_or_create(name=RESEARCHERS_GROUP)[0])
    membership_set(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)  # sees the study's results
    admin = users.create_superuser("fuzz-admin", "admin@example.org", "x")
    study_paths = {
        "/api/v1/invitations/": {"token": invitation.token},
        "/api/v1/research/studies/": {"slug": study.slug},
        "/api/v1/admin/studies/": {"slug": study.slug},
    }
    return {
        "annotator": Role(
            "annotator",
            _token(participation.annotator),
            {
                "/api/v1/participations/": {"id": participation.pk},
                "/api/v1/queries/": {"id": query.pk},
                "/api/v1/matches/": {"id": match.pk},
                **study_paths,
            },
        ),
        "researcher": Role("researcher", _token(researcher), study_paths),
        "admin": Role("admin", _token(admin), study_paths),
        "anonymous": Role("anonymous", {}, study_paths),
    }


@pytest.fixture
def roles(transactional_db) -> dict[str, Role]:  # type: ignore[no-untyped-def]
    # Committed for real: the question's retrieval and generation run (eagerly) on commit, and a request that
    # fails in the database cannot leave the test's own transaction aborted for the cases after it.
    return fuzz_roles()


@pytest.fixture
def quiet_request_log():  # type: ignore[no-untyped-def]
    # Django logs every 4xx as a warning; a fuzz run sends a thousand. 5xx are still logged (as errors).
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)
