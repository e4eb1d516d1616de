"""The page-time table (manage.py export_page_times): every page an annotator was shown, with its time."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from django.core.management import call_command

from annotation.models import Judgment, Match, Participation, PersonaProfile, Query

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_each_page_has_its_row_and_time(played_study, tmp_path):
    participation = played_study.participations.order_by("code").first()
    Participation.objects.filter(pk=participation.pk).update(created_at=at(0), consented_at=at(20))
    PersonaProfile.objects.filter(participation=participation).update(form_shown_at=at(25), created_at=at(85))
    first, second = Query.objects.filter(participation=participation).order_by("index")
    Query.objects.filter(pk=first.pk).update(shown_at=at(90), created_at=at(130), wait_shown_at=at(131))
    Query.objects.filter(pk=second.pk).update(shown_at=None)  # a page whose start was not recorded
    matches = list(Match.objects.filter(bracket__query=first).order_by("round", "index"))
    for k, match in enumerate(matches):
        Match.objects.filter(pk=match.pk).update(shown_at=at(140 + 100 * k))
        Judgment.objects.filter(match=match).update(shown_at=at(140 + 100 * k), answered_at=at(170 + 100 * k))

    out = io.StringIO()
    call_command(
        "export_page_times", "--study", played_study.slug, "--out", str(tmp_path), "--formats", "parquet", stdout=out
    )
    pages = pd.read_parquet(tmp_path / "pages.parquet")
    mine = pages[pages["annotator"] == participation.code]
    seconds = {
        (r.page, r.query_index if pd.notna(r.query_index) else None): r.seconds_on_page for r in mine.itertuples()
    }
    assert seconds[("consent", None)] == 20
    assert seconds[("persona", None)] == 60
    assert seconds[("question", 1)] == 40
    assert seconds[("wait", 1)] == 9  # until the first comparison was shown, at 140 s
    assert pd.isna(seconds[("question", 2)])  # recorded without a start: a row, no time
    comparisons = mine[(mine["page"] == "comparison") & (mine["query_index"] == 1)]
    answered = Judgment.objects.filter(match__bracket__query=first, automatic=False).count()
    assert len(comparisons) == answered and set(comparisons["seconds_on_page"]) == {30.0}
    assert set(comparisons["match"]) <= {m.label for m in matches}
    # Every annotator of the study has a consent row, and the manifest says what the files hold.
    assert set(pages.loc[pages["page"] == "consent", "annotator"]) == {
        p.code for p in played_study.participations.all() if p.consented_at
    }
    manifest = (tmp_path / "pages.manifest.json").read_text()
    assert "satisfy.page-export/1" in manifest and f"Wrote {len(pages)} page times" in out.getvalue()
