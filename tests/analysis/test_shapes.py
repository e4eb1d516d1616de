"""Every study shape the platform runs (2, 4, 8 and 16 systems) played end to end through the public API
(admin creates and opens the study and invites; annotators accept, describe themselves, ask, answer every
match) and analysed with `manage.py analyze`, as a researcher would."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from analysis.selectors import comparison_frame
from annotation.models import Bracket, Match
from studies.models import Study
from tests.annotation.factories import PERSONA
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db

OFFLINE = [
    ("extractive", "extractive-centroid"),
    ("extractive", "extractive-mmr"),
    ("baseline", "lead-k"),
    ("baseline", "textrank"),
]


def _systems(n: int, base_url: str) -> list[dict] | None:
    """n systems: the offline models crossed with both conditions, then model-server models for 16."""
    if n == 4:
        return None  # the default design
    models = [(backend, model, {}) for backend, model in OFFLINE]
    models += [("openai", f"standin-{i}", {"base_url": base_url, "use_cache": False}) for i in range(1, 5)]
    cells = [(m, c) for m in models for c in ("persona", "generic")][:n]
    return [
        {
            "label": f"{model}-{condition}",
            "model_name": model,
            "condition": condition,
            "generation_backend": backend,
            "backend_settings": settings,
        }
        for (backend, model, settings), condition in cells
    ]


def _admin() -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser(f"root{Study.objects.count()}", "", "pw"))
    return client


def _annotate(token: str, *, first_choice: str, capture) -> int:
    """Accept an invitation, describe oneself, ask one question and answer every match; returns matches answered."""
    accepted = APIClient().post(f"/api/v1/invitations/{token}/accept/", {"consent": True}, format="json")
    assert accepted.status_code == 201, accepted.json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {accepted.json()['token']}")
    pid = accepted.json()["id"]
    assert client.put(f"/api/v1/participations/{pid}/persona/", PERSONA, format="json").status_code == 200
    with capture(execute=True):
        asked = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "night shifts and sleep"}, format="json")
    assert asked.status_code == 201, asked.json()
    qid = asked.json()["id"]
    assert client.get(f"/api/v1/queries/{qid}/").json()["status"] == "ready"
    answered = 0
    while (match := client.get(f"/api/v1/queries/{qid}/current-match/")).status_code == 200:
        choice = first_choice if answered == 0 else ("left", "right")[answered % 2]
        posted = client.post(f"/api/v1/matches/{match.json()['id']}/choice/", {"choice": choice}, format="json")
        assert posted.status_code == 200, posted.json()
        answered += 1
    assert client.get(f"/api/v1/queries/{qid}/").json()["status"] == "ranked"
    return answered


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_every_shape_plays_and_analyses(n, tmp_path, django_capture_on_commit_callbacks):
    rounds = int(math.log2(n))
    with openai_standin() as server:
        admin = _admin()
        body = {"slug": f"shape-{n}", "title": f"{n} systems", "queries_per_annotator": 1}
        if (systems := _systems(n, server.base_url)) is not None:
            body["systems"] = systems
        if n == 8:
            body["constrained_first_round"] = True
        created = admin.post("/api/v1/admin/studies/", body, format="json")
        assert created.status_code == 201, created.json()
        assert len(created.json()["systems"]) == n
        opened = admin.post(f"/api/v1/admin/studies/shape-{n}/status/", {"status": "open"}, format="json")
        assert opened.status_code == 200, opened.json()
        invitations = admin.post(f"/api/v1/admin/studies/shape-{n}/invitations/", {"count": 2}, format="json").json()
        # One annotator decides every match: n - 1 of them. The other says "neither" to the first match
        # (round 1, A vs B): each later match that its winner would have played is skipped, one per round
        # after the first, so n - 1 - (rounds - 1) are played.
        full = _annotate(invitations[0]["token"], first_choice="left", capture=django_capture_on_commit_callbacks)
        cut = _annotate(invitations[1]["token"], first_choice="neither", capture=django_capture_on_commit_callbacks)
    assert (full, cut) == (n - 1, n - rounds)
    assert Match.objects.filter(bracket__query__participation__study__slug=f"shape-{n}", status="skipped").count() == (
        rounds - 1
    )

    out = tmp_path / "out"
    printed = io.StringIO()
    call_command("analyze", "--study", f"shape-{n}", "--out", str(out), "--resamples", "200", stdout=printed)
    report = json.loads((out / "report.json").read_text())
    # Two annotators are few clusters: small-sample inference, said on the command line and in the report.
    assert "warning: few annotators: 2 (fewer than 40)" in printed.getvalue()
    assert report["win_rates"]["method"] == "cr2-t" and report["warnings"][0].startswith("few annotators: 2")
    expected_stages = [f"round{r}" for r in range(1, rounds)] + ["final"]
    assert [s["stage"] for s in report["stages"]] == expected_stages
    assert report["provenance"]["n_rows"] == full + cut
    # Matches per stage: n / 2**r in round r per bracket; the "neither" bracket loses one per later round.
    per_stage = {s["stage"]: s["matches"] for s in report["stages"]}
    for r, stage in enumerate(expected_stages, start=1):
        assert per_stage[stage] == 2 * (n // 2**r) - (1 if r > 1 else 0), stage
    with (out / "tables" / "stages.csv").open() as fh:
        assert [row["stage"] for row in csv.DictReader(fh)] == expected_stages

    # Per-variant rates exist for every system in the first stage, and for later stages out of earlier wins.
    variants = [r for r in report["win_rates"]["rows"] if r["statistic"] == "variant"]
    first = {r["group"] for r in variants if r["stage"] == expected_stages[0]}
    assert len(first) == n
    assert sum(r["n"] for r in variants if r["stage"] == expected_stages[0]) == per_stage[expected_stages[0]] * 2
    for earlier, later in zip(expected_stages, expected_stages[1:], strict=False):
        for group in first:
            wins = next(r["wins"] for r in variants if (r["group"], r["stage"]) == (group, earlier))
            assert next(r["n"] for r in variants if (r["group"], r["stage"]) == (group, later)) == wins
    html = (out / "report.html").read_text()
    assert "<h2>Stages</h2>" in html and ", ".join(expected_stages) in html
    manifest = json.loads((out / "comparisons.manifest.json").read_text())
    assert manifest["stages"] == per_stage

    frame = comparison_frame(study=Study.objects.get(slug=f"shape-{n}"))
    if n == 8:
        first_round = frame[frame["stage"] == "round1"]
        assert len(first_round) == 8
        assert (first_round["left_condition"] != first_round["right_condition"]).all()


@pytest.mark.parametrize("n", [3, 6, 12])
def test_a_study_of_any_size_plays_with_byes_and_analyses(n, tmp_path, django_capture_on_commit_callbacks):
    rounds = math.ceil(math.log2(n))
    places = 2**rounds
    slug = f"byes-{n}"
    with openai_standin() as server:
        admin = _admin()
        body = {
            "slug": slug,
            "title": f"{n} systems",
            "queries_per_annotator": 1,
            "systems": _systems(n, server.base_url),
        }
        # 6 and 12 systems have as many persona as generic ones: their first round is constrained too.
        body["constrained_first_round"] = n % 2 == 0
        created = admin.post("/api/v1/admin/studies/", body, format="json")
        assert created.status_code == 201, created.json()
        opened = admin.post(f"/api/v1/admin/studies/{slug}/status/", {"status": "open"}, format="json")
        assert opened.status_code == 200, opened.json()
        invitations = admin.post(f"/api/v1/admin/studies/{slug}/invitations/", {"count": 2}, format="json").json()
        played = [
            _annotate(invitation["token"], first_choice=choice, capture=django_capture_on_commit_callbacks)
            for invitation, choice in zip(invitations, ("left", "right"), strict=True)
        ]
    # Single elimination: n - 1 matches decide a winner among n, byes or not; a bye is no match.
    assert played == [n - 1, n - 1]
    study = Study.objects.get(slug=slug)
    matches = Match.objects.filter(bracket__query__participation__study=study)
    assert matches.count() == 2 * (n - 1) and not matches.exclude(status="answered").exists()
    byes: dict[int, set[int]] = {}
    for bracket in Bracket.objects.filter(query__participation__study=study):
        assert len(bracket.byes) == places - n
        byes[bracket.pk] = set(bracket.bye_candidates().values())
        first_round = {c for m in matches.filter(bracket=bracket, round=1) for c in (m.left_id, m.right_id)}
        assert not first_round & byes[bracket.pk]

    out = tmp_path / "out"
    call_command("analyze", "--study", slug, "--out", str(out), "--resamples", "200", stdout=io.StringIO())
    report = json.loads((out / "report.json").read_text())
    expected_stages = [f"round{r}" for r in range(1, rounds)] + ["final"]
    assert [s["stage"] for s in report["stages"]] == expected_stages
    per_stage = {s["stage"]: s["matches"] for s in report["stages"]}
    # Byes are no comparisons: round 1 holds the n - places/2 matches played, in every table and export.
    assert per_stage["round1"] == 2 * (n - places // 2)
    assert report["provenance"]["n_rows"] == 2 * (n - 1)
    frame = comparison_frame(study=study)
    assert len(frame) == 2 * (n - 1)
    for row in frame[frame["stage"] == "round1"].itertuples():
        assert not {row.left_candidate, row.right_candidate} & byes[row.bracket_id]
    with (out / "comparisons.csv").open() as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == 2 * (n - 1)

    # A win-rate row for every system; every rate a share of the matches the system reached.
    variants = [r for r in report["win_rates"]["rows"] if r["statistic"] == "variant"]
    systems = {f"{s['model_name']} / {s['condition']}" for s in created.json()["systems"]}
    assert {r["group"] for r in variants} == systems
    assert all(r["wins"] <= r["n"] for r in variants if r["n"])
    # Every match decided: a stage's denominators add up to its places, byes into round 2 included.
    for stage in expected_stages:
        assert sum(r["n"] for r in variants if r["stage"] == stage) == 2 * per_stage[stage], stage
    # Bradley-Terry has a strength for every system too: each played at least one decided match.
    assert len(report["bradley_terry"]["systems"]) == n
