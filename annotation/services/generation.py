"""Generating the candidate summaries of a query: claiming one, generating it, recording a failure,
retrying, requeueing those a dead worker left behind, and drawing the bracket once all are done."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.backends.registry import get_generation_backend
from annotation.models import Candidate, Query, StudySystem
from annotation.prompts import render_prompt
from annotation.selectors.query import query_documents
from annotation.services.study import prompt_template_default
from annotation.services.tournament import bracket_create
from kernel.backends import BackendError, GenerationRequest
from kernel.tasks import enqueue_on_commit

logger = logging.getLogger(__name__)

# A candidate left "running" longer than this is presumed lost with its worker and is requeued.
STUCK_AFTER = timedelta(minutes=10)


def candidate_claim(*, candidate_id: int, redelivered: bool = False) -> Candidate | None:
    """Move a candidate to running. None when another worker holds it or it is already finished.
    A redelivered task may take over a running candidate: the process that was running it is gone."""
    now = timezone.now()
    claimable = Q(status=Candidate.Status.QUEUED) | Q(status=Candidate.Status.RUNNING, started_at__lt=now - STUCK_AFTER)
    if redelivered:
        claimable |= Q(status=Candidate.Status.RUNNING)
    claimed = Candidate.objects.filter(claimable, pk=candidate_id).update(
        status=Candidate.Status.RUNNING, started_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    return Candidate.objects.select_related(
        "system", "query__persona", "query__participation__study__prompt_template"
    ).get(pk=candidate_id)


def candidate_generate(*, candidate_id: int, final_attempt: bool = True, redelivered: bool = False) -> Candidate | None:
    """Generate one candidate summary. A transient failure is re-raised for the task to retry
    unless this is the final attempt; a permanent one is stored with its reason."""
    candidate = candidate_claim(candidate_id=candidate_id, redelivered=redelivered)
    if candidate is None:
        return None
    query = candidate.query
    system = candidate.system
    template = query.participation.study.prompt_template or prompt_template_default()
    documents = query_documents(query=query)
    persona = query.persona.as_dict() if system.condition == StudySystem.Condition.PERSONA else None
    prompt = render_prompt(
        body=template.body, persona_block=template.persona_block, query=query.text, documents=documents, persona=persona
    )
    request = GenerationRequest(
        query=query.text,
        documents=documents,
        prompt=prompt,
        model=system.model_name,
        persona=persona,
        settings=system.backend_settings,
    )
    try:
        backend = get_generation_backend(system.generation_backend, system.backend_settings)
        generation = backend.generate(request)
        if not generation.text.strip():
            raise BackendError("The model returned an empty summary.", transient=True)
    except BackendError as error:
        if error.transient and not final_attempt:
            Candidate.objects.filter(pk=candidate.pk).update(
                status=Candidate.Status.QUEUED, failure_reason=f"Retrying after: {error.reason}", prompt=prompt
            )
            raise
        return candidate_mark_failed(candidate_id=candidate.pk, reason=error.reason, prompt=prompt)
    except Exception as error:  # an unexpected bug must not leave the candidate running forever
        logger.exception("generation of candidate %s crashed", candidate.pk)
        return candidate_mark_failed(candidate_id=candidate.pk, reason=f"Internal error: {error!r}", prompt=prompt)
    flags = citation_flags(text=generation.text, n_documents=len(documents))
    with transaction.atomic():
        updated = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.RUNNING).update(
            status=Candidate.Status.DONE,
            text=generation.text,
            prompt=prompt,
            raw_response=dict(generation.raw_response),
            usage=dict(generation.usage),
            latency_s=generation.latency_s,
            finish_reason=generation.finish_reason,
            citation_flags=flags,
            failure_reason="",
            finished_at=timezone.now(),
        )
        if updated:
            query_advance_if_generated(query_id=query.pk)
    candidate.status = Candidate.Status.DONE if updated else candidate.status
    candidate.text = generation.text
    return candidate


def citation_flags(*, text: str, n_documents: int) -> dict[str, Any]:
    try:
        from annotation.backends.citations import check_citations
    except ImportError:  # pragma: no cover - the helper module ships with the real backends
        return {}
    result = check_citations(text, n_documents)
    return result.to_dict() if hasattr(result, "to_dict") else dict(vars(result))


def candidate_mark_failed(*, candidate_id: int, reason: str, prompt: str = "") -> Candidate:
    fields: dict[str, Any] = {
        "status": Candidate.Status.FAILED,
        "failure_reason": reason[:4000],
        "finished_at": timezone.now(),
    }
    if prompt:
        fields["prompt"] = prompt
    Candidate.objects.filter(pk=candidate_id).exclude(status=Candidate.Status.DONE).update(**fields)
    return Candidate.objects.get(pk=candidate_id)


@transaction.atomic
def candidate_retry(*, candidate: Candidate) -> Candidate:
    """Queue a failed candidate again (admins; annotators through `query_retry_failed`)."""
    updated = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.FAILED).update(
        status=Candidate.Status.QUEUED, failure_reason="", queued_at=timezone.now(), started_at=None, finished_at=None
    )
    if updated:
        Query.objects.filter(pk=candidate.query_id, status=Query.Status.FAILED).update(status=Query.Status.GENERATING)
        # At call time: annotation.tasks imports this module.
        from annotation.tasks import generate_candidate

        enqueue_on_commit(generate_candidate, candidate.pk)
    candidate.refresh_from_db()
    return candidate


def candidates_retry_failed(*, queryset: Iterable[Candidate]) -> int:
    return sum(1 for c in queryset if candidate_retry(candidate=c).status == Candidate.Status.QUEUED)


def candidates_requeue_stuck(*, older_than: timedelta = STUCK_AFTER) -> int:
    """The sweeper: candidates left running by a worker that died go back to the queue."""
    # At call time: annotation.tasks imports this module.
    from annotation.tasks import generate_candidate

    cutoff = timezone.now() - older_than
    stuck = list(
        Candidate.objects.filter(
            Q(status=Candidate.Status.RUNNING, started_at__lt=cutoff)
            | Q(status=Candidate.Status.QUEUED, queued_at__lt=cutoff)
        ).values_list("pk", flat=True)
    )
    for candidate_id in stuck:
        generate_candidate.delay(candidate_id)
    return len(stuck)


def query_advance_if_generated(*, query_id: int) -> Query:
    """Once every candidate is done, draw the bracket; if any failed, the query waits for a retry."""
    query = Query.objects.select_for_update().get(pk=query_id)
    unfinished = Candidate.objects.filter(query_id=query_id).exclude(status=Candidate.Status.DONE).order_by()
    if query.status == Query.Status.GENERATING and not unfinished.exists():
        bracket_create(query=query)
    return query
