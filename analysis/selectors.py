"""The comparison table of a study, read from the database in the shape of docs/comparison-table.md."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import pandas as pd
from django.conf import settings
from django.db.models import Min, QuerySet

from analysis.exports import (
    PAGE_COLUMNS,
    PAGE_TIMESTAMP_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_TEXT_COLUMNS,
    SUMMARY_TIMESTAMP_COLUMNS,
)
from analysis.stats.exclusion import AnnotatorFlags, ExclusionRule, apply_exclusion, exclusion_summary
from analysis.stats.systems import system_id
from analysis.stats.table import CHOICE_DETAIL_COLUMNS, COLUMNS
from annotation.models import Candidate, Judgment, Match, Participation, Query
from annotation.selectors.quality import participation_quality
from kernel.exceptions import ApplicationError
from scoring.core.judges import JudgeIdentity, judge_column
from scoring.models import CandidateScore, PairwiseVote
from studies.models import Study

# The reasons of analysis.stats.exclusion.REASONS, here too so that the web process checks a rule without
# loading the statistics package (pandas).
EXCLUSION_REASONS = ("checks", "speed", "manual")
BRACKET_PAIRS = {"round1_ab": "AB", "round1_cd": "CD", "final": "final"}


# Screened out before any answer (declined consent, failed the screening question): never participants. A
# participation the check policy stopped keeps its answers; the exclusion rule ("checks") leaves them out.
SCREENED_BEFORE_ANNOTATING = (Participation.ScreenOut.DECLINED_CONSENT, Participation.ScreenOut.SCREENING)


def analysed_participations(*, study: Study) -> QuerySet[Participation]:
    """The participations whose answers are data: not a study member's preview, not screened out before
    annotating (the exclusion rule then applies to the table built from them)."""
    return study.participations.exclude(source=Participation.Source.PREVIEW).exclude(
        screen_out_reason__in=SCREENED_BEFORE_ANNOTATING
    )


def external_pseudonym(*, study: Study, external_id: str) -> str | None:
    """The recruiting platform's participant id (PROLIFIC_PID, ...) as exports carry it: a keyed hash (HMAC-SHA256
    under SECRET_KEY, per study), stable across exports, never the raw id; None without one. Rotating SECRET_KEY
    changes every pseudonym."""
    if not external_id:
        return None
    key = hashlib.sha256(b"satisfy.external-id:" + settings.SECRET_KEY.encode()).digest()
    message = f"{study.slug}\x00{external_id}".encode()
    return "x-" + hmac.new(key, message, hashlib.sha256).hexdigest()[:20]


def _judgments(study: Study) -> QuerySet[Judgment]:
    return (
        # Attention checks are never data (annotation.services.quality): not in the table, nor anything built on it.
        Judgment.objects.filter(match__bracket__query__participation__study=study, match__check_expected="")
        # Previews, and participations screened out before annotating, never reach the analysis or the exports.
        .exclude(match__bracket__query__participation__source=Participation.Source.PREVIEW)
        .exclude(match__bracket__query__participation__screen_out_reason__in=SCREENED_BEFORE_ANNOTATING)
        .select_related(
            "match__bracket__query__participation",
            "match__left__system",
            "match__right__system",
            "winner__system",
        )
        .order_by(
            "match__bracket__query__participation__code", "match__bracket__query__index", "match__round", "match__index"
        )
    )


def candidate_design(candidate: Candidate) -> tuple[str, str, str]:
    """Canonical system id, model and condition that produced a candidate: its snapshot, taken when it
    was created; the system only for rows without one (legacy imports). The id is formed from the model
    and condition (``analysis.stats.systems.system_id``), as on every other path into the table."""
    if candidate.model_name:
        model, condition = candidate.model_name, candidate.condition
    else:
        model, condition = candidate.system.model_name, candidate.system.condition
    return system_id(model, condition), model, condition


def _score_column(metric: str, judge_model: str, judge_server: str, prompt_version: str) -> str:
    """A score's column name: the metric, or for a judge's score ``judge:<model>@<server>:<prompt>:<metric>``."""
    if not judge_model:
        return metric
    return judge_column(metric, JudgeIdentity(model=judge_model, server=judge_server), prompt_version or None)


def _scores(candidate_ids: set[int], metrics: list[str] | None) -> dict[int, dict[str, float | None]]:
    """Each candidate's newest score per metric column (a newer metric version supersedes an older one;
    each judge's scores have their own columns, so a second judge never hides the first)."""
    rows = CandidateScore.objects.filter(candidate_id__in=candidate_ids)
    if metrics:
        rows = rows.filter(metric__in=metrics)
    out: dict[int, dict[str, float | None]] = defaultdict(dict)
    for candidate_id, metric, model, server, prompt, value in rows.order_by("computed_at", "pk").values_list(
        "candidate_id", "metric", "judge_model", "judge_server", "prompt_version", "value"
    ):
        out[candidate_id][_score_column(metric, model, server, prompt)] = value
    return out


