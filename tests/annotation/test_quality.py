"""Quality control through the services and pages: attention checks inserted at the study's share and
indistinguishable from data matches, pass rates, the warn and stop policies, the speed flag, and manual
exclusion with its permission matrix (docs/annotators.md, "Attention checks")."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Judgment, Match, Participation, Query
from annotation.selectors.quality import participation_quality, speed_flagged
from annotation.selectors.tournament import match_current, match_progress
from annotation.services.participation import participation_finish
from annotation.services.persona import persona_save
from annotation.services.quality import check_due, participation_exclude, participation_include
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record, judgment_record_on_page
from kernel.exceptions import ApplicationError
from studies.models import StudyMembership
from tests.annotation.factories import PERSONA, StudyFactory, join

pytestmark = pytest.mark.django_db

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def _ask(participation, capture, text=QUESTION):
    with capture(execute=True):
        query = query_submit(participation=participation, text=text, client_token="")
    query.refresh_from_db()
    assert query.status == Query.Status.READY
    return query


def _answer_until_check(participation, query):
    """Answer the data matches (left) until the check is the current match; returns it."""
    while (match := match_current(query=query)) is not None and not match.check_expected:
        judgment_record(match=match, choice="left", by=participation)
    assert match is not None, "the question had no attention check"
    return match


def _wrong(match: Match) -> str:
    return "right" if match.check_expected == "left" else "left"


def test_the_share_of_questions_with_a_check_is_the_studys_setting():
    seeds = range(4000)
    for share in (0.1, 0.25, 0.5):
        due = sum(check_due(seed=s, share=share) for s in seeds) / len(seeds)
        assert abs(due - share) < 0.03, (share, due)
    assert not any(check_due(seed=s, share=0.0) for s in seeds)
    assert all(check_due(seed=s, share=1.0) for s in seeds)


def test_a_check_pairs_this_questions_summary_with_another_questions_and_is_not_data(
    django_capture_on_commit_callbacks,
):
    study = StudyFactory(check_share=1.0)
    first = join(study)
    q1 = _ask(first, django_capture_on_commit_callbacks)
    # The study's first question has no other summary to use as a decoy: no check.
    assert not q1.bracket.matches.exclude(check_expected="").exists()
    second = join(study)
    q2 = _ask(second, django_capture_on_commit_callbacks, text="Shift work, sleep and errors in nursing")
    (check,) = q2.bracket.matches.exclude(check_expected="")
    own = set(q2.candidates.values_list("pk", flat=True))
    sides = {"left": check.left_id, "right": check.right_id}
    assert sides[check.check_expected] in own
    decoy = sides["right" if check.check_expected == "left" else "left"]
    assert decoy in set(q1.candidates.values_list("pk", flat=True))
    # The progress label counts it as one more comparison: 2 first-round matches, the final, the check.
    assert match_progress(match=match_current(query=q2)) == (0, 4)
    # Answered right it passes; the question is ranked once every match, the check too, is answered.
    check = _answer_until_check(second, q2)
    judgment_record(match=check, choice=check.check_expected, by=second)
    while (match := match_current(query=q2)) is not None:
        judgment_record(match=match, choice="left", by=second)
    q2.refresh_from_db()
    assert q2.status == Query.Status.RANKED
    (quality,) = participation_quality(study=study, code=second.code)
    assert (quality.checks_answered, quality.checks_failed, quality.pass_rate) == (1, 0, 1.0)
    # The comparison table and the dashboard's counts leave the check out: three data matches.
    from analysis.selectors import comparison_rows

    rows = [r for r in comparison_rows(study=study, with_scores=False) if r["query_id"] == q2.pk]
    assert sorted(r["match"] for r in rows) == ["final", "round1_ab", "round1_cd"]
    assert Judgment.objects.filter(match__bracket__query=q2).count() == 4


def _strip(html: str) -> str:
    """The comparison page without what differs between any two matches: the texts (and the notice that two
    texts are identical, which only the texts decide: two data summaries can be, a check's never are), the
    match id, the CSRF token and the comparison's number."""
    html = re.sub(r'<div class="summary-text">.*?</div>', "", html, flags=re.S)
    html = re.sub(
        r'<section class="card notice" role="status" id="identical-notice">.*?</section>', "", html, flags=re.S
    )
    html = re.sub(r'name="match_id" value="\d+"', "", html)
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)
    html = re.sub(r"Comparison \d+ of \d+", "", html)
    return re.sub(r"\n\s*\n", "\n", html)  # the blank lines a removed notice leaves


