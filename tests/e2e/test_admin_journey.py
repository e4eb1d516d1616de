"""The administrator's journey in the Django admin, at desktop and phone sizes: sign in, open a study,
create invitations, follow the annotators' progress, and send a failed question back to work."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, expect

from annotation.models import Query
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.e2e.viewports import SIZES, Camera, new_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def _study_with_progress() -> tuple[Study, Query]:
    """One annotator ranked a question; a second one's question failed while searching for sources."""
    study = StudyFactory(slug="ward", title="Night shifts on the ward")
    first = join(study)
    query = query_submit(participation=first, text="night shift work and nurses' sleep", client_token="")
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="left", by=first)
    second = join(study)
    failed = Query.objects.create(
        participation=second,
        index=1,
        text="naps during night shifts",
        client_token="admin-journey",
        persona=second.personas.latest("version"),
        status=Query.Status.FAILED,
        retrieval_backend=query.retrieval_backend,
        failure_reason="The literature search did not answer in time.",
    )
    return study, failed


@pytest.mark.parametrize("size", SIZES)
def test_an_administrator_invites_follows_progress_and_retries(
    browser: Browser, live_server: Any, screenshots: Any, size: str
) -> None:
    study, failed = _study_with_progress()
    get_user_model().objects.create_superuser("admin", "admin@example.org", "correct horse battery")
    page = new_context(browser, size, base_url=live_server.url).new_page()
    page.set_default_timeout(30_000)
    camera = Camera(screenshots, "admin", size)

    page.goto("/admin/")
    expect(page).to_have_url(re.compile(r"/admin/login/"))
    camera.shot(page, "sign-in")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Studies, annotators and generation jobs")).to_be_visible()
    camera.shot(page, "index")

    # The study list, then the study itself.
    page.goto("/admin/studies/study/")
    row = page.locator("#result_list tbody tr", has_text=study.title)
    expect(row).to_contain_text("2")  # participants
    camera.shot(page, "studies")
    row.get_by_role("link", name=study.title).click()
    expect(page.get_by_role("heading", name=re.compile("Change study"))).to_be_visible()
    camera.shot(page, "study")

    # Invitations: two new links, listed afterwards.
    page.goto("/admin/studies/study/")
    page.locator("#result_list tbody tr", has_text=study.title).get_by_role("link", name="Create invitations").click()
    page.get_by_label("Count").fill("2")
    camera.shot(page, "invitations-form")
    page.get_by_role("button", name="Create invitations").click()
    links = page.get_by_label("new invitation links").input_value().split()
    assert len(links) == 2 and all(re.search(r"/join/[\w-]+/$", link) for link in links)
    camera.shot(page, "invitations-created")
    page.goto(f"/admin/studies/invitation/?study__id__exact={study.pk}")
    expect(page.locator("#result_list tbody tr")).to_have_count(2 + 2)  # one per joined annotator, plus the new
    camera.shot(page, "invitations")

    # Progress: who has ranked how many questions.
    page.goto("/admin/annotation/participation/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    ranked = sorted(rows.nth(i).locator("td.field-queries_ranked").inner_text() for i in range(2))
    assert ranked == ["0 / 8", "1 / 8"]  # of the study's 8 questions
    camera.shot(page, "participations")

    # The failed question goes back to work: selected in the list, the retry action, then ready.
    page.goto("/admin/annotation/query/")
    failed_row = page.locator("#result_list tbody tr", has_text="naps during night shifts")
    expect(failed_row).to_contain_text("Failed")
    camera.shot(page, "queries")
    failed_row.locator("input.action-select").check()
    page.locator("select[name=action]").select_option("retry_failed")
    page.get_by_role("button", name="Go", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("Failed work of 1 question(s) was queued again.")
    camera.shot(page, "queries-retried")
    failed.refresh_from_db()
    assert failed.status == Query.Status.READY and failed.candidates.filter(status="done").count() == 4
    page.reload()
    expect(page.locator("#result_list tbody tr", has_text="naps during night shifts")).to_contain_text("Ready to rank")
    assert len(list(camera.folder.glob("*.png"))) == camera.count == 10
