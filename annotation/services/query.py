"""A question and its life: asking it, retrieving and freezing its sources, failing, discarding and retrying it."""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from annotation.backends.registry import get_retrieval_backend
from annotation.models import Candidate, Participation, Query, RetrievedDocument
from annotation.services.generation import candidate_retry
from annotation.services.participation import participation_queries_used
from annotation.services.persona import persona_current
from annotation.services.study import study_prompt_template, study_require_open
from kernel.exceptions import ApplicationError
from kernel.tasks import enqueue_on_commit


@transaction.atomic
def query_submit(*, participation: Participation, text: str, client_token: str) -> Query:
    """Ask a question; retrieval and generation follow in the background. Resubmitting is harmless."""
    participation = Participation.objects.select_for_update().select_related("study").get(pk=participation.pk)
    study = participation.study
    if client_token:
        existing = participation.queries.filter(client_token=client_token).first()
        if existing is not None:
            return existing
    study_require_open(study=study)
    if participation.completed_at is not None:
        raise ApplicationError("You have already finished this study. Thank you!", status=409)
    text = (text or "").strip()
    if not text:
        raise ApplicationError("Please write your question.", field="text")
    if len(text) > study.max_query_chars:
        raise ApplicationError(
            f"Please keep your question under {study.max_query_chars} characters (it has {len(text)}).", field="text"
        )
    persona = persona_current(participation=participation)
    if persona is None:
        raise ApplicationError("Please describe yourself before asking a question.", status=409)
    if participation.queries.exclude(status__in=[Query.Status.RANKED, Query.Status.DISCARDED]).exists():
        raise ApplicationError("Please finish ranking your current question first.", status=409)
    used = participation_queries_used(participation=participation)
    if used >= study.queries_per_annotator:
        raise ApplicationError(
            f"You have asked all {study.queries_per_annotator} questions of this study.", field="text"
        )
    index = (participation.queries.order_by("-index").values_list("index", flat=True).first() or 0) + 1
    query = Query.objects.create(
        participation=participation,
        index=index,
        text=text,
        client_token=client_token or secrets.token_hex(16),
        persona=persona,
        retrieval_backend=study.retrieval_backend,
    )
    # At call time: annotation.tasks imports this module.
    from annotation.tasks import retrieve_query

    enqueue_on_commit(retrieve_query, query.pk)
    return query


@transaction.atomic
def query_discard(*, query: Query) -> Query:
    """Give up on a question whose generation failed; it does not count toward the limit."""
    query = Query.objects.select_for_update().get(pk=query.pk)
    if (
        query.status not in (Query.Status.FAILED,)
        and not query.candidates.filter(status=Candidate.Status.FAILED).exists()
    ):
        raise ApplicationError("Only a question whose summaries could not be generated can be set aside.", status=409)
    query.status = Query.Status.DISCARDED
    query.save(update_fields=["status"])
    return query


def query_retrieve(*, query_id: int) -> Query:
    """Retrieve and freeze the sources, then queue one candidate per system. Safe to run twice."""
    query = Query.objects.select_related("participation__study").get(pk=query_id)
    if query.status != Query.Status.RETRIEVING:
        return query
    study = query.participation.study
    if not query.documents.exists():
        backend = get_retrieval_backend(query.retrieval_backend, study.retrieval_settings)
        filters = study.retrieval_settings.get("filters") if study.retrieval_settings else None
        documents = backend.search(query.text, k=study.retrieval_k, filters=filters)
        if not documents:
            return query_mark_failed(query_id=query.pk, reason="No sources were found for this question.")
        RetrievedDocument.objects.bulk_create(
            [
                RetrievedDocument(
                    query=query,
                    rank=rank,
                    external_id=doc.external_id,
                    title=doc.title,
                    abstract=doc.abstract,
                    url=doc.url,
                    year=doc.year,
                    venue=doc.venue,
                    authors=list(doc.authors),
                    score=doc.score,
                )
                for rank, doc in enumerate(documents, start=1)
            ],
            ignore_conflicts=True,  # a rerun after a crash finds the same documents already stored
        )
    with transaction.atomic():
        query = Query.objects.select_for_update().get(pk=query.pk)
        if query.status != Query.Status.RETRIEVING:
            return query
        now = timezone.now()
        Candidate.objects.bulk_create(
            [
                # The snapshot of what produces it (see Candidate): exports read these, not the system.
                Candidate(
                    query=query,
                    system=system,
                    queued_at=now,
                    system_label=system.label,
                    model_name=system.model_name,
                    condition=system.condition,
                    generation_backend=system.generation_backend,
                    generation_settings=system.backend_settings,
                    prompt_template=template,
                    prompt_template_version=template.version,
                )
                for template in [study_prompt_template(study=study)]
                for system in study.systems.all()
            ],
            ignore_conflicts=True,  # one candidate per system, guaranteed by the unique constraint
        )
        query.status = Query.Status.GENERATING
        query.save(update_fields=["status"])
        # At call time: annotation.tasks imports this module.
        from annotation.tasks import generate_candidate

        for candidate_id in query.candidates.order_by().values_list("pk", flat=True):
            enqueue_on_commit(generate_candidate, candidate_id)
    return query


def query_mark_failed(*, query_id: int, reason: str) -> Query:
    Query.objects.filter(pk=query_id, status=Query.Status.RETRIEVING).update(
        status=Query.Status.FAILED, failure_reason=reason[:2000]
    )
    return Query.objects.get(pk=query_id)


@transaction.atomic
def query_retry_failed(*, query: Query) -> Query:
    if query.status == Query.Status.FAILED and not query.documents.exists():
        Query.objects.filter(pk=query.pk).update(status=Query.Status.RETRIEVING, failure_reason="")
        # At call time: annotation.tasks imports this module.
        from annotation.tasks import retrieve_query

        enqueue_on_commit(retrieve_query, query.pk)
    for candidate in query.candidates.filter(status=Candidate.Status.FAILED):
        candidate_retry(candidate=candidate)
    query.refresh_from_db()
    return query