TWO_SYSTEMS = [
    {"label": "p", "model_name": "extractive-centroid", "condition": "persona"},
    {"label": "g", "model_name": "extractive-mmr", "condition": "generic"},
]


@pytest.mark.parametrize("systems", [4, 2])
def test_nothing_on_the_page_or_in_the_api_tells_a_check_from_a_data_match(
    client: Client, django_capture_on_commit_callbacks, systems
):
    design = {"systems": TWO_SYSTEMS} if systems == 2 else {}
    study = StudyFactory(check_share=1.0, slug="blind", **design)
    _ask(join(study), django_capture_on_commit_callbacks)  # a decoy for the next question
    participation = join(study)
    client.force_login(participation.annotator)
    query = _ask(participation, django_capture_on_commit_callbacks)
    url = reverse("annotation:compare", args=["blind", query.index])
    pages: list[tuple[Match, str]] = []
    while (match := match_current(query=query)) is not None:
        page = client.get(url).content.decode()
        assert f'value="{match.pk}"' in page
        pages.append((match, page))
        client.post(url, {"match_id": match.pk, "choice": match.check_expected or "left"})
    # The tournament's matches and the check, each counted: "Comparison N of M" goes up to M.
    assert len(pages) == systems and sum(bool(m.check_expected) for m, _ in pages) == 1
    assert [re.search(r"Comparison (\d+) of (\d+)", p).groups() for _, p in pages] == [
        (str(n), str(systems)) for n in range(1, systems + 1)
    ]
    # The comparison labelled "Final comparison" is the question's last: nothing, the check included, follows it.
    assert ["Final comparison" in p for _, p in pages] == [False] * (systems - 1) + [True]
    # Every comparison before the final renders as the check does.
    (check_page,) = [p for m, p in pages if m.check_expected]
    for _, page in pages[:-1]:
        assert _strip(page) == _strip(check_page)
    # The API shows the same fields for each, and no label twice (a tournament names each of its matches once).
    bodies = [client.get(f"/api/v1/matches/{m.pk}/").json() for m, _ in pages]
    assert all(body.keys() == bodies[0].keys() for body in bodies)
    labels = [body["label"] for body in bodies]
    assert len(set(labels)) == len(labels) and labels[-1] == "final"
    assert all(re.fullmatch(r"round\d_[a-z]+", label) for label in labels[:-1])


def test_the_comparison_page_takes_only_the_match_on_screen_a_check_included(django_capture_on_commit_callbacks):
    study = StudyFactory(check_share=1.0)
    _ask(join(study), django_capture_on_commit_callbacks)  # a decoy for the next question
    participation = join(study)
    query = _ask(participation, django_capture_on_commit_callbacks)
    seen_check = False
    while (on_screen := match_current(query=query)) is not None:
        seen_check = seen_check or bool(on_screen.check_expected)
        # Every other pending match of the question (the check while a data match is shown, or the other way
        # round) is refused on the page, and nothing is recorded.
        for other in query.bracket.matches.filter(status=Match.Status.PENDING).exclude(pk=on_screen.pk):
            with pytest.raises(ApplicationError) as refused:
                judgment_record_on_page(
                    participation=participation, index=query.index, match_id=other.pk, choice="left"
                )
            assert refused.value.status == 409 and "not the one to answer now" in refused.value.message
        choice = on_screen.check_expected or "left"
        judgment_record_on_page(participation=participation, index=query.index, match_id=on_screen.pk, choice=choice)
    assert seen_check
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    assert Judgment.objects.filter(match__bracket__query=query).count() == 4  # three data matches and the check


