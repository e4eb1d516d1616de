"""Studies of pre-written outputs: the importer's checks on hand-made files, two annotators ranking a 3-system,
4-item study through the API (every judgment lands, the items balanced, the systems never named), and the
analysis and exports of that study reading each output's system."""

from __future__ import annotations

import csv
import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from annotation.models import Judgment, PrewrittenAssignment, PrewrittenItem, PrewrittenOutput, Query
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import PERSONA, StudyFactory, api_annotator

pytestmark = pytest.mark.django_db

SYSTEMS = [
    {"label": "alpha", "model_name": "lab-model-a", "condition": "generic", "generation_backend": "prewritten"},
    {"label": "beta", "model_name": "lab-model-b", "condition": "generic", "generation_backend": "prewritten"},
    {"label": "gamma", "model_name": "lab-model-c", "condition": "generic", "generation_backend": "prewritten"},
]
ITEMS = {
    "doc1": "Night shifts shorten nurses' sleep by about an hour on average.",
    "doc2": "Rotating schedules raise medication errors in the first week of a rotation.",
    "doc3": "Napping during long shifts restores alertness for two to three hours.",
    "doc4": "Bright light at night shifts the circadian clock within three days.",
}
# What each system wrote: the words say who wrote it, so the test (as an annotator) can prefer one system's text
# while the pages and the API show only the texts.
STYLE = {
    "alpha": "A careful summary: {}",
    "beta": "Summary in brief, {}",
    "gamma": "Hard to say; maybe {}",
}


def _rows(items: dict[str, str] = ITEMS, systems: list[str] | None = None) -> list[dict[str, str]]:
    return [
        {
            "item_id": key,
            "system": label,
            "output": STYLE[label].format(text.lower()),
            "source": text,
            "prompt": f"What does study {key} find?",
        }
        for key, text in items.items()
        for label in systems or list(STYLE)
    ]


