"""The adaptive design through the public API: a 12-system study played to the end by annotators and analysed with
a strength per system; the same blindness, positions, "neither" and persona rules as the bracket; the study's
tallies that choose the next pair, right when annotators answer at the same moment; the design as a setting."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from annotation.models import Judgment, Match, PairTally, PrewrittenOutput, Query
from annotation.services.participation import participation_preview_start
from annotation.services.persona import persona_save
from annotation.services.prewritten import prewritten_query_next
from annotation.services.tournament import judgment_record
from studies.models import Study
from tests.annotation.factories import (
    PERSONA,
    StudyFactory,
    api_annotator,
    join,
    prewritten_adaptive_study,
    system_number,
)
from tests.studies.test_study_rules import _change_url, _form_data

pytestmark = pytest.mark.django_db


def _play(client: APIClient, pid: int, token: str, choose) -> tuple[dict, list[dict]]:  # type: ignore[no-untyped-def]
    """Take the next item and answer its comparisons with `choose(match body, number)` until none is left."""
    got = client.post(f"/api/v1/participations/{pid}/next-item/", {"client_token": token})
    assert got.status_code == 201, got.json()
    query = got.json()
    shown = []
    while (match := client.get(f"/api/v1/queries/{query['id']}/current-match/")).status_code == 200:
        body = match.json()
        assert set(body["left"]) == set(body["right"]) == {"text"}  # blind: the texts only
        assert not {"system", "model", "condition", "position"} & set(body)
        posted = client.post(
            f"/api/v1/matches/{body['id']}/choice/", {"choice": choose(body, len(shown))}, format="json"
        )
        assert posted.status_code == 200, posted.json()
        shown.append(body)
    assert client.get(f"/api/v1/queries/{query['id']}/").json()["status"] == "ranked"
    return query, shown


def _better(body: dict, _number: int) -> str:
    """The annotator's taste: the lower system number wins (system 0 is the best)."""
    left, right = (system_number(body[side]["text"]) for side in ("left", "right"))
    return "left" if left < right else "right"


def test_a_12_system_adaptive_study_plays_to_the_end_and_analyses_with_a_strength_per_system(tmp_path):
    study = prewritten_adaptive_study(12, items=3, constrained_first_round=True, queries_per_annotator=2)
    annotators = [api_annotator(study) for _ in range(3)]
    questions = 0
    for round_number in range(2):
        for client, pid in annotators:
            query, shown = _play(client, pid, f"t{round_number}", _better)
            questions += 1
            # As many comparisons as a bracket of 12 plays (11), numbered as shown, no pair twice.
            assert [m["label"] for m in shown] == [f"pair{k}" for k in range(1, 12)]
            pairs = [frozenset(system_number(m[s]["text"]) for s in ("left", "right")) for m in shown]
            assert len(set(pairs)) == 11
            # The constrained first round: each summary's first comparison is with the other condition (even
            # system numbers are persona, odd ones generic).
            seen: set[int] = set()
            for pair in pairs:
                first, second = sorted(pair)
                if first not in seen or second not in seen:
                    assert first % 2 != second % 2, (pairs, pair)
                seen |= pair
    matches = Match.objects.filter(bracket__query__participation__study=study)
    assert matches.count() == questions * 11 and not matches.exclude(status="answered").exists()
    # Every summary of a question has its own position, none a bye; placement is random both ways.
    for query in Query.objects.filter(participation__study=study):
        assert sorted(c.position for c in query.candidates.all()) == sorted("ABCDEFGHIJKL")
        assert query.bracket.byes == [] and query.bracket.design == "adaptive" and query.bracket.budget == 11
    sides = Counter(j.choice for j in Judgment.objects.filter(match__in=matches))
    assert sides["left"] > 0 and sides["right"] > 0
    # The tallies the next pair was chosen from hold every decided answer.
    tallied = sum(t.first_wins + t.second_wins + t.ties for t in PairTally.objects.filter(study=study))
    assert tallied == questions * 11

    out = tmp_path / "out"
    printed = io.StringIO()
    call_command("analyze", "--study", study.slug, "--out", str(out), "--resamples", "200", stdout=printed)
    report = json.loads((out / "report.json").read_text())
    assert report["estimand"]["design"] == "adaptive" and report["estimand"]["headline"] == "bradley_terry"
    assert "estimand (adaptive design)" in printed.getvalue()
    assert [s["stage"] for s in report["stages"]] == ["adaptive"]
    strengths = report["bradley_terry"]["systems"]
    assert len(strengths) == 12
    # The annotators always preferred the lower number: the strengths put system 0 first and 11 last.
    order = [int(s["system"].split("-")[2]) for s in strengths]
    assert order[0] == 0 and order[-1] == 11
    html = (out / "report.html").read_text()
    assert html.index("Bradley-Terry strengths of systems") < html.index("<h2>Win rates</h2>")
    manifest = json.loads((out / "comparisons.manifest.json").read_text())
    assert manifest["design"] == "adaptive" and manifest["stages"] == {"adaptive": questions * 11}