def test_a_failed_check_under_warn_shows_a_gentle_notice_and_carries_on(
    client: Client, django_capture_on_commit_callbacks
):
    study = StudyFactory(check_share=1.0, slug="warned", check_policy="warn")
    _ask(join(study), django_capture_on_commit_callbacks)
    participation = join(study)
    client.force_login(participation.annotator)
    query = _ask(participation, django_capture_on_commit_callbacks)
    check = _answer_until_check(participation, query)
    url = reverse("annotation:compare", args=["warned", query.index])
    page = client.post(url, {"match_id": check.pk, "choice": "neither"}, follow=True).content.decode()
    assert "did not match it" in page
    # Only once: the next page has no notice.
    assert (
        "did not match it" not in client.get(reverse("annotation:study", args=["warned"]), follow=True).content.decode()
    )
    participation.refresh_from_db()
    assert participation.stopped_at is None and participation.screened_out_at is None
    (quality,) = participation_quality(study=study, code=participation.code)
    assert (quality.checks_answered, quality.checks_failed, quality.pass_rate) == (1, 1, 0.0)


def test_the_api_tells_a_failed_check_under_warn_once(django_capture_on_commit_callbacks):
    study = StudyFactory(check_share=1.0, slug="warned-api", check_policy="warn")
    _ask(join(study), django_capture_on_commit_callbacks)
    participation = join(study)
    query = _ask(participation, django_capture_on_commit_callbacks)
    api = APIClient()
    api.force_authenticate(participation.annotator)
    data = match_current(query=query)
    answered = api.post(f"/api/v1/matches/{data.pk}/choice/", {"choice": "left"}, format="json").json()
    assert answered["notice"] is None  # a data match: nothing to say
    check = _answer_until_check(participation, query)
    failed = api.post(f"/api/v1/matches/{check.pk}/choice/", {"choice": _wrong(check)}, format="json")
    assert failed.status_code == 200 and "did not match it" in failed.json()["notice"]
    # The same answer sent again (a retry after a lost response) is returned unchanged, without the notice.
    again = api.post(f"/api/v1/matches/{check.pk}/choice/", {"choice": _wrong(check)}, format="json")
    assert again.status_code == 200 and again.json()["notice"] is None


def test_a_right_answer_to_a_check_shows_no_notice(client: Client, django_capture_on_commit_callbacks):
    study = StudyFactory(check_share=1.0, slug="fine")
    _ask(join(study), django_capture_on_commit_callbacks)
    participation = join(study)
    client.force_login(participation.annotator)
    query = _ask(participation, django_capture_on_commit_callbacks)
    check = _answer_until_check(participation, query)
    url = reverse("annotation:compare", args=["fine", query.index])
    page = client.post(url, {"match_id": check.pk, "choice": check.check_expected}, follow=True).content.decode()
    assert "did not match it" not in page


def _answer_all(participation, query):
    """Answer every match of the question: the data matches left, the check (if any) "neither", which fails it."""
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="neither" if match.check_expected else "left", by=participation)
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED


def _answers(participations) -> tuple[int, list[int]]:
    """What the research team keeps of these participations: their answers, and each one's failed checks."""
    return (
        Judgment.objects.filter(match__bracket__query__participation__in=participations).count(),
        [q.checks_failed for p in participations for q in participation_quality(study=p.study, code=p.code)],
    )


