"""Every state change of a study: keyword-only, typed, atomic. Views, the API, admin and tasks call these."""

from __future__ import annotations

import logging
import random
import secrets
import string
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.backends.registry import get_generation_backend, get_retrieval_backend
from annotation.models import (
    Bracket,
    Candidate,
    Invitation,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    PromptTemplate,
    Query,
    RetrievedDocument,
    Study,
    StudySystem,
)
from annotation.prompts import DEFAULT_BODY, DEFAULT_PERSONA_BLOCK, DEFAULT_TEMPLATE_NAME, render_prompt
from kernel.backends import BackendError, Document, GenerationRequest
from kernel.exceptions import ApplicationError

logger = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread
PERSONA_FIELDS = ("role", "domain", "expertise", "research_area", "use_case")
# A candidate left "running" longer than this is presumed lost with its worker and is requeued.
STUCK_AFTER = timedelta(minutes=10)


def _code(length: int = 8) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(length))


def _on_commit(task: Any, *args: Any) -> None:
    transaction.on_commit(lambda: task.delay(*args))


# --- studies -------------------------------------------------------------------------------------


def prompt_template_default() -> PromptTemplate:
    template, _ = PromptTemplate.objects.get_or_create(
        name=DEFAULT_TEMPLATE_NAME, version=1, defaults={"body": DEFAULT_BODY, "persona_block": DEFAULT_PERSONA_BLOCK}
    )
    return template


def study_validate_design(*, study: Study) -> None:
    """A study can open only with a playable bracket: a power of two of systems, at least two."""
    count = study.systems.count()
    if count < 2 or count & (count - 1):
        raise ApplicationError(
            f"A single-elimination bracket needs 2, 4 or 8 systems; this study has {count}.", field="systems"
        )


@transaction.atomic
def study_create(
    *,
    slug: str,
    title: str,
    instructions: str = "",
    consent_text: str = "",
    queries_per_annotator: int = 8,
    retrieval_backend: str = "demo",
    retrieval_k: int = 10,
    systems: Iterable[dict[str, Any]] | None = None,
    status: str = Study.Status.DRAFT,
) -> Study:
    """Create a study with its systems; the default design is two models crossed with two conditions."""
    if Study.objects.filter(slug=slug).exists():
        raise ApplicationError(f"A study with the slug {slug!r} already exists.", field="slug")
    study = Study.objects.create(
        slug=slug,
        title=title,
        instructions=instructions,
        consent_text=consent_text,
        queries_per_annotator=queries_per_annotator,
        retrieval_backend=retrieval_backend,
        retrieval_k=retrieval_k,
        prompt_template=prompt_template_default(),
    )
    if systems is None:
        systems = [
            {"label": f"{model}-{condition}", "model_name": model, "condition": condition}
            for model in ("extractive-centroid", "extractive-mmr")
            for condition in (StudySystem.Condition.PERSONA, StudySystem.Condition.GENERIC)
        ]
    for order, spec in enumerate(systems):
        StudySystem.objects.create(study=study, order=order, **spec)
    if status != Study.Status.DRAFT:
        study_set_status(study=study, status=status)
    return study


@transaction.atomic
def study_set_status(*, study: Study, status: str) -> Study:
    if status not in Study.Status.values:
        raise ApplicationError(f"Unknown status {status!r}.", field="status")
    if status == Study.Status.OPEN:
        study_validate_design(study=study)
    study.status = status
    study.save(update_fields=["status", "updated_at"])
    return study


def _require_open(study: Study) -> None:
    if study.status == Study.Status.PAUSED:
        raise ApplicationError(
            "This study is paused. Please come back later; your answers so far are saved.", status=403
        )
    if study.status != Study.Status.OPEN:
        raise ApplicationError("This study is not open for annotation.", status=403)


# --- invitations and participation ---------------------------------------------------------------


@transaction.atomic
def invitation_create_bulk(
    *, study: Study, count: int, max_uses: int = 1, expires_at: datetime | None = None, note: str = ""
) -> list[Invitation]:
    if not 1 <= count <= 1000:
        raise ApplicationError("Create between 1 and 1000 invitations at a time.", field="count")
    if max_uses < 1:
        raise ApplicationError("An invitation must allow at least one use.", field="max_uses")
    return [
        Invitation.objects.create(
            study=study, token=secrets.token_urlsafe(24), max_uses=max_uses, expires_at=expires_at, note=note
        )
        for _ in range(count)
    ]


