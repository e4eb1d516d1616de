"""Study shapes at design time: which system counts a bracket can run, the constrained first round
(every first-round match one persona and one generic system) as a setting, and the draw that honours it."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from annotation.models import Bracket, Candidate, Match, Query
from annotation.selectors.tournament import match_progress
from annotation.services.query import query_submit
from annotation.services.tournament import bracket_create, judgment_record
from studies.models import Study
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

MODELS = [
    ("extractive", "extractive-centroid"),
    ("extractive", "extractive-mmr"),
    ("baseline", "lead-k"),
    ("baseline", "textrank"),
]


def _systems(cells: list[tuple[int, str]]) -> list[dict]:
    """Systems for (model index, condition) cells of the offline models."""
    return [
        {
            "label": f"{MODELS[m][1]}-{condition}",
            "model_name": MODELS[m][1],
            "generation_backend": MODELS[m][0],
            "condition": condition,
        }
        for m, condition in cells
    ]


EIGHT = _systems([(m, c) for m in range(4) for c in ("persona", "generic")])


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    return client


def _design(count: int) -> list[dict]:
    """`count` systems: the eight offline cells first, then model-server systems (never called here)."""
    systems = EIGHT[:count]
    for j in range(count - len(systems)):
        systems.append(
            {
                "label": f"standin-{j}",
                "model_name": f"standin-{j // 2}",
                "generation_backend": "openai",
                "backend_settings": {"base_url": "http://127.0.0.1:9"},
                "condition": ("persona", "generic")[j % 2],
            }
        )
    return systems


@pytest.mark.parametrize("count", [1, 33])
def test_opening_a_design_outside_2_to_32_systems_names_the_allowed_sizes(api, count):
    systems = _design(count)
    created = api.post("/api/v1/admin/studies/", {"slug": "odd", "title": "Odd", "systems": systems}, format="json")
    assert created.status_code == 201, created.json()
    opened = api.post("/api/v1/admin/studies/odd/status/", {"status": "open"}, format="json")
    assert opened.status_code == 400
    assert opened.json()["extra"]["fields"]["systems"] == [
        f"A single-elimination bracket needs 2 to 32 systems; this study has {count}."
    ]
    assert Study.objects.get(slug="odd").status == Study.Status.DRAFT


@pytest.mark.parametrize("count", [2, 3, 6, 12, 32])
def test_any_count_from_2_to_32_opens(api, count):
    created = api.post(
        "/api/v1/admin/studies/", {"slug": "any", "title": "Any", "systems": _design(count)}, format="json"
    )
    assert created.status_code == 201, created.json()
    opened = api.post("/api/v1/admin/studies/any/status/", {"status": "open"}, format="json")
    assert opened.status_code == 200, opened.json()


def test_an_eight_system_offline_design_opens(api):
    created = api.post("/api/v1/admin/studies/", {"slug": "eight", "title": "Eight", "systems": EIGHT}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["constrained_first_round"] is False
    opened = api.post("/api/v1/admin/studies/eight/status/", {"status": "open"}, format="json")
    assert opened.status_code == 200, opened.json()


def test_a_constrained_first_round_needs_as_many_persona_as_generic_systems(api):
    three_to_one = _systems([(0, "persona"), (0, "generic"), (1, "persona"), (2, "persona")])
    body = {"slug": "lopsided", "title": "L", "systems": three_to_one, "constrained_first_round": True}
    assert api.post("/api/v1/admin/studies/", body, format="json").status_code == 201
    opened = api.post("/api/v1/admin/studies/lopsided/status/", {"status": "open"}, format="json")
    assert opened.status_code == 400
    assert opened.json()["extra"]["fields"]["constrained_first_round"] == [
        "A constrained first round pairs a persona system with a generic one in every first-round match, so it "
        "needs as many persona systems as generic ones; this design has 3 persona and 1 generic."
    ]
    # Without the constraint the same design opens.
    unconstrained = api.patch("/api/v1/admin/studies/lopsided/", {"constrained_first_round": False}, format="json")
    assert unconstrained.status_code == 200
    assert api.post("/api/v1/admin/studies/lopsided/status/", {"status": "open"}, format="json").status_code == 200
    not_bool = api.patch("/api/v1/admin/studies/lopsided/", {"constrained_first_round": "maybe"}, format="json")
    assert not_bool.status_code == 400 and "constrained_first_round" in not_bool.json()["extra"]["fields"]


def test_the_first_round_rule_is_frozen_once_summaries_exist(api, django_capture_on_commit_callbacks):
    StudyFactory(slug="frozen", constrained_first_round=True)
    with django_capture_on_commit_callbacks(execute=True):
        query_submit(participation=join(Study.objects.get(slug="frozen")), text="sleep", client_token="")
    response = api.patch("/api/v1/admin/studies/frozen/", {"constrained_first_round": False}, format="json")
    assert response.status_code == 409
    assert "first-round rule can no longer change" in response.json()["extra"]["fields"]["constrained_first_round"][0]
    assert Study.objects.get(slug="frozen").constrained_first_round is True


def _redraw(query: Query, seed: int) -> list[tuple[str, str]]:
    """Draw the query's bracket afresh with `seed`; its first-round pairs as (left condition, right condition)."""
    Bracket.objects.filter(query=query).delete()
    Candidate.objects.filter(query=query).update(position="")
    Query.objects.filter(pk=query.pk).update(status=Query.Status.GENERATING)
    bracket = bracket_create(query=query, seed=seed)
    return [
        (
            m.left.condition,
            m.right.condition,
            m.left.position + m.right.position,
            m.left.system_label,
            m.right.system_label,
        )
        for m in Match.objects.filter(bracket=bracket, round=1).select_related("left", "right")
    ]