def test_restarting_a_preview_leaves_every_real_annotators_checks_and_answers(django_capture_on_commit_callbacks):
    # A finished preview is replaced by a fresh one, its questions deleted (docs/crowd.md, "Previews"). Its
    # summaries were decoys of real annotators' checks, and the cascade took those checks and their answers.
    capture = django_capture_on_commit_callbacks
    study = StudyFactory(check_share=1.0, slug="previewed", queries_per_annotator=2)
    researcher = get_user_model().objects.create_user("researcher", password="pw-x-123456")
    StudyMembership.objects.create(study=study, user=researcher, role="owner")
    web = Client()
    web.force_login(researcher)
    assert web.post("/study/previewed/preview/").status_code == 302
    preview = Participation.objects.get(study=study, annotator=researcher)
    persona_save(participation=preview, data=PERSONA)
    _answer_all(preview, _ask(preview, capture))
    # A preview's second question may take its decoy from the preview's first: the researcher sees checks too.
    second = _ask(preview, capture, text="Shift work, sleep and errors in nursing")
    (preview_check,) = second.bracket.matches.exclude(check_expected="")
    decoy = preview_check.right if preview_check.check_expected == "left" else preview_check.left
    assert decoy.query.participation_id == preview.pk
    # The first real annotator has only the preview's summaries to draw a decoy from, so no check; the second
    # gets one, its decoy the first's. Both answer everything, failing the check.
    first, other = join(study), join(study)
    _answer_all(first, _ask(first, capture))
    _answer_all(other, _ask(other, capture))
    before = _answers([first, other])
    participation_finish(participation=preview)
    assert web.post("/study/previewed/preview/").status_code == 302
    assert not Participation.objects.filter(pk=preview.pk).exists()
    assert _answers([first, other]) == before
    assert before == (7, [0, 1])  # three matches for the first, three and the check for the other


def _answer_all_but_the_check(participation, query) -> Match:
    """Answer every data match (left), the final included, leaving the check the one match pending."""
    while (match := query.bracket.matches.filter(status=Match.Status.PENDING, check_expected="").first()) is not None:
        judgment_record(match=match, choice="left", by=participation)
    (check,) = query.bracket.matches.filter(status=Match.Status.PENDING)
    assert check.check_expected
    return check


def _stranded(capture, *, slug: str) -> tuple[Participation, Query]:
    """A question, in a study of its own (so that its check's decoy is surely the question deleted), whose one
    pending match, the check, vanished with its decoy's question."""
    study = StudyFactory(check_share=1.0, slug=slug)
    decoy_query = _ask(join(study), capture)
    participation = join(study)
    query = _ask(participation, capture)
    _answer_all_but_the_check(participation, query)
    decoy_query.delete()
    return participation, query


def test_a_question_whose_pending_check_vanished_ends_ranked_not_in_a_redirect_loop(
    client: Client, django_capture_on_commit_callbacks
):
    # The state a preview restart left before its summaries were kept out of the decoys (and any other deletion
    # of a decoy's question would leave): the check, the question's last pending match, deleted with its decoy.
    capture = django_capture_on_commit_callbacks
    study = StudyFactory(check_share=1.0, slug="stranded", queries_per_annotator=2)
    decoys = join(study)
    decoy_query = _ask(decoys, capture)
    participation = join(study)
    client.force_login(participation.annotator)
    query = _ask(participation, capture)
    check = _answer_all_but_the_check(participation, query)
    decoy_query.delete()
    assert not Match.objects.filter(pk=check.pk).exists()
    # The page: the study's link leads on to the next question (the loop raised RedirectCycleError here).
    page = client.get(reverse("annotation:study", args=["stranded"]), follow=True)
    assert page.status_code == 200 and page.redirect_chain[-1][0] == reverse("annotation:ask", args=["stranded"])
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    assert Judgment.objects.filter(match__bracket__query=query).count() == 3  # the answers given are kept
    # The API, in a study of its own (so that the check's decoy is surely the question deleted): no match to
    # show, and the question says it is ranked (it stayed "ready", with 204 for ever).
    api_participation, api_query = _stranded(capture, slug="stranded-api")
    api = APIClient()
    api.force_authenticate(api_participation.annotator)
    assert api.get(f"/api/v1/queries/{api_query.pk}/current-match/").status_code == 204
    assert api.get(f"/api/v1/queries/{api_query.pk}/").json()["status"] == "ranked"


