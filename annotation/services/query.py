"""A question and its life: asking it, retrieving and freezing its sources, failing, discarding and
retrying it, and the periodic sweeper that sees every question and candidate to an end."""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.backends.registry import get_retrieval_backend
from annotation.models import Candidate, Participation, Query, RetrievedDocument
from annotation.services.generation import (
    candidate_retry,
    candidates_sweep,
    query_advance_if_generated,
    sweeper_record_run,
)
from annotation.services.participation import participation_queries_used
from annotation.services.persona import persona_current
from annotation.services.study import study_prompt_template, study_require_open
from kernel.backends import BackendError
from kernel.exceptions import ApplicationError
from kernel.tasks import enqueue_on_commit

# Retrieval's worst case is 4 attempts of at most 60 s with up to 35 s of backoff (annotation/tasks.py):
# a question still retrieving RETRIEVAL_DEADLINE after it was asked is failed, and its message is sent
# again, once, when it is RETRIEVAL_REQUEUE_AFTER old (a worker killed outright leaves it unacknowledged
# until the broker's visibility timeout, an hour).
RETRIEVAL_DEADLINE = timedelta(minutes=10)
RETRIEVAL_REQUEUE_AFTER = timedelta(minutes=5)
# A query whose last candidate just finished draws its own bracket; the sweeper only repairs older ones.
_SETTLE = timedelta(minutes=1)


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
        if not isinstance(study.retrieval_settings or {}, dict):
            raise BackendError(
                f"The study's retrieval settings must be a JSON object such as "
                f'{{"filters": {{"from_year": 2018}}}}, not a {type(study.retrieval_settings).__name__}: '
                f"{json.dumps(study.retrieval_settings)[:200]}",
                transient=False,
            )
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
    """The end of a retrieval that cannot succeed; the annotator may discard the question or retry it."""
    Query.objects.filter(pk=query_id, status=Query.Status.RETRIEVING).update(
        status=Query.Status.FAILED, failure_reason=reason[:2000]
    )
    return Query.objects.get(pk=query_id)


def queries_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper's part for questions: a retrieval whose message was lost is sent again (stamped,
    at most once per RETRIEVAL_REQUEUE_AFTER), one still retrieving past RETRIEVAL_DEADLINE fails with
    a reason, and a query whose candidates are all done but that has no bracket gets one."""
    # At call time: annotation.tasks imports this module.
    from annotation.tasks import retrieve_query

    now = now or timezone.now()
    retrieving = Query.objects.filter(status=Query.Status.RETRIEVING).alias(
        asked_at=Coalesce("retrieval_queued_at", "created_at")
    )
    late = list(retrieving.filter(asked_at__lt=now - RETRIEVAL_DEADLINE).values_list("pk", flat=True))
    minutes = int(RETRIEVAL_DEADLINE.total_seconds() // 60)
    for query_id in late:
        query_mark_failed(query_id=query_id, reason=f"Retrieval did not finish within {minutes} minutes.")
    with transaction.atomic():
        lost = list(
            retrieving.select_for_update(skip_locked=True)
            .filter(asked_at__lt=now - RETRIEVAL_REQUEUE_AFTER)
            .filter(Q(retrieval_requeued_at__isnull=True) | Q(retrieval_requeued_at__lt=F("asked_at")))
            .exclude(pk__in=late)
            .values_list("pk", flat=True)
        )
        Query.objects.filter(pk__in=lost).update(retrieval_requeued_at=now)
        for query_id in lost:
            enqueue_on_commit(retrieve_query, query_id)
    unbracketed = list(
        Query.objects.filter(status=Query.Status.GENERATING, bracket__isnull=True, created_at__lt=now - _SETTLE)
        .filter(candidates__isnull=False)
        .distinct()
        .exclude(candidates__status__in=[Candidate.Status.QUEUED, Candidate.Status.RUNNING, Candidate.Status.FAILED])
        .values_list("pk", flat=True)
    )
    for query_id in unbracketed:
        with transaction.atomic():
            query_advance_if_generated(query_id=query_id)
    return {"queries_failed": len(late), "queries_requeued": len(lost), "queries_bracketed": len(unbracketed)}


def background_sweep() -> dict[str, int]:
    """Everything the periodic generation sweeper does, and the record that it ran."""
    result = {**queries_sweep(), **candidates_sweep()}
    sweeper_record_run(name="generation", result=result)
    return result


@transaction.atomic
def query_retry_failed(*, query: Query) -> Query:
    if query.status == Query.Status.FAILED and not query.documents.exists():
        Query.objects.filter(pk=query.pk).update(
            status=Query.Status.RETRIEVING, failure_reason="", retrieval_queued_at=timezone.now()
        )
        # At call time: annotation.tasks imports this module.
        from annotation.tasks import retrieve_query

        enqueue_on_commit(retrieve_query, query.pk)
    for candidate in query.candidates.filter(status=Candidate.Status.FAILED):
        candidate_retry(candidate=candidate)
    query.refresh_from_db()
    return query