def test_neither_retires_both_summaries_for_the_rest_of_the_question():
    study = prewritten_adaptive_study(6, items=1)
    client, pid = api_annotator(study)
    retired: set[int] = set()

    def neither_first(body: dict, number: int) -> str:
        pair = {system_number(body[s]["text"]) for s in ("left", "right")}
        assert not pair & retired, "a summary judged 'neither' came back"
        if number == 0:
            retired.update(pair)
            return "neither"
        return _better(body, number)

    _query, shown = _play(client, pid, "t", neither_first)
    # 5 comparisons asked (6 systems), none of them with the two retired summaries after the first.
    assert len(shown) == 5 and len(retired) == 2
    tallied = sum(t.first_wins + t.second_wins for t in PairTally.objects.filter(study=study))
    assert tallied == 4  # "neither" says both miss the need, not which is better: it is not tallied


def test_the_study_s_comparisons_per_question_and_an_attention_check_keep_the_numbering():
    study = prewritten_adaptive_study(5, items=2, adaptive_matches=7, check_share=1.0)
    first, pid = api_annotator(study)
    _play(first, pid, "warm-up", _better)  # a first question: the second has another's summary for its check
    client, pid = api_annotator(study)
    query, shown = _play(client, pid, "t", _better)
    matches = list(Match.objects.filter(bracket__query_id=query["id"]).order_by("round", "index"))
    checks = [m for m in matches if m.check_expected]
    assert len(checks) == 1 and len(matches) == 8  # 7 comparisons and the check
    # Labels as shown, the check among them, none twice: nothing in the labels tells the check apart.
    assert [m["label"] for m in shown] == [f"pair{k}" for k in range(1, 9)]


def test_a_preview_s_answers_do_not_move_the_tallies():
    study = prewritten_adaptive_study(4, items=1)
    owner = get_user_model().objects.create_superuser("owner", "owner@example.org", "pw")
    participation = participation_preview_start(study=study, by=owner)
    persona_save(participation=participation, data=PERSONA)
    query = prewritten_query_next(participation=participation, client_token="p")
    while (match := Match.objects.filter(bracket__query=query, status="pending").first()) is not None:
        judgment_record(match=match, choice="left", by=participation)
    assert Judgment.objects.filter(match__bracket__query=query).count() == 3
    assert not PairTally.objects.filter(study=study).exists()


def test_the_next_pair_is_one_whose_order_is_still_in_doubt():
    """Tallies from earlier answers: systems 0 > 1 > 2 > 3 settled by lopsided records, 4 and 5 never compared.
    Every new question's first pair brings in 4 or 5."""
    study = prewritten_adaptive_study(6, items=20, queries_per_annotator=20)
    systems = list(study.systems.order_by("label"))
    for i in range(4):
        for j in range(i + 1, 4):
            PairTally.objects.create(study=study, first=systems[i], second=systems[j], first_wins=40)
    participation = join(study)
    for n in range(10):
        query = prewritten_query_next(participation=participation, client_token=f"q{n}")
        match = Match.objects.get(bracket__query=query, status="pending")
        pair = {match.left.system.label, match.right.system.label}
        assert pair & {"sys-04", "sys-05"}, pair
        Query.objects.filter(pk=query.pk).update(status=Query.Status.RANKED)  # on to the next question