def test_stop_after_two_failures_screens_out_with_the_return_link(client: Client, django_capture_on_commit_callbacks):
    study = StudyFactory(
        check_share=1.0,
        slug="stopped",
        check_policy="stop",
        check_max_failures=2,
        screen_out_url="https://app.prolific.com/submissions/complete?cc=SCREENED",
    )
    _ask(join(study), django_capture_on_commit_callbacks)
    participation = join(study)
    client.force_login(participation.annotator)
    first = _ask(participation, django_capture_on_commit_callbacks)
    check = _answer_until_check(participation, first)
    judgment_record(match=check, choice=_wrong(check), by=participation)
    participation.refresh_from_db()
    assert participation.stopped_at is None  # one failure of two: carries on
    while (match := match_current(query=first)) is not None:
        judgment_record(match=match, choice="left", by=participation)
    second = _ask(participation, django_capture_on_commit_callbacks, text="Sleep of nurses on rotating shifts")
    check = _answer_until_check(participation, second)
    url = reverse("annotation:compare", args=["stopped", second.index])
    page = client.post(url, {"match_id": check.pk, "choice": _wrong(check)}, follow=True)
    assert page.redirect_chain[-1][0].endswith("/done/")
    html = page.content.decode()
    assert "The study has ended for you" in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=SCREENED"' in html
    assert "completion code" not in html.lower()
    participation.refresh_from_db()
    assert participation.screened_out_at is not None and participation.stopped_at is not None
    assert not participation.completion_code
    # The question takes no more answers: set aside as stopped, or ranked when the check was its last match.
    second.refresh_from_db()
    pending = second.bracket.matches.filter(status=Match.Status.PENDING).exists()
    assert (second.status, second.set_aside_reason) == (
        (Query.Status.DISCARDED, "stopped") if pending else (Query.Status.RANKED, "")
    )
    assert client.get(url)["Location"].endswith("/stopped/")


def test_the_speed_flag_is_a_median_under_the_threshold():
    assert speed_flagged(seconds=[2.0, 3.0, 50.0], threshold=5.0)
    assert not speed_flagged(seconds=[2.0, 30.0, 50.0], threshold=5.0)
    assert not speed_flagged(seconds=[1.0, 1.0], threshold=5.0)  # too few comparisons to judge a pace
    assert not speed_flagged(seconds=[1.0, 1.0, 1.0], threshold=None)


def test_a_participant_clicking_through_is_speed_flagged(django_capture_on_commit_callbacks):
    study = StudyFactory(speed_threshold_seconds=4.0)
    fast, careful = join(study), join(study)
    for participation in (fast, careful):
        query = _ask(participation, django_capture_on_commit_callbacks)
        while (match := match_current(query=query)) is not None:
            judgment_record(match=match, choice="left", by=participation)
    Judgment.objects.filter(match__bracket__query__participation=fast).update(seconds_on_page=1.5)
    Judgment.objects.filter(match__bracket__query__participation=careful).update(seconds_on_page=40.0)
    flags = {q.code: q.speed_flagged for q in participation_quality(study=study)}
    assert flags == {fast.code: True, careful.code: False}


@pytest.fixture
def members():
    study = StudyFactory()
    users = {}
    for name in ("owner", "researcher", "viewer", "stranger", "admin"):
        users[name] = get_user_model().objects.create_user(username=name, is_superuser=name == "admin")
    for role in ("owner", "researcher", "viewer"):
        StudyMembership.objects.create(study=study, user=users[role], role=role)
    return study, users


@pytest.mark.parametrize(
    ("who", "status"), [("owner", None), ("researcher", None), ("admin", None), ("viewer", 403), ("stranger", 404)]
)
def test_who_may_exclude_a_participation(members, who, status):
    study, users = members
    participation = join(study)
    if status is None:
        participation_exclude(participation=participation, reason="answered in 3 s each", by=users[who])
        participation.refresh_from_db()
        assert participation.exclusion_reason == "answered in 3 s each"
        assert participation.excluded_by == users[who]
        participation_include(participation=participation, by=users[who])
        participation.refresh_from_db()
        assert participation.excluded_at is None
        return
    for write in (
        lambda: participation_exclude(participation=participation, reason="no", by=users[who]),
        lambda: participation_include(participation=participation, by=users[who]),
    ):
        with pytest.raises(ApplicationError) as error:
            write()
        assert error.value.status == status
    participation.refresh_from_db()
    assert participation.excluded_at is None


