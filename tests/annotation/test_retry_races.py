"""Two admins retry the same failed summary at the same moment (the admin API's retry, the admin's action): it
is generated again once, and the audit log holds one retry, by whoever got there first."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from annotation.models import Candidate
from annotation.services.generation import candidate_retry
from annotation.services.query import query_submit
from studies.models import StudyAuditLog
from studies.models_audit import AuditEvent, AuditOrigin
from tests.annotation.factories import StudyFactory, join
from tests.support.races import at_once

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_retries_at_once_generate_once_and_are_audited_once():
    study = StudyFactory(slug="retried")
    participation = join(study)
    query = query_submit(participation=participation, text="Does sleep affect memory?", client_token="")
    candidate = Candidate.objects.filter(query=query).order_by("pk").first()
    # As a worker leaves it when the model server failed every attempt (a done summary is never marked failed).
    Candidate.objects.filter(pk=candidate.pk).update(
        status=Candidate.Status.FAILED, failure_reason="model-one: 503 Service Unavailable", attempts=3, text=""
    )
    ann, ben = (get_user_model().objects.create_superuser(name, password="pw") for name in ("ann", "ben"))

    results = at_once(
        lambda: candidate_retry(candidate=Candidate.objects.get(pk=candidate.pk), by=ann, origin=AuditOrigin.ADMIN_API),
        lambda: candidate_retry(candidate=Candidate.objects.get(pk=candidate.pk), by=ben, origin=AuditOrigin.ADMIN),
    )
    assert not [r for r in results if isinstance(r, BaseException)], results
    candidate.refresh_from_db()
    # Generated again once (eager tasks: the retry's generation ran when its transaction committed).
    assert candidate.status == Candidate.Status.DONE and candidate.attempts == 1
    rows = list(StudyAuditLog.objects.filter(event_type=AuditEvent.GENERATION_RETRIED, object_id=candidate.pk))
    assert len(rows) == 1 and rows[0].actor in (ann, ben)
    assert rows[0].before == {"status": "failed", "failure_reason": "model-one: 503 Service Unavailable", "attempts": 3}
