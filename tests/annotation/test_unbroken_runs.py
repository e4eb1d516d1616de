"""A source abstract holding a 10,000-character run without a space (raw sequence data pasted into a corpus):
the summaries the annotator compares stay within the systems' word budget, counted as docs/backends.md says."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import Candidate
from annotation.services.query import query_submit
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

_RUN = "ACGT" * 2500  # 10,000 characters
_ROWS = [
    ("n1", "Night shifts and sleep", [f"Nurses on night shifts slept less; raw actigraphy of their sleep: {_RUN}",
                                   "Sleep after night shifts was shorter by an hour.",
                                   "Rotating shifts disturbed the nurses' sleep most."]),
    ("n2", "Fatigue on the ward", ["Tired nurses on night shifts made more errors.",
                                   "Short naps during night shifts improved alertness and sleep."]),
]  # fmt: skip


def test_summaries_of_a_source_with_a_10000_character_run_stay_within_the_word_budget(
    django_capture_on_commit_callbacks, tmp_path
):
    path = tmp_path / "SciTLDR-A_dev.jsonl"
    path.write_text(
        "".join(
            json.dumps({"paper_id": i, "title": t, "source": src, "target": [src[0]]}) + "\n" for i, t, src in _ROWS
        ),
        encoding="utf-8",
    )
    call_command("import_corpus", str(path), "--no-progress", stdout=StringIO(), stderr=StringIO())
    study = StudyFactory(slug="long-run", retrieval_backend="corpus")
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(
            participation=join(study), text="How do night shifts affect nurses' sleep?", client_token=""
        )
    candidates = list(Candidate.objects.filter(query=query))
    assert len(candidates) == study.systems.count() >= 2
    assert any("ACGT" in candidate.text for candidate in candidates), "the run's sentence was never chosen"
    for candidate in candidates:
        # The default budget of 130 words, each at most 25 characters, and a space, an ellipsis or a
        # citation " [n]" between them: no summary reaches the 10,000 characters of the run.
        assert len(candidate.text) <= 130 * 26 + 5 * len(" [2]"), (candidate.system.label, len(candidate.text))
