"""Studies: the default prompt template, the design check, creation, status, and the open-study check."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from annotation.models import PromptTemplate, Study, StudySystem
from annotation.prompts import DEFAULT_BODY, DEFAULT_PERSONA_BLOCK, DEFAULT_TEMPLATE_NAME
from kernel.exceptions import ApplicationError


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


def study_require_open(*, study: Study) -> None:
    """Refuse annotation work (joining, asking, answering) unless the study is open."""
    if study.status == Study.Status.PAUSED:
        raise ApplicationError(
            "This study is paused. Please come back later; your answers so far are saved.", status=403
        )
    if study.status != Study.Status.OPEN:
        raise ApplicationError("This study is not open for annotation.", status=403)
