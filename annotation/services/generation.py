"""Generating the candidate summaries of a query: claiming one under a lease, generating it while a
heartbeat renews the lease, recording a failure, retrying, the sweeper that sends again what a dead
worker left behind, and drawing the bracket once all are done."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation import queries
from annotation.models import Candidate, Query, SweeperRun
from annotation.selectors.query import query_documents, query_with_study
from annotation.services.tournament import bracket_create
from generation.citations import check_citations
from generation.registry import get_generation_backend
from kernel import leases
from kernel.backends import BackendError, GenerationRequest
from kernel.db import connection_release
from kernel.heartbeat import heartbeat
from kernel.similarity import likeness
from kernel.tasks import enqueue_on_commit, lost_if_sent_before
from studies.models import Study, StudySystem
from studies.models_audit import AuditEvent, AuditOrigin
from studies.prompts import render_prompt
from studies.services.audit import audit_record
from studies.services.study import prompt_template_default

logger = logging.getLogger(__name__)

# The generation task, sent by the name it is registered and routed under (annotation/tasks.py imports this
# module, so this module names the task rather than import it: kernel/tasks.py).
GENERATE_CANDIDATE = "annotation.tasks.generate_candidate"
# Attempts per candidate, each one model call (the task owns the retries: annotation/tasks.py). A
# worker lost mid-call costs an attempt too, so a candidate that kills its worker ends failed.
MAX_ATTEMPTS = 4
# Under the identical policy "regenerate", a candidate (nearly) identical to another of its query is generated
# again at most this often; a pair still alike after that is shown with the notice (policy "notice").
MAX_REGENERATIONS = 2


def _lease() -> timedelta:
    return timedelta(seconds=settings.BACKGROUND_LEASE_S)


def requeue_queued_after() -> timedelta:
    """A queued candidate's message is sent again at most this often when the broker cannot say it lost it
    (SWEEP_REQUEUE_QUEUED_AFTER_S); until then a backlog just waits its turn."""
    return timedelta(seconds=settings.SWEEP_REQUEUE_QUEUED_AFTER_S)


def candidate_claim(
    *,
    candidate: Candidate,
    redelivered: bool = False,
    prompt: str | None = None,
    generation_settings: dict[str, Any] | None = None,
) -> Candidate | None:
    """Move a candidate, as read by `queries.candidate_for_generation`, to running under a fresh lease (storing
    `prompt` and the `generation_settings` this attempt calls the model with). None when another worker holds
    a live lease or claimed it since it was read, it is already finished, or its attempts are spent (then it
    is failed with the last reason). A redelivered task may take over at once: the broker redelivers only
    when the holder died."""
    now = timezone.now()
    claimable = leases.claimable(
        queued=Candidate.Status.QUEUED, running=Candidate.Status.RUNNING, now=now, redelivered=redelivered
    )
    attempt = candidate.attempts + 1
    changes: dict[str, Any] = {"prompt": prompt} if prompt is not None else {}
    if generation_settings is not None:
        changes["generation_settings"] = generation_settings
    # One statement claims it (the profiled hot path: no transaction, no separate locking read). The UPDATE
    # locks the row, and a concurrent claimer's UPDATE re-checks the condition once the first commits, so
    # only one of them claims it; the attempt count read with the row must still be the row's, so the
    # attempt this worker records under is exactly the one it claimed.
    claimed = candidate.attempts < MAX_ATTEMPTS and Candidate.objects.filter(
        claimable, pk=candidate.pk, attempts=candidate.attempts
    ).update(
        status=Candidate.Status.RUNNING, started_at=now, lease_expires_at=now + _lease(), attempts=attempt, **changes
    )
    if not claimed:
        with transaction.atomic():
            row = Candidate.objects.select_for_update().filter(claimable, pk=candidate.pk).first()
            if row is not None and row.attempts >= MAX_ATTEMPTS:
                last = row.failure_reason.removeprefix("Retrying after: ") or "the worker stopped while generating it"
                candidate_mark_failed(
                    candidate_id=row.pk, reason=f"Gave up after {row.attempts} attempts; the last: {last}"
                )
        return None
    candidate.status, candidate.started_at, candidate.attempts = Candidate.Status.RUNNING, now, attempt
    candidate.lease_expires_at = now + _lease()
    if prompt is not None:
        candidate.prompt = prompt
    if generation_settings is not None:
        candidate.generation_settings = generation_settings
    return candidate


def candidate_lease_renew(*, candidate_id: int, attempt: int) -> bool:
    """The heartbeat: keep the lease of the attempt still running (not one that was taken over)."""
    return bool(
        Candidate.objects.filter(pk=candidate_id, status=Candidate.Status.RUNNING, attempts=attempt).update(
            lease_expires_at=timezone.now() + _lease()
        )
    )


def candidate_generate(*, candidate_id: int, redelivered: bool = False, spent_s: float = 0.0) -> Candidate | None:
    """Generate one candidate summary. A backend failure is raised as BackendError for the task to
    retry or record (`candidate_retry_later`, `candidate_mark_failed`); a bad prompt template is a
    permanent BackendError with a reason an administrator can act on. `spent_s`: the seconds this candidate's
    earlier attempts waited on the model server, which a model-server backend takes off this attempt's time-out
    (`GenerationRequest.spent_s`; docs/backends.md, "Retries and time limits").

    Statements when the model answers (tests/annotation/test_query_counts.py pins them): the candidate
    with its system, question, persona and template; the sources; the claim, which stores the prompt and the
    backend settings it is generated with; the result; whether any candidate of the question is unfinished.
    The last one to finish also draws the bracket, under the question's lock (`query_advance_if_generated`)."""
    candidate = queries.candidate_for_generation(candidate_id=candidate_id)
    if candidate is None or candidate.status == Candidate.Status.DONE:
        return None
    query = candidate.query
    system = candidate.system
    template = query.participation.study.prompt_template or prompt_template_default()
    documents = query_documents(query=query)
    persona = query.persona.as_dict() if system.condition == StudySystem.Condition.PERSONA else None
    try:
        prompt = render_prompt(
            body=template.body,
            persona_block=template.persona_block,
            query=query.text,
            documents=documents,
            persona=persona,
        )
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        # Claimed all the same, so that only the worker holding the candidate records the failure.
        if candidate_claim(candidate=candidate, redelivered=redelivered) is None:
            return None
        raise BackendError(
            f"The prompt template {template} could not be filled in: {error}. Save a corrected version of it "
            "and retry.",
            transient=False,
        ) from error
    # The settings read with the candidate are the ones the backend below is built from: the claim records
    # them, so that a candidate says what produced it after a system's operational settings changed
    # (studies/services/study.py lets them change on a study whose summaries exist).
    claimed = candidate_claim(
        candidate=candidate, redelivered=redelivered, prompt=prompt, generation_settings=system.backend_settings
    )
    if claimed is None:
        return None
    request = GenerationRequest(
        query=query.text,
        documents=documents,
        prompt=prompt,
        model=system.model_name,
        persona=persona,
        settings=system.backend_settings,
        spent_s=spent_s,
    )
    backend = get_generation_backend(system.generation_backend, system.backend_settings)
    attempt = candidate.attempts
    # The model's answer takes seconds: the connection goes back to the process's pool meanwhile, so that a
    # threads-pool worker of many slots holds few (docs/deploy.md, "Database connections").
    connection_release()
    with heartbeat(
        lambda: candidate_lease_renew(candidate_id=candidate.pk, attempt=attempt),
        every=settings.BACKGROUND_HEARTBEAT_S,
        name=f"lease of candidate {candidate.pk}",
    ):
        generation = backend.generate(request)
    if not generation.text.strip():
        raise BackendError("The model returned an empty summary.", transient=True)
    flags = citation_flags(text=generation.text, n_documents=len(documents))
    # Only the attempt that holds the candidate records it: a late twin whose lease was taken over does not.
    updated = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.RUNNING, attempts=attempt).update(
        status=Candidate.Status.DONE,
        text=generation.text,
        raw_response=dict(generation.raw_response),
        usage=dict(generation.usage),
        latency_s=generation.latency_s,
        finish_reason=generation.finish_reason,
        citation_flags=flags,
        failure_reason="",
        finished_at=timezone.now(),
        lease_expires_at=None,
    )
    # Committed before the check below: of candidates finishing at the same moment, the last to commit sees
    # every other one done (each check is a statement of its own, after its own commit), so the bracket is
    # never left undrawn; two that both see it are serialised by the question's lock, and the second finds
    # the bracket drawn. A worker lost in between leaves a question the sweeper brackets (queries_sweep).
    if updated and not queries.query_has_unfinished(query_id=query.pk):
        with transaction.atomic():
            query_advance_if_generated(query_id=query.pk)
    candidate.status = Candidate.Status.DONE if updated else candidate.status
    candidate.text = generation.text
    return candidate