def invitation_check(*, token: str) -> Invitation:
    """The invitation behind a link, or a clear reason why it cannot be used."""
    invitation = Invitation.objects.select_related("study").filter(token=token).first()
    if invitation is None:
        raise ApplicationError("This invitation link is not valid. Please check the link you were sent.", status=404)
    if invitation.expires_at and invitation.expires_at <= timezone.now():
        raise ApplicationError("This invitation has expired. Please ask the research team for a new link.", status=410)
    _require_open(invitation.study)
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, annotator: Any, consent: bool) -> Participation:
    """Join a study through an invitation. Accepting twice returns the same participation."""
    invitation = invitation_check(token=token)
    if annotator is not None and annotator.is_authenticated:
        existing = Participation.objects.filter(study=invitation.study, annotator=annotator).first()
        if existing is not None:
            return existing
    if not consent:
        raise ApplicationError("Please confirm that you agree to take part.", field="consent")
    # Conditional increment: two people racing for the last use cannot both get it.
    claimed = Invitation.objects.filter(pk=invitation.pk, uses__lt=F("max_uses")).update(uses=F("uses") + 1)
    if not claimed:
        raise ApplicationError(
            "This invitation has already been used. Please ask the research team for a new link.", status=410
        )
    if annotator is None or not annotator.is_authenticated:
        user_model = get_user_model()
        annotator = user_model.objects.create_user(username=f"annotator-{_code(12).lower()}")
        annotator.set_unusable_password()
        annotator.save()
    for _ in range(5):
        code = _code()
        if not Participation.objects.filter(code=code).exists():
            break
    return Participation.objects.create(
        study=invitation.study, annotator=annotator, invitation=invitation, code=code, consented_at=timezone.now()
    )


def persona_current(*, participation: Participation) -> PersonaProfile | None:
    return participation.personas.order_by("-version").first()


@transaction.atomic
def persona_save(*, participation: Participation, data: dict[str, str]) -> PersonaProfile:
    """Store a new persona version; allowed until the first query is asked."""
    Participation.objects.select_for_update().filter(pk=participation.pk).first()
    if participation.queries.exists():
        raise ApplicationError("Your profile is fixed once you have asked your first question.", status=409)
    cleaned = {name: (data.get(name) or "").strip() for name in PERSONA_FIELDS}
    for name in ("role", "domain", "expertise", "use_case"):
        if not cleaned[name]:
            raise ApplicationError("This field is required.", field=name)
    if cleaned["expertise"] not in PersonaProfile.Expertise.values:
        raise ApplicationError("Choose one of the listed levels of expertise.", field="expertise")
    current = persona_current(participation=participation)
    if current is not None and current.as_dict() == cleaned:
        return current
    return PersonaProfile.objects.create(
        participation=participation, version=(current.version + 1) if current else 1, **cleaned
    )


def participation_queries_used(*, participation: Participation) -> int:
    return participation.queries.exclude(status=Query.Status.DISCARDED).count()


@transaction.atomic
def participation_finish(*, participation: Participation) -> Participation:
    """End the annotator's session (after the last query, or early); idempotent."""
    participation = Participation.objects.select_for_update().get(pk=participation.pk)
    if participation.completed_at is None:
        open_query = participation.queries.filter(
            status__in=[Query.Status.RETRIEVING, Query.Status.GENERATING, Query.Status.READY, Query.Status.FAILED]
        ).exists()
        if open_query:
            raise ApplicationError("Please finish ranking your current question first.", status=409)
        participation.completed_at = timezone.now()
        participation.completion_code = _code(10)
        participation.save(update_fields=["completed_at", "completion_code"])
    return participation


# --- queries, retrieval and generation -----------------------------------------------------------


