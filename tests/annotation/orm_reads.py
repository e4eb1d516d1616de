"""The ORM reads that annotation/queries.py's written statements stand for: the reference each statement is
held to (tests/annotation/test_queries.py) and the ORM side of bench/queries.py's table."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Count, OuterRef, Subquery

from annotation.models import Candidate, Match, Participation, Query, RetrievedDocument
from annotation.queries import CHOICE_STUDY_FIELDS
from studies.models import Study


def fields_except(prefix: str, model: type[models.Model], keep: tuple[str, ...]) -> tuple[str, ...]:
    """`defer()` arguments for every column of `model` (reached through `prefix`) but its key and `keep`."""
    return tuple(f"{prefix}{f.name}" for f in model._meta.concrete_fields if not f.primary_key and f.name not in keep)


# What a match's two sides show: the summary text (the API and the page alike).
CANDIDATE_SHOWN = tuple(
    name for side in ("left", "right") for name in fields_except(f"{side}__", Candidate, keep=("text",))
)


def participation_with_study(*, annotator: Any, study_slug: str) -> Participation | None:
    return Participation.objects.select_related("study").filter(study__slug=study_slug, annotator=annotator).first()


def query_of_annotator(*, annotator_id: int, query_id: int, fields: tuple[str, ...]) -> Query | None:
    return Query.objects.only(*fields).filter(pk=query_id, participation__annotator=annotator_id).first()


def documents_values(*, query_id: int, names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return list(RetrievedDocument.objects.filter(query_id=query_id).order_by("rank").values_list(*names))


def candidate_progress_values(*, query_id: int) -> list[tuple[Any, ...]]:
    return list(Candidate.objects.filter(query_id=query_id).order_by("id").values_list("status", "attempts"))


def candidate_for_generation(*, candidate_id: int) -> Candidate | None:
    return (
        Candidate.objects.select_related("system", "query__persona", "query__participation__study__prompt_template")
        .only(
            "status",
            "attempts",
            "query_id",
            "system_id",
            *(f"system__{n}" for n in ("condition", "model_name", "generation_backend", "backend_settings")),
            *(f"query__{n}" for n in ("text", "persona_id", "participation_id")),
            *(f"query__persona__{n}" for n in ("role", "domain", "expertise", "research_area", "use_case")),
            "query__participation__study_id",
            "query__participation__study__prompt_template_id",
            *(
                f"query__participation__study__prompt_template__{n}"
                for n in ("name", "version", "body", "persona_block")
            ),
        )
        .filter(pk=candidate_id)
        .first()
    )


def query_has_unfinished(*, query_id: int) -> bool:
    return Candidate.objects.filter(query_id=query_id).exclude(status=Candidate.Status.DONE).exists()


def bracket_slots(*, bracket_id: int) -> list[tuple[Any, ...]]:
    return list(
        Match.objects.filter(bracket_id=bracket_id).values_list("round", "index", "status", "judgment__winner_id")
    )


def match_current_shown(*, annotator_id: int, query_id: int) -> Match | None:
    """The current-match API's read (match_current_shown)."""
    return (
        Match.objects.filter(
            status=Match.Status.PENDING,
            bracket__query_id=query_id,
            bracket__query__participation__annotator=annotator_id,
        )
        .select_related("bracket__query__participation__study", "left", "right")
        .defer(
            *CANDIDATE_SHOWN,
            *fields_except("bracket__query__", Query, keep=("participation",)),
            *fields_except(
                "bracket__query__participation__",
                Participation,
                keep=("study", "annotator", "completed_at", "stopped_at", "screened_out_at"),
            ),
            *fields_except("bracket__query__participation__study__", Study, keep=("status",)),
        )
        .order_by("round", "index")
        .first()
    )


def match_current_of(*, participation: Any, index: int) -> Match | None:
    """The comparison page's read (match_current_of), the question's number as `query_number` counts it."""
    earlier = (
        Query.objects.filter(
            participation_id=OuterRef("bracket__query__participation_id"), index__lte=OuterRef("bracket__query__index")
        )
        .exclude(status=Query.Status.DISCARDED)
        .values("participation_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    match = (
        Match.objects.filter(
            status=Match.Status.PENDING, bracket__query__participation=participation, bracket__query__index=index
        )
        .select_related("bracket__query", "left", "right")
        .defer(*CANDIDATE_SHOWN)
        .annotate(number=Subquery(earlier))
        .order_by("round", "index")
        .first()
    )
    if match is not None:
        match.bracket.query.number = match.number  # type: ignore[attr-defined]
    return match


def bracket_matches_locked(*, match_id: int) -> list[Match]:
    """Recording a choice's locked read (_bracket_matches_locked)."""
    return list(
        Match.objects.select_for_update(of=("self", "bracket"))
        .select_related("bracket__query__participation__study", "judgment")
        .defer(
            *fields_except("bracket__query__", Query, keep=("participation", "index", "status", "text")),
            *fields_except("bracket__query__participation__", Participation, keep=("annotator", "study", "source")),
            *fields_except("bracket__query__participation__study__", Study, keep=CHOICE_STUDY_FIELDS),
        )
        .filter(bracket__matches=match_id)
        .order_by("round", "index")
    )