def test_an_exclusion_is_idempotent_needs_a_reason_and_can_be_undone(members):
    study, users = members
    participation = join(study)
    with pytest.raises(ApplicationError) as error:
        participation_exclude(participation=participation, reason="   ", by=users["owner"])
    assert error.value.field == "reason"
    first = participation_exclude(participation=participation, reason="duplicate account", by=users["owner"])
    again = participation_exclude(participation=participation, reason="duplicate account", by=users["researcher"])
    assert again.excluded_at == first.excluded_at and again.excluded_by == users["owner"]
    participation_include(participation=participation, by=users["owner"])
    participation_include(participation=participation, by=users["owner"])
    participation.refresh_from_db()
    assert (participation.excluded_at, participation.exclusion_reason) == (None, "")


def test_researchers_exclude_from_the_dashboard_and_the_admin_api(members):
    study, users = members
    participation = join(study)
    page = Client()
    page.force_login(users["researcher"])
    users["researcher"].groups.add(_researchers())
    url = reverse("analysis:participation-exclusion", args=[study.slug, participation.code])
    assert page.post(url, {"reason": "speeding"}).status_code == 302
    dashboard = page.get(reverse("analysis:study", args=[study.slug])).content.decode()
    assert "speeding" in dashboard and "Undo exclusion" in dashboard
    assert page.post(url, {"undo": "1"}).status_code == 302
    assert Participation.objects.get(pk=participation.pk).excluded_at is None
    # The admin API: a field message for a missing reason, then the exclusion and its undo.
    api = Client()
    api.force_login(users["admin"])
    endpoint = f"/api/v1/admin/studies/{study.slug}/participations/{participation.code}/exclusion/"
    missing = api.post(endpoint, {}, content_type="application/json")
    assert missing.status_code == 400 and "reason" in missing.content.decode()
    done = api.post(endpoint, {"reason": "bot"}, content_type="application/json")
    assert done.status_code == 200 and done.json()["excluded"] is True and done.json()["exclusion_reason"] == "bot"
    undone = api.post(endpoint, {"excluded": False}, content_type="application/json")
    assert undone.status_code == 200 and undone.json()["excluded"] is False


def _researchers():
    from django.contrib.auth.models import Group

    return Group.objects.get_or_create(name="researchers")[0]


def test_a_reason_the_database_cannot_store_is_a_message_not_a_500(members):
    """A NUL character in the reason, posted to the dashboard's form (which reads the raw POST) or given to the
    service: the researcher is told, and nothing is recorded."""
    study, users = members
    participation = join(study)
    page = Client(raise_request_exception=False)
    page.force_login(users["researcher"])
    users["researcher"].groups.add(_researchers())
    url = reverse("analysis:participation-exclusion", args=[study.slug, participation.code])
    response = page.post(url, {"reason": "bot\x00"})
    assert response.status_code == 302 and "error=" in response["Location"] and "NUL" in unquote(response["Location"])
    with pytest.raises(ApplicationError) as error:
        participation_exclude(participation=participation, reason="copy\x00paste", by=users["owner"])
    assert error.value.field == "reason"
    assert Participation.objects.get(pk=participation.pk).excluded_at is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_two_devices_polling_a_stranded_question_at_once_settle_it_once(django_capture_on_commit_callbacks):
    """A phone and a laptop ask for the current match of a question whose pending check vanished, at the same
    moment: each settles it under the bracket's lock, so one ranks it and the other finds it ranked; neither is
    a 500 or waits on the other for ever, and the answers given are kept."""
    from tests.support.races import at_once

    participation, query = _stranded(django_capture_on_commit_callbacks, slug="stranded-race")

    def poll() -> object:
        api = APIClient()
        api.force_authenticate(participation.annotator)
        return api.get(f"/api/v1/queries/{query.pk}/current-match/").status_code

    statuses = at_once(poll, poll)
    assert statuses == [204, 204], statuses
    query.refresh_from_db()
    assert query.status == Query.Status.RANKED
    assert Judgment.objects.filter(match__bracket__query=query).count() == 3