@transaction.atomic
def query_submit(*, participation: Participation, text: str, client_token: str) -> Query:
    """Ask a question; retrieval and generation follow in the background. Resubmitting is harmless."""
    participation = Participation.objects.select_for_update().select_related("study").get(pk=participation.pk)
    study = participation.study
    if client_token:
        existing = participation.queries.filter(client_token=client_token).first()
        if existing is not None:
            return existing
    _require_open(study)
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
    from annotation.tasks import retrieve_query

    _on_commit(retrieve_query, query.pk)
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
                Candidate(query=query, system_id=system_id, queued_at=now)
                for system_id in study.systems.values_list("pk", flat=True)
            ],
            ignore_conflicts=True,  # one candidate per system, guaranteed by the unique constraint
        )
        query.status = Query.Status.GENERATING
        query.save(update_fields=["status"])
        from annotation.tasks import generate_candidate

        for candidate_id in query.candidates.order_by().values_list("pk", flat=True):
            _on_commit(generate_candidate, candidate_id)
    return query


def query_mark_failed(*, query_id: int, reason: str) -> Query:
    Query.objects.filter(pk=query_id, status=Query.Status.RETRIEVING).update(
        status=Query.Status.FAILED, failure_reason=reason[:2000]
    )
    return Query.objects.get(pk=query_id)


def _documents(query: Query) -> list[Document]:
    return [
        Document(
            external_id=d.external_id,
            title=d.title,
            abstract=d.abstract,
            url=d.url,
            year=d.year,
            venue=d.venue,
            authors=tuple(d.authors),
        )
        for d in query.documents.order_by("rank")
    ]


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
    documents = _documents(query)
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
        from annotation.tasks import generate_candidate

        _on_commit(generate_candidate, candidate.pk)
    candidate.refresh_from_db()
    return candidate


def candidates_retry_failed(*, queryset: Iterable[Candidate]) -> int:
    return sum(1 for c in queryset if candidate_retry(candidate=c).status == Candidate.Status.QUEUED)


@transaction.atomic
def query_retry_failed(*, query: Query) -> Query:
    if query.status == Query.Status.FAILED and not query.documents.exists():
        Query.objects.filter(pk=query.pk).update(status=Query.Status.RETRIEVING, failure_reason="")
        from annotation.tasks import retrieve_query

        _on_commit(retrieve_query, query.pk)
    for candidate in query.candidates.filter(status=Candidate.Status.FAILED):
        candidate_retry(candidate=candidate)
    query.refresh_from_db()
    return query


def candidates_requeue_stuck(*, older_than: timedelta = STUCK_AFTER) -> int:
    """The sweeper: candidates left running by a worker that died go back to the queue."""
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


# --- the tournament ------------------------------------------------------------------------------


def _round_label(round_number: int, total_rounds: int, letters: str) -> str:
    if round_number == total_rounds:
        return "final"
    return f"round{round_number}_{letters.lower()}"


def query_advance_if_generated(*, query_id: int) -> Query:
    """Once every candidate is done, draw the bracket; if any failed, the query waits for a retry."""
    query = Query.objects.select_for_update().get(pk=query_id)
    unfinished = Candidate.objects.filter(query_id=query_id).exclude(status=Candidate.Status.DONE).order_by()
    if query.status == Query.Status.GENERATING and not unfinished.exists():
        bracket_create(query=query)
    return query


