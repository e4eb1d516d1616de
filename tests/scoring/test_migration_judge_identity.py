"""Migration 0003 (judge identity) keeps the scores stored before it, and lets a second judge add rows."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.models import Candidate
from tests.analysis.conftest import played_study  # noqa: F401 - the fixture: a study with real candidates
from tests.support.migrations import migrate_to, migrated_back

BEFORE = [("scoring", "0002_background_leases")]
AFTER = [("scoring", "0003_judge_identity")]


@pytest.mark.django_db(transaction=True)
def test_old_scores_survive_and_judges_are_keyed(played_study):  # noqa: F811
    candidate = Candidate.objects.filter(query__participation__study=played_study).first()
    with migrated_back(BEFORE) as apps:
        old = apps.get_model("scoring", "CandidateScore")
        old.objects.create(candidate_id=candidate.pk, metric="geval_overall", version="prompt rubric/1", value=4.0)
        old.objects.create(candidate_id=candidate.pk, metric="rouge1", version="rouge-score 0.1.2", value=0.5)
        new = migrate_to(AFTER).get_model("scoring", "CandidateScore")
        kept = {(s.metric, s.value, s.judge_model, s.judge_server, s.prompt_version) for s in new.objects.all()}
        assert kept == {("geval_overall", 4.0, "", "", ""), ("rouge1", 0.5, "", "", "")}
        # Another judge's score of the same candidate and metric is a new row, not a clash...
        new.objects.create(
            candidate_id=candidate.pk,
            metric="geval_overall",
            version="prompt rubric/1; judge m@b",
            judge_model="m",
            judge_server="b",
            prompt_version="rubric/1",
            value=2.0,
        )
        assert new.objects.filter(metric="geval_overall").count() == 2
        # ...while the same key twice is still refused by the database.
        with pytest.raises(IntegrityError), transaction.atomic():
            new.objects.create(candidate_id=candidate.pk, metric="rouge1", version="rouge-score 0.1.2", value=0.6)
