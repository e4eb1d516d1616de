"""Reader for the paper's own platform export, into plain dataclasses and into the comparison table.

The export is a zip of ``users.json`` and ``results/annotator-<id>.json``. Each annotation holds
``query_index``, ``query``, ``summaries`` {A..D}, ``metadata`` {label: {model, has_pre_question}},
``paper_ids`` (OpenAlex W-ids), ``round1_ab`` (A/B/N), ``round1_cd`` (C/D/N), ``final`` (A-D/N) and
``feedback``; the user record holds ``pre_task_answers``. The export did not record left/right
placement, so the table puts the first-named candidate on the left (A in A-B, C in C-D, the A-B winner
in the final) and says so in ``left_position``/``right_position``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import pandas as pd

from analysis.stats.errors import AnalysisError
from analysis.stats.table import COLUMNS

MAX_MEMBER_BYTES = 64 * 1024 * 1024
LABELS = ("A", "B", "C", "D")
NEITHER = "N"
_RESULT = re.compile(r"annotator-(?P<id>[^/]+)\.json$")


class LegacyFormatError(AnalysisError):
    """The archive is not a readable export of the paper's platform."""


@dataclass(frozen=True)
class LegacyCandidate:
    label: str
    text: str
    model: str
    has_pre_question: bool

    @property
    def condition(self) -> str:
        return "persona" if self.has_pre_question else "generic"


@dataclass(frozen=True)
class LegacyAnnotation:
    annotator_id: str
    query_index: int
    query: str
    candidates: tuple[LegacyCandidate, ...]
    paper_ids: tuple[str, ...]
    round1_ab: str
    round1_cd: str
    final: str | None
    feedback: str

    def candidate(self, label: str) -> LegacyCandidate:
        for c in self.candidates:
            if c.label == label:
                return c
        raise KeyError(label)


@dataclass(frozen=True)
class LegacyAnnotator:
    annotator_id: str
    pre_task_answers: Mapping[str, Any]
    annotations: tuple[LegacyAnnotation, ...]