@pytest.mark.parametrize("constrained", [True, False])
def test_every_first_round_pairing_over_many_draws(django_capture_on_commit_callbacks, constrained):
    study = StudyFactory(systems=EIGHT, constrained_first_round=constrained)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=join(study), text="night shifts", client_token="")
    assert Query.objects.get(pk=query.pk).status == Query.Status.READY
    draws = 100
    mixed = 0
    meetings: Counter[frozenset[str]] = Counter()
    first_letter: Counter[str] = Counter()
    for seed in range(draws):
        pairs = _redraw(query, seed)
        assert len(pairs) == 4
        assert sorted("".join(sorted(p[2])) for p in pairs) == ["AB", "CD", "EF", "GH"]
        mixed += sum(left != right for left, right, *_ in pairs)
        for left, right, letters, left_label, right_label in pairs:
            meetings[frozenset((left_label, right_label))] += 1
            first_letter[left if letters[0] < letters[1] else right] += 1
    if constrained:
        assert mixed == 4 * draws  # every first-round match, every draw
        # Which persona system meets which generic one is random: all 16 pairings occur, none same-condition.
        assert len(meetings) == 16
        # And the persona side does not always take the pair's first letter (A, C, E, G).
        assert 0.35 < first_letter["persona"] / (4 * draws) < 0.65
    else:
        # Unconstrained, a match is mixed with probability 4/7 (the partner is one of the 7 others, 4 of
        # them of the other condition): 400 matches, expected 229; same-condition matches do occur.
        assert 0.45 < mixed / (4 * draws) < 0.70
        assert mixed < 4 * draws


def test_admin_form_sets_the_constrained_first_round_and_explains_a_refusal(client):
    from tests.studies.test_study_rules import _change_url, _form_data

    client.force_login(get_user_model().objects.create_superuser("boss", "boss@example.org", "pw"))
    study = StudyFactory(status=Study.Status.DRAFT)  # the default 2x2 design: 2 persona, 2 generic
    page = client.get(_change_url(study)).content.decode()
    assert 'name="constrained_first_round"' in page
    lead = {"condition": "persona", "model_name": "lead-k", "generation_backend": "baseline"}
    lopsided = _form_data(study, status="open", constrained_first_round="on", systems=[{}, lead, {}, {}])
    refused = client.post(_change_url(study), lopsided).content.decode()
    assert "needs as many persona systems as generic ones; this design has 3 persona and 1 generic" in refused
    study.refresh_from_db()
    assert (study.status, study.constrained_first_round) == (Study.Status.DRAFT, False)
    saved = client.post(_change_url(study), _form_data(study, status="open", constrained_first_round="on"))
    assert saved.status_code == 302
    study.refresh_from_db()
    assert (study.status, study.constrained_first_round) == (Study.Status.OPEN, True)