def _csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _import(slug: str, path: Path, **options) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Run the command: (its output, the messages it wrote about the file); CommandError propagates."""
    from io import StringIO

    out, err = StringIO(), StringIO()
    try:
        call_command("import_outputs", slug, str(path), stdout=out, stderr=err, **options)
    except CommandError as error:
        error.stderr_text = err.getvalue()  # type: ignore[attr-defined]
        raise
    return out.getvalue(), err.getvalue()


def _refusal(slug: str, path: Path, **options) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError) as raised:
        _import(slug, path, **options)
    return raised.value.returncode, raised.value.stderr_text  # type: ignore[attr-defined]


@pytest.fixture
def study():
    return StudyFactory(slug="pre", systems=SYSTEMS)


# --- the importer -----------------------------------------------------------------------------------------------


def test_a_complete_file_imports_and_the_same_file_again_changes_nothing(study, tmp_path):
    path = _csv(tmp_path / "outputs.csv", _rows())
    out, _ = _import("pre", path)
    assert "4 item(s) created" in out and "12 output(s) created" in out
    stored = PrewrittenOutput.objects.get(item__key="doc3", system__label="beta")
    assert stored.text == "Summary in brief, napping during long shifts restores alertness for two to three hours."
    assert PrewrittenItem.objects.get(key="doc3").prompt == "What does study doc3 find?"

    again, _ = _import("pre", path)
    assert "Nothing changed" in again and "12 unchanged" in again
    assert PrewrittenOutput.objects.count() == 12 and PrewrittenItem.objects.count() == 4


def test_an_item_missing_a_system_is_named_with_its_lines_and_nothing_is_imported(study, tmp_path):
    rows = [r for r in _rows() if not (r["item_id"] == "doc2" and r["system"] == "gamma")]
    code, messages = _refusal("pre", _csv(tmp_path / "short.csv", rows))
    assert code == 2
    # doc2's rows are the file's lines 5 and 6 (line 1 is the header).
    assert "line 5, field system: item doc2 (lines 5, 6) has no output of system(s) gamma" in messages
    assert not PrewrittenItem.objects.exists()


def test_an_unknown_system_and_a_duplicate_are_named_by_line_and_field(study, tmp_path):
    rows = _rows()
    rows.append({**rows[0], "output": "another alpha text"})  # line 14: doc1/alpha again
    rows.append({**rows[1], "system": "delta"})  # line 15
    code, messages = _refusal("pre", _csv(tmp_path / "bad.csv", rows))
    assert code == 2
    assert "line 14, field system: item doc1 has an output of alpha already (line 2)" in messages
    assert "line 15, field system: unknown system 'delta' (the study's: alpha, beta, gamma)" in messages
    assert not PrewrittenOutput.objects.exists()


def test_an_empty_output_and_a_row_without_an_item_are_refused_by_field(study, tmp_path):
    rows = _rows()
    rows[4]["output"] = "  "  # line 6
    rows[7]["item_id"] = ""  # line 9
    code, messages = _refusal("pre", _csv(tmp_path / "holes.csv", rows))
    assert code == 2
    assert "line 6, field output: is empty (item doc2, system beta)" in messages
    assert "line 9, field item_id: is missing or empty" in messages


def test_jsonl_with_several_documents_and_renamed_columns(study, tmp_path):
    lines = [
        json.dumps(
            {
                "id": "q1",
                "model": label,
                "summary": f"{label} on the two trials",
                "docs": [{"title": "Trial A", "text": "A found less fatigue."}, "B found no change."],
                "question": "Does napping help?",
            }
        )
        for label in STYLE
    ]
    path = tmp_path / "outputs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _import(
        "pre", path, item_column="id", system_column="model", output_column="summary", documents_column="docs",
        prompt_column="question",
    )  # fmt: skip
    item = PrewrittenItem.objects.get(key="q1")
    assert item.prompt == "Does napping help?"
    assert item.sources == [
        {"title": "Trial A", "text": "A found less fatigue.", "url": ""},
        {"title": "", "text": "B found no change.", "url": ""},
    ]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n{not json\n")
    code, messages = _refusal("pre", broken)
    assert code == 2 and "line 2" in messages and "not valid JSON" in messages


def test_a_changed_output_is_updated_until_the_item_is_shown_then_refused(study, tmp_path):
    _import("pre", _csv(tmp_path / "v1.csv", _rows()))
    rows = _rows()
    rows[0]["output"] = "A careful summary, revised."  # doc1/alpha, line 2
    out, _ = _import("pre", _csv(tmp_path / "v2.csv", rows))
    assert "1 updated" in out.split(";")[1]
    assert PrewrittenOutput.objects.get(item__key="doc1", system__label="alpha").text == "A careful summary, revised."

    client, pid = api_annotator(study)
    assert client.post(f"/api/v1/participations/{pid}/next-item/", {}, format="json").status_code == 201
    shown = PrewrittenAssignment.objects.get().item.key
    changed = _rows()
    line = next(n for n, r in enumerate(changed, start=2) if r["item_id"] == shown and r["system"] == "beta")
    changed[line - 2]["output"] = "A late change."
    code, messages = _refusal("pre", _csv(tmp_path / "v3.csv", changed))
    assert code == 2
    assert f"line {line}, field output: item {shown} has been shown to annotators" in messages


def test_the_admin_api_imports_for_owners_only_and_names_bad_lines(study, tmp_path):
    owner = get_user_model().objects.create_superuser("owner", "o@example.org", "pw")
    api = APIClient()
    api.force_authenticate(owner)
    content = _csv(tmp_path / "o.csv", _rows()).read_text()
    url = "/api/v1/admin/studies/pre/outputs/"
    done = api.post(url, {"format": "csv", "content": content}, format="json")
    assert done.status_code == 200, done.json()
    assert done.json()["outputs_created"] == 12 and done.json()["changed"] is True
    assert api.post(url, {"format": "csv", "content": content}, format="json").json()["changed"] is False

    bad = api.post(url, {"format": "csv", "content": content.replace("gamma", "delta", 1)}, format="json")
    assert bad.status_code == 400
    assert {"line": 4, "field": "system", "message": "unknown system 'delta' (the study's: alpha, beta, gamma)"} in (
        bad.json()["extra"]["problems"]
    )

    misnamed = api.post(url, {"format": "csv", "content": content, "columns": {"itme": "id"}}, format="json")
    assert misnamed.status_code == 400 and "Unknown column role(s) itme" in str(misnamed.json())
    assert api.post(url, {"format": "csv"}, format="json").status_code == 400  # no file at all

    stranger = get_user_model().objects.create_user("stranger")
    other = APIClient()
    other.force_authenticate(stranger)
    assert other.post(url, {"format": "csv", "content": content}, format="json").status_code == 403


# --- the annotators' journey ------------------------------------------------------------------------------------


def _prefer(texts: tuple[str, str]) -> str:
    """The annotator's taste: alpha's careful style over beta's, beta's over gamma's hedging."""
    rank = {"A careful": 0, "Summary in": 1, "Hard to": 2}
    left, right = (min(v for k, v in rank.items() if t.startswith(k)) for t in texts)
    return "left" if left < right else "right"