@dataclass(frozen=True)
class LegacyExport:
    annotators: tuple[LegacyAnnotator, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def n_annotations(self) -> int:
        return sum(len(a.annotations) for a in self.annotators)


def _load_json(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    if info.file_size > MAX_MEMBER_BYTES:
        raise LegacyFormatError(f"{info.filename} is larger than {MAX_MEMBER_BYTES} bytes")
    try:
        return json.loads(archive.read(info).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LegacyFormatError(f"{info.filename} is not valid UTF-8 JSON: {exc}") from exc


def _user_id(record: Mapping[str, Any]) -> str | None:
    for key in ("id", "user_id", "annotator_id", "annotator", "username"):
        if record.get(key) not in (None, ""):
            return str(record[key])
    return None


def _users(data: Any) -> dict[str, Mapping[str, Any]]:
    """``users.json`` as a list of user records or a mapping id -> record."""
    if isinstance(data, Mapping):
        if isinstance(data.get("users"), list):
            data = data["users"]
        else:
            return {str(k): v for k, v in data.items() if isinstance(v, Mapping)}
    out: dict[str, Mapping[str, Any]] = {}
    for record in data if isinstance(data, list) else []:
        if isinstance(record, Mapping) and (uid := _user_id(record)) is not None:
            out[uid] = record
    return out


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    text = NEITHER if value is None else str(value).strip().upper()
    if text in ("", "NEITHER", "NONE"):
        text = NEITHER
    if text not in (*allowed, NEITHER):
        raise LegacyFormatError(f"{where}: {value!r} is not one of {', '.join(allowed)} or N")
    return text


def _annotation(annotator_id: str, raw: Mapping[str, Any], where: str, warnings: list[str]) -> LegacyAnnotation:
    summaries = raw.get("summaries") or {}
    metadata = raw.get("metadata") or {}
    if not isinstance(summaries, Mapping) or not isinstance(metadata, Mapping):
        raise LegacyFormatError(f"{where}: summaries and metadata must be objects keyed by A-D")
    candidates = []
    for label in LABELS:
        meta = metadata.get(label)
        if not isinstance(meta, Mapping) or "model" not in meta:
            raise LegacyFormatError(f"{where}: metadata.{label}.model is missing")
        candidates.append(
            LegacyCandidate(
                label=label,
                text=str(summaries.get(label, "")),
                model=str(meta["model"]),
                has_pre_question=bool(meta.get("has_pre_question", False)),
            )
        )
    ab = _choice(raw.get("round1_ab"), ("A", "B"), f"{where} round1_ab")
    cd = _choice(raw.get("round1_cd"), ("C", "D"), f"{where} round1_cd")
    final: str | None = None
    if ab != NEITHER and cd != NEITHER:
        final = _choice(raw.get("final"), (ab, cd), f"{where} final")
    elif raw.get("final") not in (None, "", NEITHER):
        warnings.append(f"{where}: final {raw.get('final')!r} recorded after a 'neither' in round 1; ignored")
    try:
        query_index = int(raw.get("query_index", 0))
    except (TypeError, ValueError) as exc:
        raise LegacyFormatError(f"{where}: query_index {raw.get('query_index')!r} is not an integer") from exc
    paper_ids = raw.get("paper_ids") or []
    return LegacyAnnotation(
        annotator_id=annotator_id,
        query_index=query_index,
        query=str(raw.get("query", "")),
        candidates=tuple(candidates),
        paper_ids=tuple(str(p) for p in paper_ids),
        round1_ab=ab,
        round1_cd=cd,
        final=final,
        feedback=str(raw.get("feedback") or ""),
    )


def parse_legacy_export(source: Path | bytes | IO[bytes]) -> LegacyExport:
    """Read an export zip (path, bytes or binary file) into dataclasses; malformed input raises ``LegacyFormatError``."""
    stream: Any = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LegacyFormatError(f"not a zip archive: {exc}") from exc
    warnings: list[str] = []
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        users_info = [i for i in infos if PurePosixPath(i.filename).name == "users.json"]
        results = [
            (m.group("id"), i)
            for i in infos
            if PurePosixPath(i.filename).parent.name == "results"
            and (m := _RESULT.search(PurePosixPath(i.filename).name))
        ]
        if not results:
            raise LegacyFormatError("no results/annotator-*.json files in the archive")
        users = _users(_load_json(archive, users_info[0])) if users_info else {}
        if not users_info:
            warnings.append("users.json is missing: pre-task answers are empty")
        annotators = []
        for annotator_id, info in sorted(results, key=lambda r: r[0]):
            data = _load_json(archive, info)
            user = users.get(annotator_id, {})
            if isinstance(data, Mapping):
                user = {**user, **{k: v for k, v in data.items() if k == "pre_task_answers"}}
                data = data.get("annotations", data.get("results", []))
            if not isinstance(data, list):
                raise LegacyFormatError(f"{info.filename}: expected a list of annotations")
            if annotator_id not in users and users:
                warnings.append(f"annotator {annotator_id} has results but no entry in users.json")
            annotations = tuple(
                _annotation(annotator_id, raw, f"{info.filename}[{n}]", warnings)
                for n, raw in enumerate(data)
                if isinstance(raw, Mapping)
            )
            answers = user.get("pre_task_answers") or {}
            annotators.append(
                LegacyAnnotator(
                    annotator_id=annotator_id,
                    pre_task_answers=dict(answers) if isinstance(answers, Mapping) else {"answers": answers},
                    annotations=annotations,
                )
            )
    return LegacyExport(annotators=tuple(annotators), warnings=tuple(warnings))


def pseudonym(annotator_id: str, *, salt: str = "") -> str:
    """A stable pseudonymous annotator code (the raw id never reaches the table)."""
    return "L-" + hashlib.sha256(f"{salt}:{annotator_id}".encode()).hexdigest()[:10]


def _match_row(
    study: str, code: str, ann: LegacyAnnotation, match: str, left: str, right: str, winner: str
) -> dict[str, Any]:
    lc, rc = ann.candidate(left), ann.candidate(right)
    choice = "neither" if winner == NEITHER else ("left" if winner == left else "right")
    win = None if choice == "neither" else (lc if choice == "left" else rc)
    query_id = f"{code}-q{ann.query_index}"
    stage = "final" if match == "final" else "round1"
    return {
        "study": study,
        "annotator": code,
        "query_id": query_id,
        "query_index": ann.query_index,
        "bracket_id": f"{query_id}-bracket",
        "match": match,
        "round": 2 if stage == "final" else 1,
        "stage": stage,
        "bracket_pair": {"round1_ab": "AB", "round1_cd": "CD", "final": "final"}[match],
        "left_candidate": f"{query_id}-{left}",
        "right_candidate": f"{query_id}-{right}",
        "left_position": left,
        "right_position": right,
        "left_system": f"{lc.model}/{lc.condition}",
        "right_system": f"{rc.model}/{rc.condition}",
        "left_model": lc.model,
        "right_model": rc.model,
        "left_condition": lc.condition,
        "right_condition": rc.condition,
        "choice": choice,
        "winner_side": None if choice == "neither" else choice,
        "winner_system": None if win is None else f"{win.model}/{win.condition}",
        "winner_model": None if win is None else win.model,
        "winner_condition": None if win is None else win.condition,
        "shown_at": None,
        "answered_at": None,
        "seconds_on_page": None,
    }


def legacy_comparison_table(export: LegacyExport, *, study: str = "legacy", salt: str = "") -> pd.DataFrame:
    """The comparison table (documented contract) of an export: up to three rows per annotation."""
    rows: list[dict[str, Any]] = []
    for annotator in export.annotators:
        code = pseudonym(annotator.annotator_id, salt=salt)
        for ann in annotator.annotations:
            rows.append(_match_row(study, code, ann, "round1_ab", "A", "B", ann.round1_ab))
            rows.append(_match_row(study, code, ann, "round1_cd", "C", "D", ann.round1_cd))
            if ann.final is not None:
                rows.append(_match_row(study, code, ann, "final", ann.round1_ab, ann.round1_cd, ann.final))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["seconds_on_page"] = frame["seconds_on_page"].astype("float64")
    return frame
