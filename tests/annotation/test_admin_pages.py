"""Every Django admin page a superuser can reach opens: each registered model's changelist, add page
(where adding is allowed) and the change page of one real object."""

from __future__ import annotations

import pytest
from axes.models import AccessLog
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from analysis.models import ResearchJob
from annotation.models import Candidate, Participation
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db


@pytest.fixture
def everything(django_capture_on_commit_callbacks):
    """One row of every model the admin shows: a ranked question with its bracket, scores and jobs."""
    from corpus.models import CorpusDocument

    study = StudyFactory(slug="walk", status="open")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="night shifts and sleep", client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=participation)
    candidate = Candidate.objects.filter(query=query).first()
    ScoringRun.objects.create(study=study, metrics=["rouge1"])
    CandidateScore.objects.create(candidate=candidate, metric="rouge1", value=0.5, version="1")
    PairwiseVote.objects.create(
        match=query.bracket.matches.first(), judge_model="m", judge_server="s", prompt_version="pairwise/1",
        order="first", choice="left",
    )  # fmt: skip
    ResearchJob.objects.create(study=study, kind="report")
    CorpusDocument.objects.create(external_id="W1", title="A paper", abstract="An abstract.")
    Group.objects.create(name="researchers")
    superuser = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    Token.objects.create(user=superuser)
    # The login throttle's rows (axes): a failed login by an unknown name, and an access log row (the
    # settings keep no log of successful logins, so it is made directly).
    Client().post("/admin/login/", {"username": "nobody", "password": "wrong"})
    AccessLog.objects.create(username="root", ip_address="127.0.0.1", user_agent="test", path_info="/admin/login/")
    return superuser


def test_every_admin_page_opens_for_a_superuser(client, rf, everything):
    client.force_login(everything)
    request = rf.get("/admin/")
    request.user = everything
    opened = []
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        base = f"admin:{meta.app_label}_{meta.model_name}"
        pages = [reverse(f"{base}_changelist")]
        if model_admin.has_add_permission(request):
            pages.append(reverse(f"{base}_add"))
        obj = model._default_manager.order_by("pk").first()
        assert obj is not None, f"the fixture has no {meta.verbose_name} to open"
        pages.append(reverse(f"{base}_change", args=[obj.pk]))
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, f"{url} answered {response.status_code}"
            opened.append(url)
    assert any("/participation/" in url for url in opened)
    assert Participation.objects.exists()


# --- the invitation page ---------------------------------------------------------------------------------


def test_an_invitation_added_on_its_admin_page_has_a_working_link_and_a_second_one_can_be_added(client):
    """The add page saved an invitation without a token (a link that joins nothing), and every add after it
    was a 500 on the token's unique constraint."""
    from studies.links import invitation_link
    from studies.models import Invitation, Study

    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    study = StudyFactory(status=Study.Status.OPEN)
    for note in ("first", "second"):
        added = client.post("/admin/studies/invitation/add/", {"study": study.pk, "max_uses": "2", "note": note})
        assert added.status_code == 302, added.content.decode()[-3000:]
    first, second = Invitation.objects.filter(study=study).order_by("pk")
    assert first.token and second.token and first.token != second.token
    assert (first.note, first.max_uses, first.uses) == ("first", 2, 0)
    client.logout()
    join = client.get(invitation_link(first).removeprefix("http://testserver"))
    assert join.status_code == 200 and study.title in join.content.decode()


def test_an_invitations_limit_cannot_go_below_the_annotators_who_joined_with_it(client):
    """`uses` is shown, not edited, so the database's check (uses <= max_uses) did not run with the form: a
    limit below the uses was a 500; and a save wrote back the count it had read, over joins made meanwhile."""
    from studies.models import Invitation

    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    invitation = Invitation.objects.create(study=StudyFactory(), token="t0ken", max_uses=5, uses=2)
    url = f"/admin/studies/invitation/{invitation.pk}/change/"
    refused = client.post(url, {"max_uses": "1", "note": "fewer"})
    assert refused.status_code == 200
    assert "2 annotator(s) have already joined with this invitation: allow at least 2 uses." in refused.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).max_uses == 5
    saved = client.post(url, {"max_uses": "3", "note": "fewer"})
    assert saved.status_code == 302
    assert Invitation.objects.filter(pk=invitation.pk).values_list("max_uses", "uses", "note").get() == (3, 2, "fewer")


def test_retrying_questions_without_failed_work_says_there_was_nothing_to_retry(
    client, django_capture_on_commit_callbacks
):
    from annotation.models import Query

    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=join(StudyFactory()), text="night shifts and sleep", client_token="")
    assert Query.objects.get(pk=query.pk).status == Query.Status.READY
    response = client.post(
        "/admin/annotation/query/", {"action": "retry_failed", "_selected_action": [query.pk]}, follow=True
    )
    assert "Nothing to retry: no selected question had failed work." in response.content.decode()
    assert "queued again" not in response.content.decode()