def _rank_item(client: APIClient, query: dict) -> int:
    answered = 0
    while (match := client.get(f"/api/v1/queries/{query['id']}/current-match/")).status_code == 200:
        body = match.json()
        # Blind: the annotator sees two texts, never which system wrote them.
        assert set(body["left"]) == set(body["right"]) == {"text"}
        assert not {"system", "model", "condition", "position"} & set(body)
        choice = _prefer((body["left"]["text"], body["right"]["text"]))
        assert (
            client.post(f"/api/v1/matches/{body['id']}/choice/", {"choice": choice}, format="json").status_code == 200
        )
        answered += 1
    return answered


@pytest.fixture
def played(study, tmp_path):
    """Two annotators, three items each (the study's limit) of four: every item shown, none twice to one person."""
    study.queries_per_annotator = 3
    study.min_ranked_questions = 1
    study.save(update_fields=["queries_per_annotator", "min_ranked_questions"])
    _import("pre", _csv(tmp_path / "outputs.csv", _rows()))
    annotators = [api_annotator(study), api_annotator(study)]
    shown: list[tuple[int, str]] = []
    for _ in range(3):
        for number, (client, pid) in enumerate(annotators):
            got = client.post(f"/api/v1/participations/{pid}/next-item/", {"client_token": f"t{len(shown)}"})
            assert got.status_code == 201, got.json()
            query = got.json()
            assert query["status"] == "ready"
            key = query["text"].removeprefix("What does study ").removesuffix(" find?")
            assert [d["abstract"] for d in query["documents"]] == [ITEMS[key]]
            assert _rank_item(client, query) == 2  # 3 systems: one first-round match and a bye, then the final
            shown.append((number, key))
    return study, annotators, shown


def test_two_annotators_rank_balanced_items_and_every_judgment_lands(played):
    study, annotators, shown = played
    # Balanced: the first four items handed out are the four items; over six, no item twice more than another.
    assert sorted(key for _, key in shown[:4]) == sorted(ITEMS)
    counts = Counter(key for _, key in shown)
    assert max(counts.values()) - min(counts.values()) <= 1 and sum(counts.values()) == 6
    for number in (0, 1):
        mine = [key for who, key in shown if who == number]
        assert len(set(mine)) == 3  # never an item twice to the same annotator
    assert Judgment.objects.filter(match__bracket__query__participation__study=study).count() == 12
    assert Query.objects.filter(participation__study=study, status=Query.Status.RANKED).count() == 6

    # The limit: a fourth item is refused, and a free-form question is not how this study is answered.
    client, pid = annotators[0]
    refused = client.post(f"/api/v1/participations/{pid}/next-item/", {}, format="json")
    assert refused.status_code == 409 and "all 3 items" in refused.json()["message"]
    asked = client.post(f"/api/v1/participations/{pid}/queries/", {"text": "sleep"}, format="json")
    assert asked.status_code == 409
    assert client.post(f"/api/v1/participations/{pid}/finish/").json()["completion_code"]