# A pairwise judge's vote as a score pair: the chosen side 1 and the other 0, "neither" 0.5 on both, so
# that it votes like any metric (the agreement statistics give it threshold 0).
_VOTE_SCORES: dict[str, tuple[float, float]] = {"left": (1.0, 0.0), "right": (0.0, 1.0), "neither": (0.5, 0.5)}


def _pairwise_votes(match_ids: set[int]) -> dict[int, dict[str, tuple[float, float] | None]]:
    """Per match, each judge's votes as score pairs: as shown, swapped, and combined (agree, else neither)."""
    by_match: dict[int, dict[tuple[str, str, str], dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for vote in PairwiseVote.objects.filter(match_id__in=match_ids).only(
        "match_id", "judge_model", "judge_server", "prompt_version", "order", "choice"
    ):
        key = (vote.judge_model, vote.judge_server, vote.prompt_version)
        by_match[vote.match_id][key][vote.order] = vote.choice
    out: dict[int, dict[str, tuple[float, float] | None]] = defaultdict(dict)
    for match_id, judges in by_match.items():
        for (model, server, prompt), orders in judges.items():
            first, swapped = orders.get("first") or None, orders.get("swapped") or None
            combined = (first if first == swapped else "neither") if first and swapped else None
            for metric, choice in (("pairwise_first", first), ("pairwise_swapped", swapped), ("pairwise", combined)):
                out[match_id][_score_column(metric, model, server, prompt)] = _VOTE_SCORES[choice] if choice else None
    return out


def _advanced_side(judgment: Judgment) -> str | None:
    """The side that moved on to the next round: the chosen one, or for a tie the coin's; None for "neither"
    and for a tie in the final (and for a final's winner too, which moves nowhere)."""
    match = judgment.match
    if judgment.winner_id is None or match.label == "final" or match.bracket.adaptive:
        return None  # the adaptive design sends no one on: its next pair is chosen afresh
    return "left" if judgment.winner_id == match.left_id else "right"


def _stage(match: Match) -> str:
    """The match's stage (docs/comparison-table.md, "Stages"): ``adaptive`` for the adaptive design's comparisons,
    else its bracket round, the last being ``final``."""
    if match.bracket.adaptive:
        return "adaptive"
    return "final" if match.label == "final" else "round1" if match.round == 1 else f"round{match.round}"


def comparison_rows(
    *, study: Study, metrics: list[str] | None = None, with_scores: bool = True
) -> list[dict[str, Any]]:
    """One row per answered match (decided or "neither"), joined with both sides' metric scores."""
    judgments = list(_judgments(study))
    candidate_ids = {i for j in judgments for i in (j.match.left_id, j.match.right_id) if i}
    scores = _scores(candidate_ids, metrics) if with_scores else {}
    votes = _pairwise_votes({j.match_id for j in judgments}) if with_scores else {}
    metric_names = sorted({m for per in scores.values() for m in per})
    vote_names = sorted({m for per in votes.values() for m in per})
    # A study that recorded recruiting-platform ids gets their pseudonyms as a column (docs/crowd.md).
    participations = {j.match.bracket.query.participation for j in judgments}
    pseudonyms = (
        {p.pk: external_pseudonym(study=study, external_id=p.external_id) for p in participations}
        if any(p.external_id for p in participations)
        else None
    )
    rows = []
    for judgment in judgments:
        match = judgment.match
        query = match.bracket.query
        left, right = match.left, match.right
        assert left is not None and right is not None  # answered matches always have both sides
        winner = judgment.winner if judgment.choice in ("left", "right") else None
        left_design, right_design = candidate_design(left), candidate_design(right)
        winner_design = candidate_design(winner) if winner else None
        row: dict[str, Any] = {
            "study": study.slug,
            "annotator": query.participation.code,
            "query_id": query.pk,
            "query_index": query.index,
            "bracket_id": match.bracket_id,
            "match": match.label,
            "round": match.round,
            "stage": _stage(match),
            # An adaptive comparison decides no pair of the bracket: its pair was chosen from the answers before it.
            "bracket_pair": None
            if match.bracket.adaptive
            else BRACKET_PAIRS.get(match.label, match.label.split("_")[-1].upper()),
            "left_candidate": left.pk,
            "right_candidate": right.pk,
            "left_position": left.position,
            "right_position": right.position,
            "left_system": left_design[0],
            "right_system": right_design[0],
            "left_model": left_design[1],
            "right_model": right_design[1],
            "left_condition": left_design[2],
            "right_condition": right_design[2],
            "choice": judgment.choice,
            # A tie has no preferred side: its `winner` is only the side the coin sent on (`advanced_side`).
            "winner_side": judgment.choice if judgment.choice in ("left", "right") else None,
            "winner_system": winner_design[0] if winner_design else None,
            "winner_model": winner_design[1] if winner_design else None,
            "winner_condition": winner_design[2] if winner_design else None,
            "shown_at": judgment.shown_at.isoformat() if judgment.shown_at else None,
            "answered_at": judgment.answered_at.isoformat(),
            "seconds_on_page": judgment.seconds_on_page,
            # Every live judgment has shown_at (an automatic tie was never shown, but was placed); an imported
            # legacy one has none, nor a recorded placement.
            "placement_recorded": judgment.shown_at is not None or judgment.automatic,
            "advanced_side": _advanced_side(judgment),
            "tie_automatic": judgment.automatic,
            "identical": match.identical or None,
            "similarity": match.similarity,
            "comment": judgment.comment or None,
            "question_comment": query.feedback or None,
        }
        if pseudonyms is not None:
            row["annotator_external"] = pseudonyms[query.participation_id]
        for metric in metric_names:
            row[f"left__{metric}"] = scores.get(left.pk, {}).get(metric)
            row[f"right__{metric}"] = scores.get(right.pk, {}).get(metric)
        for metric in vote_names:
            pair = votes.get(match.pk, {}).get(metric)
            row[f"left__{metric}"], row[f"right__{metric}"] = pair if pair else (None, None)
        rows.append(row)
    return rows


def exclusion_default(*, study: Study) -> tuple[str, ...]:
    """The reasons applied when none are asked for: manual exclusions always; failed checks when the study
    inserts checks; the speed flag when it sets a speed threshold (docs/analysis.md, "Exclusion rule")."""
    reasons = ["manual"]
    if study.check_share > 0:
        reasons.insert(0, "checks")
    if study.speed_threshold_seconds is not None:
        reasons.insert(-1, "speed")
    return tuple(reasons)


def exclusion_reasons(*, study: Study, exclude: str | Sequence[str] | None) -> tuple[str, ...]:
    """The reasons of an asked-for rule (``"checks,speed,manual"``, ``"none"``, a list), or the study's default.
    An unknown reason is an ApplicationError naming it (a field error on ``exclude``)."""
    if exclude is None:
        return exclusion_default(study=study)
    parts = exclude.split(",") if isinstance(exclude, str) else list(exclude)
    names = [str(p).strip().lower() for p in parts if str(p).strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in EXCLUSION_REASONS]
    if unknown:
        raise ApplicationError(
            f"Unknown exclusion reason {', '.join(unknown)}: choose among {', '.join(EXCLUSION_REASONS)} "
            "(comma-separated), or none.",
            field="exclude",
        )
    return tuple(r for r in EXCLUSION_REASONS if r in names)


def annotator_flags(*, study: Study) -> dict[str, Any]:
    """Each analysed participation's quality flags by its code, as ``analysis.stats.exclusion.AnnotatorFlags``.
    A preview or a participation screened out before annotating is never data, so the rule never "leaves it
    out" either: with a flag here it would be counted among the excluded participations (a researcher's
    preview clicked through is speed-flagged) and listed among the excluded codes."""
    analysed = set(analysed_participations(study=study).values_list("code", flat=True))
    return {
        q.code: AnnotatorFlags(checks=q.checks_flagged, speed=q.speed_flagged, manual=q.excluded)
        for q in participation_quality(study=study)
        if q.code in analysed
    }


def comparison_rows_kept(
    *, study: Study, exclude: str | Sequence[str] | None = None, with_scores: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The comparison rows the exclusion rule keeps, and what it left out (``ExclusionSummary.to_dict()``)."""
    rule = ExclusionRule(exclusion_reasons(study=study, exclude=exclude))
    rows = comparison_rows(study=study, with_scores=with_scores)
    summary = exclusion_summary(Counter(str(r["annotator"]) for r in rows), annotator_flags(study=study), rule)
    dropped = set(summary.excluded_annotators)
    return [r for r in rows if r["annotator"] not in dropped], summary.to_dict()


def analysis_frame(
    *, study: Study, exclude: str | Sequence[str] | None = None, metrics: list[str] | None = None
) -> tuple[Any, Any]:
    """The comparison table as every analysis and export of the study uses it: without attention checks, and
    without the comparisons the exclusion rule (``exclude``, default the study's) leaves out; with the
    ``ExclusionSummary`` saying what was left out, for the report and the manifest."""
    rule = ExclusionRule(exclusion_reasons(study=study, exclude=exclude))
    return apply_exclusion(comparison_frame(study=study, metrics=metrics), annotator_flags(study=study), rule)


def comparison_frame(*, study: Study, metrics: list[str] | None = None) -> Any:
    rows = comparison_rows(study=study, metrics=metrics)
    return pd.DataFrame(rows, columns=None if rows else [*COLUMNS, *CHOICE_DETAIL_COLUMNS])


def summary_rows(*, study: Study, include_texts: bool = False) -> list[dict[str, Any]]:
    """One row per candidate (summary) of the study's analysed participations, whatever its status: what
    generated it and how its generation went (docs/comparison-table.md, "The summary table"). ``candidate`` is
    the id the comparison table's ``left_candidate``/``right_candidate`` carry, ``system`` the system id it
    forms (``candidate_design``). The summary's text only with ``include_texts`` (participants' study data)."""
    candidates = (
        Candidate.objects.filter(query__participation__in=analysed_participations(study=study))
        .select_related("query__participation", "system", "prompt_template")
        .defer("raw_response", "prompt", *(() if include_texts else ("text",)))
        .order_by("query__participation__code", "query__index", "system__order", "pk")
    )
    rows = []
    for candidate in candidates:
        system, model, condition = candidate_design(candidate)
        usage = candidate.usage if isinstance(candidate.usage, dict) else {}
        template = candidate.prompt_template
        row: dict[str, Any] = {
            "candidate": candidate.pk,
            "annotator": candidate.query.participation.code,
            "query_id": candidate.query_id,
            "query_index": candidate.query.index,
            "position": candidate.position or None,
            "system": system,
            "system_label": candidate.system_label or candidate.system.label,
            "model": model,
            "condition": condition,
            "generation_backend": candidate.generation_backend or None,
            # The settings the generation called the model with, as stored (a key's variable name, never a key).
            "generation_settings": json.dumps(candidate.generation_settings, ensure_ascii=False, sort_keys=True),
            "prompt_template": template.name if template else None,
            "prompt_template_version": candidate.prompt_template_version,
            "status": candidate.status,
            "failure_reason": candidate.failure_reason or None,
            "finish_reason": candidate.finish_reason or None,
            # Accepted as done, but cut off at max_tokens: a reader of the comparisons must be able to tell.
            "truncated": candidate.finish_reason == "length",
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "latency_s": candidate.latency_s,
            "attempts": candidate.attempts,
            "regenerations": candidate.regenerations,
            "queued_at": candidate.queued_at,
            "started_at": candidate.started_at,
            "finished_at": candidate.finished_at,
        }
        if include_texts:
            row["summary"] = candidate.text or None
        rows.append(row)
    return rows


def summary_frame(*, study: Study, include_texts: bool = False) -> Any:
    """``summary_rows`` as a typed DataFrame (whole numbers nullable, times tz-aware UTC), with its columns
    even when the study has no candidates."""
    columns = [*SUMMARY_COLUMNS, *(SUMMARY_TEXT_COLUMNS if include_texts else ())]
    frame = pd.DataFrame(summary_rows(study=study, include_texts=include_texts), columns=columns)
    for col in (
        "candidate",
        "query_id",
        "query_index",
        "prompt_template_version",
        "prompt_tokens",
        "completion_tokens",
        "attempts",
        "regenerations",
    ):
        frame[col] = frame[col].astype("Int64")
    frame["latency_s"] = frame["latency_s"].astype("float64")
    frame["truncated"] = frame["truncated"].astype("bool")
    for col in SUMMARY_TIMESTAMP_COLUMNS:
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def page_rows(*, study: Study) -> list[dict[str, Any]]:
    """One row per page each analysed participant was shown, with its time (docs/comparison-table.md, "The
    page-time table"): consent (from arriving to consenting), persona (form shown to sent), question (form shown
    to sent), wait (waiting page shown to the first comparison shown) and comparison (shown to answered). A page
    whose start or end was not recorded has an empty time; a page never reached has no row."""

    def row(code: str, page: str, shown: Any, left: Any, **extra: Any) -> dict[str, Any]:
        seconds = (left - shown).total_seconds() if shown and left else None
        return {"annotator": code, "page": page, "query_id": None, "query_index": None, "match": None,
                "shown_at": shown, "left_at": left, "seconds_on_page": seconds, **extra}  # fmt: skip

    participations = list(analysed_participations(study=study).order_by("code").prefetch_related("personas"))
    queries = (
        Query.objects.filter(participation__in=participations)
        .select_related("participation")
        .order_by("participation__code", "index")
    )
    first_shown = {
        m["bracket__query_id"]: m["first"]
        for m in Match.objects.filter(bracket__query__in=queries, shown_at__isnull=False)
        .values("bracket__query_id")
        .annotate(first=Min("shown_at"))
    }
    judgments = (
        Judgment.objects.filter(match__bracket__query__in=queries, automatic=False)
        .select_related("match__bracket__query__participation")
        .order_by("match__bracket__query__participation__code", "match__bracket__query__index", "match_id")
    )
    rows: list[dict[str, Any]] = []
    for p in participations:
        if p.consented_at:
            rows.append(row(p.code, "consent", p.created_at, p.consented_at))
        for persona in sorted(p.personas.all(), key=lambda x: x.version):
            rows.append(row(p.code, "persona", persona.form_shown_at, persona.created_at))
    for q in queries:
        ids = {"query_id": q.pk, "query_index": q.index}
        rows.append(row(q.participation.code, "question", q.shown_at, q.created_at, **ids))
        if q.wait_shown_at or q.pk in first_shown:
            rows.append(row(q.participation.code, "wait", q.wait_shown_at, first_shown.get(q.pk), **ids))
    for j in judgments:
        q = j.match.bracket.query
        rows.append(
            row(q.participation.code, "comparison", j.shown_at, j.answered_at, query_id=q.pk, query_index=q.index,
                match=j.match.label)
        )  # fmt: skip
    return rows


def page_frame(*, study: Study) -> Any:
    """``page_rows`` as a typed DataFrame (times tz-aware UTC, ids nullable), with its columns when empty."""
    frame = pd.DataFrame(page_rows(study=study), columns=list(PAGE_COLUMNS))
    for col in ("query_id", "query_index"):
        frame[col] = frame[col].astype("Int64")
    frame["seconds_on_page"] = frame["seconds_on_page"].astype("float64")
    for col in PAGE_TIMESTAMP_COLUMNS:
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame
