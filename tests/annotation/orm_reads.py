"""The ORM reads that the hot paths' plain-SQL statements replaced (annotation.selectors.tournament,
annotation.services.tournament, 2026-12-02), kept as the reference the SQL is held to
(tests/annotation/test_current_match_sql.py, test_choice_sql.py)."""

from __future__ import annotations

from typing import Any

from django.db import models

from annotation.models import Candidate, Match, Participation, Query
from annotation.services.tournament import CHOICE_STUDY_FIELDS
from studies.models import Study


def fields_except(prefix: str, model: type[models.Model], keep: tuple[str, ...]) -> tuple[str, ...]:
    """`defer()` arguments for every column of `model` (reached through `prefix`) but its key and `keep`."""
    return tuple(f"{prefix}{f.name}" for f in model._meta.concrete_fields if not f.primary_key and f.name not in keep)


# What a match's two sides show: the summary text (the API and the page alike).
CANDIDATE_SHOWN = tuple(
    name for side in ("left", "right") for name in fields_except(f"{side}__", Candidate, keep=("text",))
)


def current_match_api(*, annotator_id: int, query_id: int) -> Match | None:
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


def current_match_page(*, participation: Any, index: int) -> Match | None:
    """The comparison page's read (match_current_of)."""
    return (
        Match.objects.filter(
            status=Match.Status.PENDING, bracket__query__participation=participation, bracket__query__index=index
        )
        .select_related("bracket__query", "left", "right")
        .defer(*CANDIDATE_SHOWN)
        .order_by("round", "index")
        .first()
    )


def bracket_locked(match_id: int) -> list[Match]:
    """Recording a choice's locked read (_bracket_matches_locked)."""
    return list(
        Match.objects.select_for_update(of=("self", "bracket"))
        .select_related("bracket__query__participation__study", "judgment")
        .defer(
            *fields_except("bracket__query__", Query, keep=("participation", "index", "status", "text")),
            *fields_except("bracket__query__participation__", Participation, keep=("annotator", "study")),
            *fields_except("bracket__query__participation__study__", Study, keep=CHOICE_STUDY_FIELDS),
        )
        .filter(bracket__matches=match_id)
        .order_by("round", "index")
    )
