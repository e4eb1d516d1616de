"""A question and its life: asking it, retrieving and freezing its sources, failing, discarding and
retrying it, and the periodic sweeper that sees every question and candidate to an end."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import unicodedata
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from annotation.models import Candidate, Judgment, Participation, Query, RetrievedDocument
from annotation.selectors.participation import participation_locked
from annotation.selectors.query import query_with_study
from annotation.services.generation import (
    GENERATE_CANDIDATE,
    candidate_requeue,
    candidate_send,
    candidates_sweep,
    query_advance_if_generated,
    sweeper_record_run,
)
from annotation.services.participation import (
    candidates_cancel_set_aside,
    participation_ended,
    participation_needs_screening,
    participation_require_active,
    screening_first,
)
from annotation.services.persona import persona_current
from corpus import index as corpus_index
from corpus.search import CorpusBM25Retrieval, CorpusRetrieval
from generation.offline_retrieval import DemoCorpusRetrieval
from generation.registry import get_retrieval_backend
from kernel.backends import BackendError
from kernel.bm25 import bm25s_term_stats
from kernel.exceptions import ApplicationError
from kernel.heartbeat import heartbeat
from kernel.stamps import stamp_first
from kernel.tasks import enqueue_on_commit, lost_if_sent_before
from kernel.text import CorpusTermStats, sources_miss_question
from studies.models_audit import AuditEvent, AuditOrigin
from studies.services.audit import audit_record
from studies.services.study import study_prompt_template, study_require_open

logger = logging.getLogger(__name__)

# The retrieval task, sent by the name it is registered and routed under (kernel/tasks.py).
RETRIEVE_QUERY = "annotation.tasks.retrieve_query"


def retrieval_deadline() -> timedelta:
    """Retrieval's worst case is 4 attempts of at most 60 s with up to 35 s of backoff (annotation/tasks.py):
    a question still retrieving this long after it was asked is failed (SWEEP_RETRIEVAL_DEADLINE_S)."""
    return timedelta(seconds=settings.SWEEP_RETRIEVAL_DEADLINE_S)


def retrieval_requeue_after() -> timedelta:
    """A retrieval's message is sent again, once, when the broker started after it was sent, or when it is this
    old (SWEEP_RETRIEVAL_REQUEUE_AFTER_S; a worker killed outright leaves it unacknowledged until the broker's
    visibility timeout)."""
    return timedelta(seconds=settings.SWEEP_RETRIEVAL_REQUEUE_AFTER_S)


# After the sweeper re-sends a retrieval whose worker died, the new message has this long to be taken.
RETRIEVAL_RESENT_LEASE = timedelta(minutes=1)
# A query whose last candidate just finished draws its own bracket; the sweeper only repairs older ones.
_SETTLE = timedelta(minutes=1)


# Stored in English with the question; the pages translate it when they show it (gettext_noop marks it).
NO_MATCH_NOTE = gettext_noop(
    "We found no sources closely matching your question; the summaries may not answer it. "
    "You can set this question aside (it will not count) or continue."
)


def _send_retrieval_on_commit(query: Query) -> None:
    """Send the retrieval once the question is committed. If the broker cannot be reached the question
    stays saved as `retrieving` and the sweeper that re-queues queries stuck in `retrieving` (added with
    the retrieval's background work) sends it again later; so here the failure is only logged and stamped
    on the row, for the waiting page and the API to say so in plain words instead of answering 500."""
    _send_on_commit(query, RETRIEVE_QUERY, query.pk)


def _send_on_commit(query: Query, task_name: str, *args: Any) -> None:
    """Send a query's work after commit; a send that fails is stamped on the row (`queue_failed_at`) for
    the waiting page and the API to say so, and the next sweep sends it again."""

    def failed() -> None:
        now = timezone.now()
        Query.objects.filter(pk=query.pk).update(queue_failed_at=now)
        query.queue_failed_at = now

    def sent() -> None:
        if query.queue_failed_at is not None:  # sent after an earlier failure: the waiting page stops saying so
            Query.objects.filter(pk=query.pk).update(queue_failed_at=None)
            query.queue_failed_at = None

    enqueue_on_commit(task_name, *args, on_sent=sent, on_send_failed=failed)


def _visible(text: str) -> bool:
    """Whether the text has a character one can see: not only whitespace, format characters (zero-width
    space and joiners, the byte-order mark, the word joiner), controls or unassigned code points."""
    return any(not char.isspace() and unicodedata.category(char) not in ("Cc", "Cf", "Cn", "Zs") for char in text)


@transaction.atomic
def query_submit(
    *, participation: Participation, text: str, client_token: str, shown_at: datetime | None = None
) -> Query:
    """Ask a question; retrieval and generation follow in the background. Resubmitting is harmless: the same
    question sent again under its client token (a double click, a reload) is the one question. A different
    question under a token already spent (the back button restores a form with its old hidden token, and a new
    question is typed into it) is asked as a new question, never dropped. `shown_at` is when the question form
    was first shown, for the time spent on it."""
    # The participation's row alone is locked (one question at a time per annotator, the limit, the client
    # token); FOR UPDATE without `of` would lock the study's row too and queue every annotator's question
    # behind every other's (bench/load.py: 100 asking within a second waited in line, the web server idle).
    participation = participation_locked(participation_id=participation.pk)
    study = participation.study
    # One read of the annotator's questions answers the checks below: the one this client token sent before,
    # whether one is still open, how many count toward the limit, and the last number.
    done = [Query.Status.RANKED, Query.Status.DISCARDED]
    tally = participation.queries.aggregate(
        sent_before=Max("pk", filter=Q(client_token=client_token or None)),
        still_open=Count("pk", filter=~Q(status__in=done)),
        used=Count("pk", filter=~Q(status=Query.Status.DISCARDED)),
        last_index=Max("index"),
    )
    text = (text or "").strip()
    if client_token and tally["sent_before"] is not None:
        earlier = Query.objects.get(pk=tally["sent_before"])
        if earlier.text == text:
            return earlier
        # Spent by another question: this one is new. Its own token is derived from the two, so that this new
        # question sent again from the same restored form (a double click) is still one question.
        client_token = hashlib.sha256(f"{client_token}\n{text}".encode()).hexdigest()
        if (again := participation.queries.filter(client_token=client_token).first()) is not None:
            return again
    study_require_open(study=study)
    if participation_ended(participation=participation):
        raise ApplicationError(_("You have already finished this study. Thank you!"), status=409)
    if not _visible(text):  # empty, or only invisible characters: nothing to search for
        raise ApplicationError(_("Please write your question."), field="text")
    if len(text) > study.max_query_chars:
        raise ApplicationError(
            _("Please keep your question under %(limit)d characters (it has %(length)d).")
            % {"limit": study.max_query_chars, "length": len(text)},
            field="text",
        )
    persona = persona_current(participation=participation)
    if persona is None:
        # The screening question comes before the persona (a persona saved means it was answered, or the
        # question was added after this participation had passed it: participation_needs_screening).
        if participation_needs_screening(participation=participation):
            raise screening_first(participation=participation)
        raise ApplicationError(_("Please describe yourself before asking a question."), status=409)
    if tally["still_open"]:
        raise ApplicationError(_("Please finish ranking your current question first."), status=409)
    if tally["used"] >= study.queries_per_annotator:
        raise ApplicationError(
            _("You have asked all %(limit)d questions of this study.") % {"limit": study.queries_per_annotator},
            field="text",
        )
    index = (tally["last_index"] or 0) + 1
    query = Query.objects.create(
        participation=participation,
        index=index,
        text=text,
        client_token=client_token or secrets.token_hex(16),
        persona=persona,
        retrieval_backend=study.retrieval_backend,
        shown_at=shown_at if shown_at is not None and shown_at <= timezone.now() else None,
    )
    _send_retrieval_on_commit(query)
    return query


@transaction.atomic
def query_discard(*, query: Query) -> Query:
    """Set a question aside: one whose generation failed, or one still being searched or written (a stuck
    worker must never trap the annotator). It does not count toward the limit; its reason is kept.
    A worker that finishes it later changes nothing (`bracket_create` leaves it discarded). Refused while
    the study is paused or closed or the participation has ended (`participation_require_active`)."""
    query = Query.objects.select_for_update(of=("self",)).select_related("participation__study").get(pk=query.pk)
    if query.status == Query.Status.DISCARDED:
        return query
    participation_require_active(participation=query.participation)
    failed = query.status == Query.Status.FAILED or query.candidates.filter(status=Candidate.Status.FAILED).exists()
    # Sources that match nothing in the question (retrieval_note): it may be set aside before its first answer.
    unmatched = (
        query.status == Query.Status.READY
        and bool(query.retrieval_note)
        and not Judgment.objects.filter(match__bracket__query=query).exists()
    )
    if not failed and not unmatched and query.status not in (Query.Status.RETRIEVING, Query.Status.GENERATING):
        raise ApplicationError(
            _(
                "Only a question that is still being prepared, or whose summaries could not be written, can be set "
                "aside."
            ),
            status=409,
        )
    query.status = Query.Status.DISCARDED
    query.set_aside_at = timezone.now()
    query.set_aside_reason = "failed" if failed else "no_sources" if unmatched else "too_slow"
    query.save(update_fields=["status", "set_aside_at", "set_aside_reason"])
    candidates_cancel_set_aside(query_ids=[query.pk])
    return query


def query_resend(*, query: Query) -> Query:
    """The annotator's "try again" on a question that is taking too long: send its stuck work to the
    queue again (the search while `retrieving`, the summaries not yet started while `generating`) and
    retry failed ones. A search still under a live lease (running, or waiting out a retry's backoff) is
    not sent again; a generation task claims only a queued (or long-stalled) candidate. A question set
    aside, stopped or already ranked is left as it is. Refused while the study is paused or closed (no model
    calls are spent for a paused study) or once the participation has ended."""
    participation_require_active(participation=query.participation)
    query.refresh_from_db(fields=["status", "lease_expires_at"])
    if query.status not in (Query.Status.RETRIEVING, Query.Status.GENERATING, Query.Status.FAILED):
        return query
    Query.objects.filter(pk=query.pk).update(retrieval_queued_at=timezone.now())
    if query.status == Query.Status.RETRIEVING:
        if query.lease_expires_at is None or query.lease_expires_at < timezone.now():
            _send_on_commit(query, RETRIEVE_QUERY, query.pk)
    elif query.status == Query.Status.GENERATING:
        for candidate_id in query.candidates.filter(status=Candidate.Status.QUEUED).values_list("pk", flat=True):
            _send_on_commit(query, GENERATE_CANDIDATE, candidate_id)
    _query_requeue_failed(query=query)
    query.refresh_from_db()
    return query


def _corpus_term_stats(backend: object) -> CorpusTermStats | None:
    """The document frequencies of the corpus ``backend`` searched, which the "no matching sources" warning
    weighs the question's words by: from the demo corpus's BM25 index, or from the corpus search's on-disk
    BM25 index (under full-text search too, when one is built); None for OpenAlex. Both indexes are loaded
    once per process, and the frequencies read off them once per index."""
    if isinstance(backend, DemoCorpusRetrieval):
        return backend.index.bm25.term_stats()
    if isinstance(backend, CorpusRetrieval | CorpusBM25Retrieval):
        try:
            loaded = corpus_index.load_current()
        except corpus_index.CorpusIndexError:
            return None
        if loaded is not None and loaded.bm25 is not None:
            return bm25s_term_stats(loaded.bm25, len(loaded.doc_ids))
    return None


def query_retrieve(*, query_id: int, redelivered: bool = False) -> Query:
    """Retrieve and freeze the sources, then queue one candidate per system. Safe to run twice, and never
    twice at once: the search runs under the question's lease (`query_claim`), and a second message for a
    question whose lease is live (being searched, or a retry waiting out its backoff) leaves it alone."""
    query = query_with_study(query_id=query_id, retrieval=True)
    if query.status != Query.Status.RETRIEVING:
        return query
    study = query.participation.study
    if not query.has_documents:  # type: ignore[attr-defined]  # set by query_with_study(retrieval=True)
        if not isinstance(study.retrieval_settings or {}, dict):
            raise BackendError(
                f"The study's retrieval settings must be a JSON object such as "
                f'{{"filters": {{"from_year": 2018}}}}, not a {type(study.retrieval_settings).__name__}: '
                f"{json.dumps(study.retrieval_settings)[:200]}",
                transient=False,
            )
        backend = get_retrieval_backend(query.retrieval_backend, study.retrieval_settings)
        filters = study.retrieval_settings.get("filters") if study.retrieval_settings else None
        if not query_claim(query_id=query.pk, redelivered=redelivered):
            return query
        with heartbeat(
            lambda: query_lease_renew(query_id=query.pk),
            every=settings.BACKGROUND_HEARTBEAT_S,
            name=f"lease of query {query.pk}",
        ):
            documents = backend.search(query.text, k=study.retrieval_k, filters=filters)
        if not documents:
            return query_mark_failed(query_id=query.pk, reason="No sources were found for this question.")
        if sources_miss_question(query.text, documents, corpus=_corpus_term_stats(backend)):
            # The sources do not answer it (docs/backends.md): the annotator is told before ranking their summaries.
            Query.objects.filter(pk=query.pk).update(retrieval_note=NO_MATCH_NOTE)
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
        # The status moves on in the statement that locks the row, so two runs create one set of candidates.
        if not Query.objects.filter(pk=query.pk, status=Query.Status.RETRIEVING).update(status=Query.Status.GENERATING):
            return Query.objects.get(pk=query.pk)
        query.status = Query.Status.GENERATING
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
        for candidate_id in query.candidates.order_by().values_list("pk", flat=True):
            candidate_send(candidate_id=candidate_id)
    return query


def query_claim(*, query_id: int, redelivered: bool = False) -> bool:
    """Take the retrieval's lease for this worker: only where none is live (none taken, or lapsed: its worker
    died), or for a redelivered message (the broker redelivers only when the holder died: kernel.leases).
    One statement, so of two workers at once only one claims it."""
    now = timezone.now()
    claimable = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    if redelivered:
        claimable |= Q(lease_expires_at__isnull=False)
    return bool(
        Query.objects.filter(claimable, pk=query_id, status=Query.Status.RETRIEVING).update(
            lease_expires_at=now + timedelta(seconds=settings.BACKGROUND_LEASE_S)
        )
    )


def query_lease_renew(*, query_id: int, seconds: float | None = None) -> bool:
    """Hold the retrieval's lease for `seconds` more (default: the background lease) while it is retrieving:
    the heartbeat during the search, and the task while a retry waits out its backoff."""
    duration = timedelta(seconds=settings.BACKGROUND_LEASE_S if seconds is None else seconds)
    return bool(
        Query.objects.filter(pk=query_id, status=Query.Status.RETRIEVING).update(
            lease_expires_at=timezone.now() + duration
        )
    )


def _duration(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60} minutes" if seconds % 60 == 0 else f"{seconds} seconds"


def query_mark_failed(*, query_id: int, reason: str) -> Query:
    """The end of a retrieval that cannot succeed; the annotator may discard the question or retry it. Logged here,
    whichever way it failed (the task, the sweeper's deadline, no sources found)."""
    if Query.objects.filter(pk=query_id, status=Query.Status.RETRIEVING).update(
        status=Query.Status.FAILED, failure_reason=reason[:2000], lease_expires_at=None
    ):
        logger.error("retrieval of query %s failed: %s", query_id, reason)
    return Query.objects.get(pk=query_id)


def queries_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper's part for questions: a retrieval whose message was lost is sent again (stamped: once
    per broker start, or per `retrieval_requeue_after()`), one still retrieving past `retrieval_deadline()`
    fails with a reason, and a query whose candidates are all done but that has no bracket gets one."""
    now = now or timezone.now()
    deadline = retrieval_deadline()
    retrieving = Query.objects.filter(status=Query.Status.RETRIEVING).alias(
        asked_at=Coalesce("retrieval_queued_at", "created_at"),
        sent_at=Greatest(
            Coalesce("retrieval_queued_at", "created_at"), Coalesce("retrieval_requeued_at", "created_at")
        ),
    )
    # A question whose retrieval could not be sent waits for the broker (the waiting page says it will
    # start by itself), so the deadline does not fail it; the annotator may set it aside meanwhile.
    late = list(
        retrieving.filter(asked_at__lt=now - deadline, queue_failed_at__isnull=True).values_list("pk", flat=True)
    )
    for query_id in late:
        query_mark_failed(query_id=query_id, reason=f"Retrieval did not finish within {_duration(deadline)}.")
    # Questions whose send failed are sent below, every sweep, by the sender that clears their stamp.
    sendable = retrieving.filter(queue_failed_at__isnull=True)
    # Lost: its last message was sent before the broker last started, or long ago; never one a worker is
    # running now or a retry is waiting out its backoff under (a live lease).
    lost_before = lost_if_sent_before(window=retrieval_requeue_after(), now=now)
    with transaction.atomic():
        lost = list(
            sendable.select_for_update(skip_locked=True)
            .filter(sent_at__lt=lost_before)
            .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
            .exclude(pk__in=late)
            .values_list("pk", flat=True)
        )
        # Stamped, with no lease: the new message claims it (query_claim); a later sweep sends it again only
        # if that message is lost too (after the broker's next start, or the window).
        Query.objects.filter(pk__in=lost).update(retrieval_requeued_at=now, lease_expires_at=None)
        for query_id in lost:
            enqueue_on_commit(RETRIEVE_QUERY, query_id)
        # A retrieval whose lease lapsed lost its worker mid-search (or its retry waited out its backoff and
        # was not taken): sent again now, stamped; the next sweeps leave it to the new message for
        # RETRIEVAL_RESENT_LEASE (a second message would find it claimed anyway).
        orphaned = list(
            sendable.select_for_update(skip_locked=True)
            .filter(lease_expires_at__lt=now)
            .exclude(retrieval_requeued_at__gt=now - RETRIEVAL_RESENT_LEASE)
            .exclude(pk__in=[*late, *lost])
            .values_list("pk", flat=True)
        )
        Query.objects.filter(pk__in=orphaned).update(retrieval_requeued_at=now, lease_expires_at=None)
        for query_id in orphaned:
            enqueue_on_commit(RETRIEVE_QUERY, query_id)
    # A question whose retrieval could not be sent (the broker was down when it was asked) is known to be
    # lost: every sweep tries again until a send succeeds, which clears the stamp.
    unsent = list(retrieving.filter(queue_failed_at__isnull=False).only("pk", "queue_failed_at"))
    for query in unsent:
        _send_on_commit(query, RETRIEVE_QUERY, query.pk)
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
    return {
        "queries_failed": len(late),
        "queries_requeued": len(lost) + len(unsent) + len(orphaned),
        "queries_bracketed": len(unbracketed),
    }


def background_sweep() -> dict[str, int]:
    """Everything the periodic generation sweeper does, and the record that it ran."""
    result = {**queries_sweep(), **candidates_sweep()}
    sweeper_record_run(name="generation", result=result)
    return result


@transaction.atomic
def _query_requeue_failed(*, query: Query) -> tuple[bool, list[int]]:
    """Queue a question's failed work again: (whether its retrieval was, the candidates that were)."""
    # Retrieval failed (before or after its sources were stored: query_retrieve skips a search it has).
    retrieval = query.status == Query.Status.FAILED
    if retrieval:
        Query.objects.filter(pk=query.pk).update(
            status=Query.Status.RETRIEVING, failure_reason="", retrieval_queued_at=timezone.now(), lease_expires_at=None
        )
        _send_on_commit(query, RETRIEVE_QUERY, query.pk)
    retried = [
        candidate.pk
        for candidate in query.candidates.filter(status=Candidate.Status.FAILED)
        if candidate_requeue(candidate=candidate)
    ]
    return retrieval, retried


@transaction.atomic
def query_retry_failed(*, query: Query, by: Any = None, origin: str = AuditOrigin.CODE) -> Query:
    """An admin or owner queues a question's failed retrieval and generations again (the admin's action);
    audited as one row with what was failed."""
    stored = Query.objects.select_for_update(of=("self",)).select_related("participation__study").get(pk=query.pk)
    failure = stored.failure_reason
    retrieval, retried = _query_requeue_failed(query=stored)
    if retrieval or retried:
        audit_record(
            study=stored.participation.study,
            by=by,
            origin=origin,
            event_type=AuditEvent.RETRIEVAL_RETRIED if retrieval else AuditEvent.GENERATION_RETRIED,
            object_type="query",
            object_id=stored.pk,
            object_repr=f"question {stored.index} of {stored.participation.code}",
            before={"status": stored.status, "failure_reason": failure, "failed_candidates": retried},
            after={"status": Query.objects.values_list("status", flat=True).get(pk=stored.pk), "queued": retried},
        )
    query.refresh_from_db()
    return query


def query_mark_wait_shown(*, query: Query) -> Query:
    """Record when the waiting page was first shown (reloads and polls keep the first time)."""
    stamp_first(query, "wait_shown_at")
    return query
