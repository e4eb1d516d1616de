"""Import the paper's own platform export (SPEC section 5) into a study, so its analysis runs here.

The old platform recorded no left/right placement or display times: in round 1 the first letter of the
pair is stored as shown left, in the final the AB winner; `shown_at` and `seconds_on_page` stay empty,
which the comparison table reads as "placement not recorded". The import is one transaction: a bad
archive adds nothing. It goes into a new (closed) study, or into a closed study holding only earlier
legacy imports; anything else (an open, draft or paused study, or one with annotators of its own) needs
``into_existing=True``. Re-importing the same file adds nothing twice (annotators by pseudonym, queries
by index). The export names its sources by OpenAlex id only; ``legacy_enrich`` fills their titles and
abstracts from OpenAlex (through the cached client) or from the local corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from analysis.legacy import (
    LegacyAnnotation,
    LegacyExport,
    LegacyFormatError,
    parse_legacy_export,
    pseudonym,
)
from analysis.stats.systems import system_id
from annotation.models import (
    Bracket,
    Candidate,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    Query,
    RetrievedDocument,
)
from corpus.models import CorpusDocument
from generation.settings import openalex_retrieval
from kernel.backends import BackendError, Document
from studies.models import Study, StudySystem
from studies.services.study import study_create

NEITHER = "N"
LEGACY_CODE_PREFIX = "L-"
_WORK_ID = re.compile(r"^(?:https?://openalex\.org/)?W\d+$", re.IGNORECASE)


class LegacyImportRefused(LegacyFormatError):
    """The archive is fine but the target study may not receive it (open, or holding other data)."""


@dataclass(frozen=True)
class LegacyImportResult:
    study: str
    annotators: int
    queries_added: int
    queries_skipped: int
    judgments_added: int
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class LegacyEnrichResult:
    study: str
    source: str
    documents: int
    filled: int
    not_found: int
    warnings: tuple[str, ...]


def looks_like_work_id(text: str) -> bool:
    return bool(_WORK_ID.match(text.strip()))


def _persona(answers: dict[str, Any]) -> dict[str, str]:
    """Map free-form pre-task answers onto the persona fields; everything else is kept in use_case."""
    lowered = {str(k).lower(): ("" if v is None else str(v).replace("\x00", "")) for k, v in answers.items()}

    def pick(*keys: str) -> str:
        for key in lowered:
            if any(k in key for k in keys) and lowered[key]:
                return lowered[key][:120]
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
        "research_area": pick("research", "area")[:200],
        "use_case": (pick("use case", "use_case", "purpose", "goal") or extra or "not recorded")[:1000],
    }


def _systems(study: Study, export: LegacyExport) -> dict[tuple[str, str], StudySystem]:
    cells = sorted({(c.model, c.condition) for a in export.annotators for ann in a.annotations for c in ann.candidates})
    taken = set(study.systems.values_list("label", flat=True))
    start = study.systems.count()
    systems = {}
    for order, (model, condition) in enumerate(cells, start=start):
        system = StudySystem.objects.filter(study=study, model_name=model, condition=condition).first()
        if system is None:
            label = system_id(model, condition)[:80]
            if label in taken:
                label = f"{label[:73]}-legacy"
            taken.add(label)
            system = StudySystem.objects.create(
                study=study,
                model_name=model,
                condition=condition,
                label=label,
                order=order,
                generation_backend="openai",
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
        feedback=ann.feedback,
    )
    RetrievedDocument.objects.bulk_create(
        RetrievedDocument(
            query=query,
            rank=rank,
            external_id=paper[:200],
            title=paper,
            abstract="",
            url=f"https://openalex.org/{paper}"[:500],
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
        # shown_at stays empty: the comparison table reads that as "placement not recorded".
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


def _check_target(study: Study, *, into_existing: bool) -> None:
    if into_existing:
        return
    if study.status != Study.Status.CLOSED:
        raise LegacyImportRefused(
            f"study {study.slug!r} is {study.status}: the import would add its systems to the study's design, so "
            "every new question would also be generated for them. Import into a new study, close this one "
            "first, or pass --into-existing to import anyway."
        )
    others = study.participations.exclude(code__startswith=LEGACY_CODE_PREFIX).count()
    if others:
        raise LegacyImportRefused(
            f"study {study.slug!r} already holds {others} participation(s) of its own; importing would mix the "
            "legacy data into them. Import into a new study, or pass --into-existing to import anyway."
        )


def _code(annotator_id: str, *, study: Study, salt: str) -> str:
    # Codes are unique across studies: one export imported into two studies gets two sets of codes.
    return pseudonym(f"{study.slug}\x1f{annotator_id}", salt=salt)[:16]


def _limits() -> dict[str, int]:
    return {
        "max_member_bytes": int(settings.LEGACY_IMPORT_MAX_MEMBER_BYTES),
        "max_total_bytes": int(settings.LEGACY_IMPORT_MAX_TOTAL_BYTES),
        "max_annotations": int(settings.LEGACY_IMPORT_MAX_ANNOTATIONS),
    }


@transaction.atomic
def legacy_import(
    *, source: Path | bytes, study_slug: str, title: str | None = None, salt: str = "", into_existing: bool = False
) -> LegacyImportResult:
    """Import an export; ``LegacyFormatError`` (a bad archive) or ``LegacyImportRefused`` leave nothing behind."""
    export = parse_legacy_export(source, **_limits())
    study = Study.objects.select_for_update().filter(slug=study_slug).first()
    if study is None:
        study = study_create(
            slug=study_slug, title=title or f"Imported: {study_slug}", systems=[], status=Study.Status.CLOSED
        )
    else:
        _check_target(study, into_existing=into_existing)
    systems = _systems(study, export)
    user_model = get_user_model()
    added = skipped = judgments = 0
    for annotator in export.annotators:
        # Imports made before codes were scoped to their study keep their code.
        old_code = pseudonym(annotator.annotator_id, salt=salt)[:16]
        participation = Participation.objects.filter(study=study, code=old_code).first()
        if participation is None:
            code = _code(annotator.annotator_id, study=study, salt=salt)
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
    warnings = list(export.warnings)
    if into_existing and study.status == Study.Status.OPEN:
        warnings.append(f"study {study.slug!r} is open: new questions will be generated for the imported systems too")
    warnings += legacy_text_warnings(study=study)
    return LegacyImportResult(
        study=study.slug,
        annotators=len(export.annotators),
        queries_added=added,
        queries_skipped=skipped,
        judgments_added=judgments,
        warnings=tuple(warnings),
    )


def legacy_text_warnings(*, study: Study) -> list[str]:
    """Say when the sources hold no text: every title an OpenAlex id and every abstract empty, so metrics
    that compare a summary with its sources (ROUGE against the abstracts, abstractiveness) score nothing."""
    documents = RetrievedDocument.objects.filter(query__participation__study=study)
    total = documents.count()
    if not total:
        return []
    bare = sum(1 for title, abstract in documents.values_list("title", "abstract") if not abstract.strip())
    if not bare:
        return []
    ids_only = sum(
        1 for title in documents.filter(abstract="").values_list("title", flat=True) if looks_like_work_id(title)
    )
    return [
        f"{bare} of {total} sources have no abstract ({ids_only} titled only by their OpenAlex id): metrics "
        f"against the sources would be 0 for every candidate. Run `manage.py enrich_legacy --study {study.slug}` "
        "(OpenAlex) or `--from-corpus` (the local corpus), then score the study again."
    ]


def _fetch_openalex(ids: list[str], retrieval: Any | None) -> dict[str, Document]:
    if retrieval is None:  # the real client: Django's cache, polite pool, retries
        retrieval = openalex_retrieval()
    found: dict[str, Document] = retrieval.works(ids)
    return found


def _fetch_corpus(ids: list[str]) -> dict[str, Document]:
    keys = {i: i for i in ids} | {f"https://openalex.org/{i}": i for i in ids}
    found: dict[str, Document] = {}
    for doc in CorpusDocument.objects.filter(external_id__in=list(keys)):
        found[keys[doc.external_id]] = Document(
            external_id=keys[doc.external_id], title=doc.title, abstract=doc.abstract, url=doc.url, year=doc.year
        )
    return found


def legacy_enrich(
    *, study: Study, source: str = "openalex", retrieval: Any | None = None, ids: Iterable[str] | None = None
) -> LegacyEnrichResult:
    """Fill the titles and abstracts of a study's sources that have none, from OpenAlex (``source="openalex"``,
    through ``retrieval.works`` or the real cached client) or from the local corpus (``source="corpus"``,
    matched on ``external_id``). Idempotent: sources that have an abstract are left alone."""
    if source not in ("openalex", "corpus"):
        raise ValueError(f"unknown enrichment source {source!r}; use openalex or corpus")
    pending = list(RetrievedDocument.objects.filter(query__participation__study=study, abstract=""))
    wanted = sorted({d.external_id.rsplit("/", 1)[-1] for d in pending if looks_like_work_id(d.external_id)})
    if ids is not None:
        wanted = sorted(set(wanted) & {i.rsplit("/", 1)[-1] for i in ids})
    try:
        found = _fetch_openalex(wanted, retrieval) if source == "openalex" else _fetch_corpus(wanted)
    except BackendError as error:
        raise LegacyFormatError(f"OpenAlex could not be asked for the sources: {error}") from error
    filled = 0
    with transaction.atomic():
        for document in pending:
            doc = found.get(document.external_id.rsplit("/", 1)[-1])
            if doc is None:
                continue
            document.title = doc.title or document.title
            document.abstract = doc.abstract
            document.url = (doc.url or document.url)[:500]
            document.year = doc.year if doc.year is not None else document.year
            document.venue = (doc.venue or document.venue)[:300]
            document.authors = list(doc.authors) or document.authors
            document.save(update_fields=["title", "abstract", "url", "year", "venue", "authors"])
            filled += 1
    not_found = sum(1 for d in pending if d.external_id.rsplit("/", 1)[-1] not in found)
    return LegacyEnrichResult(
        study=study.slug,
        source=source,
        documents=len(pending),
        filled=filled,
        not_found=not_found,
        warnings=tuple(legacy_text_warnings(study=study)),
    )