def candidate_retry_later(*, candidate_id: int, reason: str) -> bool:
    """After a transient failure of the attempt running now: True when the candidate is queued for the
    task's next attempt, or still queued (the fault came before the claim: the database out of reach); False
    when its attempts are spent (it is failed with the reason) or another worker has taken it over (it is left
    alone)."""
    running = Candidate.objects.filter(pk=candidate_id, status=Candidate.Status.RUNNING)
    if running.filter(attempts__lt=MAX_ATTEMPTS).update(
        status=Candidate.Status.QUEUED,
        failure_reason=f"Retrying after: {reason}"[:4000],
        queued_at=timezone.now(),
        lease_expires_at=None,
    ):
        return True
    if Candidate.objects.filter(pk=candidate_id, status=Candidate.Status.QUEUED).exists():
        return True
    if running.exists():
        candidate_mark_failed(
            candidate_id=candidate_id, reason=f"Gave up after {MAX_ATTEMPTS} attempts; the last: {reason}"
        )
    return False


def citation_flags(*, text: str, n_documents: int) -> dict[str, Any]:
    result = check_citations(text, n_documents)
    return result.to_dict() if hasattr(result, "to_dict") else dict(vars(result))


def candidate_mark_failed(*, candidate_id: int, reason: str) -> Candidate:
    """The end of a candidate that cannot be generated; the reason is shown to admins (and an annotator may retry).
    Every way a candidate fails comes here, so here the worker's log gets its line: the field test (issue 30) saw
    515 failures shown to annotators and none in the log, because only the task's unexpected errors were logged."""
    failed = (
        Candidate.objects.filter(pk=candidate_id)
        .exclude(status=Candidate.Status.DONE)
        .update(
            status=Candidate.Status.FAILED,
            failure_reason=reason[:4000],
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    )
    if failed:
        logger.error("generation of candidate %s failed: %s", candidate_id, reason)
    return Candidate.objects.get(pk=candidate_id)


@transaction.atomic
def candidate_requeue(*, candidate: Candidate) -> bool:
    """Queue a failed candidate again; False when it was not failed (nothing done). The annotator's "try again"
    reaches it through `query_resend`, unaudited; an admin's retry through `candidate_retry`, audited."""
    updated = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.FAILED).update(
        status=Candidate.Status.QUEUED,
        failure_reason="",
        queued_at=timezone.now(),
        started_at=None,
        finished_at=None,
        attempts=0,  # a retry by a person gets the whole budget again
        lease_expires_at=None,
    )
    if updated:
        Query.objects.filter(pk=candidate.query_id, status=Query.Status.FAILED).update(status=Query.Status.GENERATING)
        candidate_send(candidate_id=candidate.pk)
    return bool(updated)