def test_the_same_client_token_is_the_same_item(study, tmp_path):
    _import("pre", _csv(tmp_path / "outputs.csv", _rows()))
    client, pid = api_annotator(study)
    url = f"/api/v1/participations/{pid}/next-item/"
    first = client.post(url, {"client_token": "once"}, format="json")
    again = client.post(url, {"client_token": "once"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and PrewrittenAssignment.objects.count() == 1


def test_the_analysis_and_exports_read_each_outputs_system(played, tmp_path):
    study, _, _ = played
    call_command("analyze", study="pre", out=tmp_path / "report", resamples=20)
    with (tmp_path / "report" / "comparisons.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    # A system in the table is its model crossed with its condition (analysis.selectors.candidate_design).
    taste = {"lab-model-a-generic": 0, "lab-model-b-generic": 1, "lab-model-c-generic": 2}
    for row in rows:
        # The annotator preferred by style; the table must say the system whose text that was.
        assert row["winner_system"] == min((row["left_system"], row["right_system"]), key=lambda s: taste[s])
    wins = Counter(row["winner_system"] for row in rows)
    plays = Counter(s for row in rows for s in (row["left_system"], row["right_system"]))
    assert wins["lab-model-a-generic"] == plays["lab-model-a-generic"] > 0 and wins["lab-model-c-generic"] == 0
    with (tmp_path / "report" / "tables" / "win_rates.csv").open() as handle:
        variants = [r for r in csv.DictReader(handle) if r["statistic"] == "variant"]
    # A win-rate row per system and stage: the careful style won every match it played, the hedging one none.
    assert {r["group"] for r in variants} == {"lab-model-a / generic", "lab-model-b / generic", "lab-model-c / generic"}
    # (A stage a system never reached has a row with n 0: which stages those are depends on the brackets drawn.)
    played_rows = {
        g: [r for r in variants if r["group"] == g and r["n"] != "0"] for g in {r["group"] for r in variants}
    }
    assert played_rows["lab-model-a / generic"] and all(
        r["wins"] == r["n"] for r in played_rows["lab-model-a / generic"]
    )
    assert played_rows["lab-model-c / generic"] and all(r["wins"] == "0" for r in played_rows["lab-model-c / generic"])

    call_command("export_summaries", study="pre", out=tmp_path / "export", formats="csv", include_texts=True)
    with (tmp_path / "export" / "summaries.csv").open() as handle:
        exported = list(csv.DictReader(handle))
    assert len(exported) == 18
    for row in exported:
        assert row["generation_backend"] == "prewritten"
        assert row["summary"].startswith(STYLE[row["system_label"]].split("{")[0])


def test_the_pages_offer_the_next_item_and_compare_its_texts_blind(study, tmp_path):
    from django.test import Client
    from django.urls import reverse

    _import("pre", _csv(tmp_path / "outputs.csv", _rows()))
    invitation = invitation_create_bulk(study=study, count=1)[0]
    browser = Client()
    assert browser.post(reverse("annotation:join", args=[invitation.token]), {"consent": "on"}).status_code == 302
    assert browser.post(reverse("annotation:profile", args=["pre"]), PERSONA).status_code == 302
    page = browser.get(reverse("annotation:ask", args=["pre"])).content.decode()
    assert "Show the next item" in page and 'name="text"' not in page  # no question box
    token = re.search(r'name="client_token" value="([0-9a-f]+)"', page).group(1)
    opened = browser.post(reverse("annotation:ask", args=["pre"]), {"client_token": token})
    assert opened["Location"] == reverse("annotation:compare", args=["pre", 1])
    compare = html.unescape(browser.get(opened["Location"]).content.decode())
    assert "What does study doc1 find?" in compare and ITEMS["doc1"] in compare
    shown = [text for text in (STYLE[label].format(ITEMS["doc1"].lower()) for label in STYLE) if text in compare]
    assert len(shown) == 2  # one pair of the three texts
    for secret in ("alpha", "beta", "gamma", "lab-model"):
        assert secret not in compare


def test_a_system_added_after_the_import_holds_the_items_back_and_a_removed_one_takes_its_outputs(study, tmp_path):
    from studies.services.study import study_update

    _import("pre", _csv(tmp_path / "outputs.csv", _rows()))
    client, pid = api_annotator(study)
    added = [*SYSTEMS, {"label": "delta", "model_name": "lab-model-d", "condition": "generic",
                        "generation_backend": "prewritten"}]  # fmt: skip
    study_update(study=study, systems=added)
    held = client.post(f"/api/v1/participations/{pid}/next-item/", {}, format="json")
    assert held.status_code == 409 and "item doc1 has no output of delta" in held.json()["message"]
    assert not Query.objects.exists()

    study_update(study=study, systems=SYSTEMS[:2])  # alpha and beta: gamma's outputs go with it
    assert set(PrewrittenOutput.objects.values_list("system__label", flat=True)) == {"alpha", "beta"}
    shown = client.post(f"/api/v1/participations/{pid}/next-item/", {}, format="json")
    assert shown.status_code == 201 and len(shown.json()["candidates"]) == 2