def test_the_design_is_a_setting_checked_by_field_and_frozen_once_played(django_capture_on_commit_callbacks):
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    body = {"slug": "many", "title": "Many", "design": "adaptive", "adaptive_matches": 7}
    created = client.post("/api/v1/admin/studies/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["design"] == "adaptive" and created.json()["adaptive_matches"] == 7
    # The default design has 4 systems: 6 pairs, so 7 comparisons per question cannot open.
    opened = client.post("/api/v1/admin/studies/many/status/", {"status": "open"}, format="json")
    assert opened.status_code == 400
    assert opened.json()["extra"]["fields"]["adaptive_matches"] == [
        "Comparisons per question can be at most 6 with 4 systems: every pair once."
    ]
    for value, field in (("swiss", "design"), (0, "adaptive_matches"), (1000, "adaptive_matches")):
        refused = client.patch("/api/v1/admin/studies/many/", {field: value}, format="json")
        assert refused.status_code == 400 and field in refused.json()["extra"]["fields"], refused.json()
    assert client.patch("/api/v1/admin/studies/many/", {"adaptive_matches": None}, format="json").status_code == 200
    assert client.post("/api/v1/admin/studies/many/status/", {"status": "open"}, format="json").status_code == 200
    default = StudyFactory(slug="plain")
    assert default.design == Study.Design.BRACKET  # the bracket stays the default

    # Played: a question's summaries exist, so the design can no longer change.
    with django_capture_on_commit_callbacks(execute=True):
        client_a, pid = api_annotator(Study.objects.get(slug="many"))
        client_a.post(f"/api/v1/participations/{pid}/queries/", {"text": "night shifts and sleep"}, format="json")
    assert Query.objects.get(participation_id=pid).bracket.budget == 3  # 4 systems: as many as a bracket
    frozen = client.patch("/api/v1/admin/studies/many/", {"design": "bracket"}, format="json")
    assert frozen.status_code == 409 and "design can no longer change" in frozen.json()["extra"]["fields"]["design"][0]


@pytest.mark.timeout(120)
def test_annotators_answering_at_the_same_moment_all_reach_the_tallies(transactional_db: None) -> None:
    study = prewritten_adaptive_study(8, items=1)
    participations = [join(study) for _ in range(10)]
    queries = [prewritten_query_next(participation=p, client_token="t") for p in participations]
    errors: list[BaseException] = []

    def answer(query: Query, barrier: threading.Barrier) -> None:
        try:
            for _ in range(7):
                match = Match.objects.select_related("bracket__query__participation").get(
                    bracket__query=query, status="pending"
                )
                connection.close()  # back to the pool while waiting: it holds fewer connections than threads
                barrier.wait(timeout=60)  # every annotator's answer at once, comparison after comparison
                judgment_record(match=match, choice="left", by=match.bracket.query.participation)
                connection.close()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    barrier = threading.Barrier(len(queries))
    threads = [threading.Thread(target=answer, args=(query, barrier)) for query in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not errors, errors
    assert Query.objects.filter(pk__in=[q.pk for q in queries], status=Query.Status.RANKED).count() == len(queries)
    # No answer lost from the tallies: each pair's wins are its judgments' (all decided: "left").
    expected: Counter[tuple[int, int]] = Counter()
    for judgment in Judgment.objects.filter(match__bracket__query__in=queries).select_related(
        "winner", "match__left", "match__right"
    ):
        match = judgment.match
        loser = match.right if judgment.winner_id == match.left_id else match.left
        expected[(judgment.winner.system_id, loser.system_id)] += 1
    stored: Counter[tuple[int, int]] = Counter()
    for tally in PairTally.objects.filter(study=study):
        stored[(tally.first_id, tally.second_id)] += tally.first_wins
        stored[(tally.second_id, tally.first_id)] += tally.second_wins
    assert +stored == +expected and sum(expected.values()) == 70


def test_the_admin_form_sets_the_adaptive_design_and_explains_a_refusal(client):
    client.force_login(get_user_model().objects.create_superuser("boss", "boss@example.org", "pw"))
    study = StudyFactory(status=Study.Status.DRAFT)  # the default design: 4 systems, 6 pairs
    page = client.get(_change_url(study)).content.decode()
    assert 'name="design"' in page and 'name="adaptive_matches"' in page
    too_many = _form_data(study, status="open", design="adaptive", adaptive_matches="9")
    refused = client.post(_change_url(study), too_many).content.decode()
    assert "Comparisons per question can be at most 6 with 4 systems: every pair once." in refused
    study.refresh_from_db()
    assert (study.status, study.design) == (Study.Status.DRAFT, Study.Design.BRACKET)
    saved = client.post(_change_url(study), _form_data(study, status="open", design="adaptive", adaptive_matches="5"))
    assert saved.status_code == 302
    study.refresh_from_db()
    assert (study.status, study.design, study.adaptive_matches) == (Study.Status.OPEN, Study.Design.ADAPTIVE, 5)


def test_identical_summaries_under_the_tie_policy_are_tied_at_once_and_the_next_pair_asked():
    study = prewritten_adaptive_study(3, items=1, adaptive_matches=3, identical_policy="tie")
    same = "Nurses on nights sleep an hour less than on days."
    PrewrittenOutput.objects.filter(system__study=study, system__label__in=["sys-00", "sys-01"]).update(text=same)
    client, pid = api_annotator(study)
    _query, shown = _play(client, pid, "t", lambda body, number: "left")
    # Every pair once: the identical one recorded as a tie without asking, the other two shown.
    assert len(shown) == 2 and all(m["left"]["text"] != m["right"]["text"] for m in shown)
    judgments = Judgment.objects.filter(match__bracket__query__participation__study=study)
    assert sorted(j.choice for j in judgments) == ["left", "left", "tie"]
    tie = judgments.get(choice="tie")
    assert tie.automatic and tie.winner_id is None  # nobody goes on in the adaptive design
    tallies = PairTally.objects.filter(study=study)
    assert sum(t.ties for t in tallies) == 1 and sum(t.first_wins + t.second_wins for t in tallies) == 2