def candidate_send(*, candidate_id: int) -> None:
    """Send the candidate's generation once the transaction commits. A send the broker refuses (it is
    down or restarting) leaves the candidate queued with no send time (`queued_at` empty): its message is
    known to be lost, and the next sweep sends it again (`candidates_sweep`)."""
    enqueue_on_commit(
        GENERATE_CANDIDATE, candidate_id, on_send_failed=lambda: candidate_mark_unsent(candidate_id=candidate_id)
    )


def candidate_mark_unsent(*, candidate_id: int) -> None:
    """A queued candidate whose message never reached the broker (a send or a retry refused): the next sweep
    sends it again, rather than after `requeue_queued_after()`."""
    Candidate.objects.filter(pk=candidate_id, status=Candidate.Status.QUEUED).update(queued_at=None)


RETRY_AUDITED = ("status", "failure_reason", "attempts")


@transaction.atomic
def candidate_retry(*, candidate: Candidate, by: Any = None, origin: str = AuditOrigin.CODE) -> Candidate:
    """An admin or owner queues a failed candidate again; audited with its failure as it stood."""
    before = (
        Candidate.objects.select_for_update(of=("self",))
        .filter(pk=candidate.pk, status=Candidate.Status.FAILED)
        .values(*RETRY_AUDITED, "system__study_id")
        .first()
    )
    if before is not None and candidate_requeue(candidate=candidate):
        candidate.refresh_from_db()
        audit_record(
            study=Study.objects.get(pk=before.pop("system__study_id")),
            by=by,
            origin=origin,
            event_type=AuditEvent.GENERATION_RETRIED,
            object_type="candidate",
            object_id=candidate.pk,
            object_repr=f"candidate {candidate.pk} of question {candidate.query_id}",
            before=before,
            after={name: getattr(candidate, name) for name in RETRY_AUDITED},
        )
    else:
        candidate.refresh_from_db()
    return candidate


def candidates_retry_failed(*, queryset: Iterable[Candidate], by: Any = None, origin: str = AuditOrigin.CODE) -> int:
    return sum(
        1 for c in queryset if candidate_retry(candidate=c, by=by, origin=origin).status == Candidate.Status.QUEUED
    )


