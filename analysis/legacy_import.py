"""Import the paper's own platform export (SPEC section 5) into a study, so its analysis runs here.

The old platform recorded no left/right placement or display times: in round 1 the first letter of the
pair is stored as shown left, in the final the AB winner; `shown_at` and `seconds_on_page` stay empty.
Re-importing the same file adds nothing twice (annotators by pseudonym, queries by index).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from analysis.legacy import LegacyAnnotation, LegacyExport, parse_legacy_export, pseudonym
from annotation.models import (
    Bracket,
    Candidate,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    Query,
    RetrievedDocument,
    Study,
    StudySystem,
)
from annotation.services.study import study_create

NEITHER = "N"


@dataclass(frozen=True)
class LegacyImportResult:
    study: str
    annotators: int
    queries_added: int
    queries_skipped: int
    judgments_added: int
    warnings: tuple[str, ...]


def _persona(answers: dict[str, Any]) -> dict[str, str]:
    """Map free-form pre-task answers onto the persona fields; everything else is kept in use_case."""
    lowered = {str(k).lower(): ("" if v is None else str(v)) for k, v in answers.items()}

    def pick(*keys: str) -> str:
        for key in lowered:
            if any(k in key for k in keys) and lowered[key]:
                return lowered[key][:200]
        return ""

    expertise_text = pick("expertise", "experience").lower()
    expertise = next(
        (level for level in ("novice", "intermediate", "expert") if level in expertise_text), "intermediate"
    )
    extra = "; ".join(f"{k}: {v}" for k, v in lowered.items() if v)
    return {
        "role": pick("role", "position", "occupation") or "not recorded",
        "domain": pick("domain", "field") or "not recorded",
        "expertise": expertise,
        "research_area": pick("research", "area"),
        "use_case": (pick("use case", "use_case", "purpose", "goal") or extra or "not recorded")[:1000],
    }


def _systems(study: Study, export: LegacyExport) -> dict[tuple[str, str], StudySystem]:
    cells = sorted({(c.model, c.condition) for a in export.annotators for ann in a.annotations for c in ann.candidates})
    systems = {}
    for order, (model, condition) in enumerate(cells):
        system, _ = StudySystem.objects.get_or_create(
            study=study,
            model_name=model,
            condition=condition,
            defaults={
                "label": f"{model}-{condition}"[:80].replace("/", "-").replace(" ", "-"),
                "order": order,
                "generation_backend": "openai",
            },
        )
        systems[(model, condition)] = system
    return systems


def _add_annotation(participation: Participation, persona: PersonaProfile, ann: LegacyAnnotation, systems: dict) -> int:
    query = Query.objects.create(
        participation=participation,
        index=ann.query_index,
        text=ann.query,
        client_token=f"legacy-{ann.query_index}",
        persona=persona,
        status=Query.Status.RANKED,
        retrieval_backend="openalex",
    )
    RetrievedDocument.objects.bulk_create(
        RetrievedDocument(
            query=query, rank=rank, external_id=paper, title=paper, abstract="", url=f"https://openalex.org/{paper}"
        )
        for rank, paper in enumerate(ann.paper_ids, start=1)
    )
    candidates = {}
    for legacy in ann.candidates:
        candidates[legacy.label] = Candidate.objects.create(
            query=query,
            system=systems[(legacy.model, legacy.condition)],
            position=legacy.label,
            text=legacy.text or "(empty)",
            status=Candidate.Status.DONE,
            finished_at=timezone.now(),
        )
    bracket = Bracket.objects.create(query=query, seed=0)
    now = timezone.now()
    added = 0

    def play(round_number: int, index: int, label: str, left: str, right: str, answer: str | None) -> None:
        nonlocal added
        if answer is None:
            Match.objects.create(
                bracket=bracket, round=round_number, index=index, label=label, status=Match.Status.SKIPPED
            )
            return
        match = Match.objects.create(
            bracket=bracket,
            round=round_number,
            index=index,
            label=label,
            left=candidates[left],
            right=candidates[right],
            status=Match.Status.ANSWERED,
        )
        choice = "neither" if answer == NEITHER else ("left" if answer == left else "right")
        winner = None if choice == "neither" else candidates[left if choice == "left" else right]
        Judgment.objects.create(
            match=match, choice=choice, winner=winner, shown_at=None, answered_at=now, seconds_on_page=None
        )
        added += 1

    play(1, 0, "round1_ab", "A", "B", ann.round1_ab)
    play(1, 1, "round1_cd", "C", "D", ann.round1_cd)
    if ann.round1_ab != NEITHER and ann.round1_cd != NEITHER:
        play(2, 0, "final", ann.round1_ab, ann.round1_cd, ann.final)
    else:
        play(2, 0, "final", "", "", None)
    return added


@transaction.atomic
def legacy_import(
    *, source: Path | bytes, study_slug: str, title: str | None = None, salt: str = ""
) -> LegacyImportResult:
    export = parse_legacy_export(source)
    study = Study.objects.filter(slug=study_slug).first()
    if study is None:
        study = study_create(
            slug=study_slug, title=title or f"Imported: {study_slug}", systems=[], status=Study.Status.CLOSED
        )
    systems = _systems(study, export)
    user_model = get_user_model()
    added = skipped = judgments = 0
    for annotator in export.annotators:
        code = pseudonym(annotator.annotator_id, salt=salt)[:16]
        participation = Participation.objects.filter(study=study, code=code).first()
        if participation is None:
            user = user_model.objects.create_user(username=f"legacy-{study.pk}-{code}".lower()[:150])
            user.set_unusable_password()
            user.save()
            participation = Participation.objects.create(
                study=study, annotator=user, code=code, consented_at=timezone.now(), completed_at=timezone.now()
            )
        persona = participation.personas.order_by("-version").first() or PersonaProfile.objects.create(
            participation=participation, version=1, **_persona(dict(annotator.pre_task_answers))
        )
        existing = set(participation.queries.values_list("index", flat=True))
        for ann in annotator.annotations:
            if ann.query_index in existing:
                skipped += 1
                continue
            judgments += _add_annotation(participation, persona, ann, systems)
            added += 1
    return LegacyImportResult(
        study=study.slug,
        annotators=len(export.annotators),
        queries_added=added,
        queries_skipped=skipped,
        judgments_added=judgments,
        warnings=tuple(export.warnings),
    )