def _draw_again(query: Query, seed: int) -> Bracket:
    Bracket.objects.filter(query=query).delete()
    Candidate.objects.filter(query=query).update(position="")
    Query.objects.filter(pk=query.pk).update(status=Query.Status.GENERATING)
    return bracket_create(query=query, seed=seed)


@pytest.mark.parametrize(("count", "constrained"), [(3, False), (6, False), (6, True)])
def test_byes_fill_the_bracket_at_random_from_the_seed_and_never_meet_each_other(
    django_capture_on_commit_callbacks, count, constrained
):
    study = StudyFactory(systems=EIGHT[:count], constrained_first_round=constrained)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=join(study), text="night shifts", client_token="")
    candidates = {c.pk: c for c in Candidate.objects.filter(query=query)}
    places = 4 if count == 3 else 8  # first-round places: the next power of two
    bye_places: Counter[int] = Counter()
    for seed in range(40):
        bracket = _draw_again(query, seed)
        byes = bracket.bye_candidates()
        first_round = list(Match.objects.filter(bracket=bracket, round=1).select_related("left", "right"))
        # Every place not filled by a match holds one bye: no two byes meet, and a bye is no match.
        assert len(byes) == places - count and len(first_round) == count - places // 2
        assert set(byes) | {m.index for m in first_round} == set(range(places // 2))
        playing = [c for m in first_round for c in (m.left_id, m.right_id)]
        assert sorted(playing + list(byes.values())) == sorted(candidates)
        bye_places.update(byes)
        # Positions are the candidates' in bracket order, byes taking none; labels name them.
        positions = sorted(Candidate.objects.filter(query=query).values_list("position", flat=True))
        assert positions == [chr(ord("A") + i) for i in range(count)]
        for m in first_round:
            assert m.label == "round1_" + "".join(sorted(m.left.position + m.right.position)).lower()
        if constrained:
            assert all(m.left.condition != m.right.condition for m in first_round)
            conditions = Counter(candidates[c].condition for c in byes.values())
            assert conditions["persona"] == conditions["generic"]
        # Two byes side by side meet in round 2 at once, waiting for an answer.
        for index in byes:
            if index % 2 == 0 and index + 1 in byes:
                second = Match.objects.get(bracket=bracket, round=2, index=index // 2)
                assert {second.left_id, second.right_id} == {byes[index], byes[index + 1]}
                assert second.status == Match.Status.PENDING
    # The byes' places vary with the seed: every first-round place had one in some draw.
    assert set(bye_places) == set(range(places // 2))
    # And the same seed draws the same bracket.
    first = _draw_again(query, 7)
    first_pairs = list(Match.objects.filter(bracket=first).values_list("round", "index", "left_id", "right_id"))
    again = _draw_again(query, 7)
    assert again.byes == first.byes
    assert list(Match.objects.filter(bracket=again).values_list("round", "index", "left_id", "right_id")) == (
        first_pairs
    )


@pytest.mark.parametrize("count", [3, 5, 6])
def test_the_comparison_count_an_annotator_sees_leaves_out_the_byes(django_capture_on_commit_callbacks, count):
    study = StudyFactory(systems=EIGHT[:count])
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="night shifts", client_token="")
    answered = 0
    # "Comparison k of n - 1" from the first page to the last: n - 1 matches decide a bracket of n.
    while match := Match.objects.filter(bracket__query=query, status="pending").order_by("round", "index").first():
        assert match_progress(match=match) == (answered, count - 1)
        judgment_record(match=match, choice="left", by=participation)
        answered += 1
    assert answered == count - 1
    assert Query.objects.get(pk=query.pk).status == Query.Status.RANKED


def test_positions_and_labels_of_brackets_up_to_32():
    from annotation.positions import position_name, span_label

    names = [position_name(i) for i in range(32)]
    assert names[:3] == ["A", "B", "C"] and names[25:] == ["Z", "AA", "AB", "AC", "AD", "AE", "AF"]
    assert len(set(names)) == 32
    # Up to 16 systems the labels are those of every earlier export; longer spans name their ends.
    assert span_label(names[:2]) == "ab" and span_label(names[8:16]) == "ijklmnop"
    assert span_label(names[:16]) == "a-p" and span_label(names[24:28]) == "y-ab"
    longest = max(len(f"round4_{span_label(names[i : i + 16])}") for i in range(0, 32, 16))
    assert longest <= Match._meta.get_field("label").max_length