def candidates_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper (every SWEEP_INTERVAL_S from beat): send again the candidates whose worker died
    (running, lease expired) and those whose message may be lost: queued before the broker last started
    (a Redis restarted without persistence), or queued for `requeue_queued_after()`. The rows are locked
    and stamped (`queued_at`) in one transaction, so a backlog is sent again at most once per broker start
    or window, never once per sweep. The attempt cap is enforced when a worker claims the candidate, and
    a message that was only waiting finds its candidate claimed by the first one to arrive."""
    now = now or timezone.now()
    lost_before = lost_if_sent_before(window=requeue_queued_after(), now=now)
    with transaction.atomic():
        due = Candidate.objects.select_for_update(skip_locked=True).filter(
            Q(status=Candidate.Status.RUNNING, lease_expires_at__lt=now)
            | Q(status=Candidate.Status.RUNNING, lease_expires_at__isnull=True, started_at__lt=now - _lease())
            | Q(status=Candidate.Status.QUEUED, queued_at__lt=lost_before)
            | Q(status=Candidate.Status.QUEUED, queued_at__isnull=True)
        )
        due_ids = list(due.values_list("pk", flat=True))
        # Back to queued, stamped: this sweep owns the re-send, the next one skips them.
        Candidate.objects.filter(pk__in=due_ids).update(
            status=Candidate.Status.QUEUED, queued_at=now, lease_expires_at=None
        )
        for candidate_id in due_ids:
            candidate_send(candidate_id=candidate_id)
    if due_ids:
        logger.warning("sweeper: %d candidate(s) sent again: %s", len(due_ids), due_ids[:20])
    return {"candidates_requeued": len(due_ids)}


def sweeper_record_run(*, name: str, result: dict[str, Any]) -> None:
    """A sweeper ran: the admin's banner and the error log check this (annotation.templatetags.sweeper_alert)."""
    SweeperRun.objects.update_or_create(name=name, defaults={"last_run_at": timezone.now(), "last_result": result})


def broker_restarted(*, name: str, started: datetime | None) -> bool:
    """Whether the broker started (`kernel.tasks.broker_started_at`) after sweeper `name` last looked, for
    work that has no send time of its own to compare; what it saw is kept as the row "<name>:broker" of
    SweeperRun. The first look counts as a restart. The start, read from the broker's uptime in whole
    seconds, moves by a second or two between reads; a real restart moves it far more."""
    if started is None:
        return False
    row = f"{name}:broker"
    last = SweeperRun.objects.filter(name=row).values_list("last_result", flat=True).first()
    seen = last.get("broker_started_at") if isinstance(last, dict) else None
    try:
        restarted = not seen or started > datetime.fromisoformat(seen) + timedelta(seconds=5)
    except (TypeError, ValueError):
        restarted = True
    if restarted:
        sweeper_record_run(name=row, result={"broker_started_at": started.isoformat()})
    return restarted


def query_advance_if_generated(*, query_id: int) -> Query:
    """Once every candidate is done, draw the bracket; if any failed, the query waits for a retry. Inside a
    transaction: the question's row is locked, so two candidates finishing at once draw one bracket."""
    query = query_with_study(query_id=query_id, lock=True)
    if query.status == Query.Status.GENERATING and not queries.query_has_unfinished(query_id=query_id):
        study = query.participation.study
        if not _candidates_regenerate_identical(query=query, policy=study.identical_policy):
            bracket_create(query=query, study=study)
    return query


def _candidates_regenerate_identical(*, query: Query, policy: str) -> bool:
    """Under the identical policy "regenerate": queue again the later candidate of each identical or
    near-identical pair that has regenerations left. True when any was queued (the bracket waits for it)."""
    if policy != Study.IdenticalPolicy.REGENERATE:
        return False
    candidates = list(Candidate.objects.filter(query_id=query.pk).order_by("system__order", "pk"))
    again: list[int] = []
    for i, first in enumerate(candidates):
        for second in candidates[i + 1 :]:
            if first.pk in again or second.pk in again or second.regenerations >= MAX_REGENERATIONS:
                continue
            if likeness(first.text, second.text).kind:
                again.append(second.pk)
    if not again:
        return False
    Candidate.objects.filter(pk__in=again).update(
        status=Candidate.Status.QUEUED,
        text="",
        attempts=0,
        regenerations=F("regenerations") + 1,
        queued_at=timezone.now(),
        started_at=None,
        finished_at=None,
        lease_expires_at=None,
        failure_reason="",
    )
    for candidate_id in again:  # a failed send is sent again by the generation sweeper
        candidate_send(candidate_id=candidate_id)
    return True