def bracket_create(*, query: Query, seed: int | None = None) -> Bracket:
    """Randomly assign candidates to positions A, B, C, … and create the first round's matches."""
    existing = Bracket.objects.filter(query=query).first()
    if existing is not None:
        return existing
    seed = secrets.randbits(62) if seed is None else seed
    rng = random.Random(seed)
    candidate_ids = list(query.candidates.order_by("system__order", "pk").values_list("pk", flat=True))
    rng.shuffle(candidate_ids)
    for position, candidate_id in enumerate(candidate_ids):
        Candidate.objects.filter(pk=candidate_id).update(position=string.ascii_uppercase[position])
    bracket = Bracket.objects.create(query=query, seed=seed, size=len(candidate_ids))
    for index in range(len(candidate_ids) // 2):
        pair = candidate_ids[2 * index : 2 * index + 2]
        _match_create(bracket=bracket, round_number=1, index=index, entrants=pair)
    Query.objects.filter(pk=query.pk).update(status=Query.Status.READY)
    return bracket


def _match_create(*, bracket: Bracket, round_number: int, index: int, entrants: Sequence[int | None]) -> Match:
    """Create a match between two candidate ids; a missing entrant (after a "neither") skips it."""
    span = 2**round_number
    letters = string.ascii_uppercase[index * span : (index + 1) * span]
    label = _round_label(round_number, bracket.rounds, letters)
    left_id, right_id = entrants
    if left_id is None or right_id is None:
        return Match.objects.create(
            bracket=bracket, round=round_number, index=index, label=label, status=Match.Status.SKIPPED
        )
    # Left/right placement is random too, reproducible from the bracket's seed.
    if random.Random(f"{bracket.seed}:{round_number}:{index}").random() < 0.5:
        left_id, right_id = right_id, left_id
    return Match.objects.create(
        bracket=bracket, round=round_number, index=index, label=label, left_id=left_id, right_id=right_id
    )


def _match_winner_id(match: Match) -> int | None:
    if match.status != Match.Status.ANSWERED:
        return None
    return match.judgment.winner_id


def _tournament_advance(*, bracket: Bracket, match: Match) -> None:
    """After a match resolves, create the next round's match once its sibling has resolved too.
    A "neither" (or a skipped match) leaves no winner, so the match it feeds is skipped."""
    while match.round < bracket.rounds:
        sibling = (
            Match.objects.filter(bracket=bracket, round=match.round, index=match.index ^ 1)
            .select_related("judgment")
            .first()
        )
        if sibling is None or sibling.status == Match.Status.PENDING:
            return
        first, second = sorted([match, sibling], key=lambda m: m.index)
        if Match.objects.filter(bracket=bracket, round=match.round + 1, index=match.index // 2).exists():
            return
        match = _match_create(
            bracket=bracket,
            round_number=match.round + 1,
            index=match.index // 2,
            entrants=[_match_winner_id(first), _match_winner_id(second)],
        )
        if match.status == Match.Status.PENDING:
            return
    if not bracket.matches.filter(status=Match.Status.PENDING).exists():
        Query.objects.filter(pk=bracket.query_id).update(status=Query.Status.RANKED)


def match_mark_shown(*, match: Match) -> Match:
    """Record when a match was first put in front of the annotator (reloads keep the first time)."""
    if match.shown_at is None:
        now = timezone.now()
        if Match.objects.filter(pk=match.pk, shown_at__isnull=True).update(shown_at=now):
            match.shown_at = now
        else:
            match.refresh_from_db(fields=["shown_at"])
    return match


def _already_answered(existing: Judgment, choice: str) -> Judgment:
    if existing.choice == choice:
        return existing
    raise ApplicationError("This comparison was already answered; answers cannot be changed.", status=409)


@transaction.atomic
def judgment_record(*, match: Match, choice: str, by: Participation) -> Judgment:
    """Answer a match. The same answer again is returned unchanged; a different one is refused."""
    if choice not in Judgment.Choice.values:
        raise ApplicationError("Choose left, right or neither.", field="choice")
    # Lock only the match row: locking the study too would queue every annotator behind one row.
    match = (
        Match.objects.select_for_update(of=("self",))
        .select_related("bracket__query__participation__study", "judgment")
        .get(pk=match.pk)
    )
    query = match.bracket.query
    if query.participation_id != by.pk:
        raise ApplicationError("Not found.", status=404)
    existing = getattr(match, "judgment", None)
    if existing is not None:
        return _already_answered(existing, choice)
    if match.status == Match.Status.SKIPPED:
        raise ApplicationError("This comparison was skipped and takes no answer.", status=409)
    _require_open(query.participation.study)
    now = timezone.now()
    shown_at = match.shown_at or now
    winner_id = {"left": match.left_id, "right": match.right_id}.get(choice)
    try:
        with transaction.atomic():
            judgment = Judgment.objects.create(
                match=match,
                choice=choice,
                winner_id=winner_id,
                shown_at=shown_at,
                answered_at=now,
                seconds_on_page=max(0.0, (now - shown_at).total_seconds()),
            )
    except IntegrityError:
        # A concurrent request answered first (the one-to-one key refused ours): same rules apply.
        return _already_answered(Judgment.objects.get(match=match), choice)
    match.status = Match.Status.ANSWERED
    match.save(update_fields=["status"])
    _tournament_advance(bracket=match.bracket, match=match)
    return judgment
