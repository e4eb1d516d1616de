"""Reader for the paper's own platform export, into plain dataclasses and into the comparison table.

The export is a zip of ``users.json`` and ``results/annotator-<id>.json``. Each annotation holds
``query_index``, ``query``, ``summaries`` {A..D}, ``metadata`` {label: {model, has_pre_question}},
``paper_ids`` (OpenAlex W-ids), ``round1_ab`` (A/B/N), ``round1_cd`` (C/D/N), ``final`` (A-D/N) and
``feedback``; the user record holds ``pre_task_answers``. The export did not record left/right
placement, so the table puts the first-named candidate on the left (A in A-B, C in C-D, the A-B winner
in the final), says so in ``left_position``/``right_position`` and sets ``placement_recorded`` false, so
position-bias statistics report themselves unavailable rather than measure that convention.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import pandas as pd

from analysis.stats.errors import AnalysisError
from analysis.stats.systems import system_id
from analysis.stats.table import COLUMNS, PLACEMENT_COLUMN

MAX_MEMBER_BYTES = 64 * 1024 * 1024
"""Largest uncompressed member read (``LEGACY_IMPORT_MAX_MEMBER_BYTES`` in the settings of the import)."""
MAX_TOTAL_BYTES = 256 * 1024 * 1024
"""Largest uncompressed total of the members read (``LEGACY_IMPORT_MAX_TOTAL_BYTES``): a zip bomb of many
small members is refused as surely as one huge member."""
MAX_ANNOTATIONS = 200_000
"""Most annotations one archive may hold (the paper's study had a few hundred)."""
MAX_QUERY_INDEX = 32_767
MAX_MODEL_CHARS = 200
LABELS = ("A", "B", "C", "D")
NEITHER = "N"
_RESULT = re.compile(r"annotator-(?P<id>[^/]+)\.json$")
_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


class LegacyFormatError(AnalysisError):
    """The archive is not a readable export of the paper's platform; the message names the member and row."""


@dataclass(frozen=True)
class LegacyCandidate:
    label: str
    text: str
    model: str
    has_pre_question: bool

    @property
    def condition(self) -> str:
        return "persona" if self.has_pre_question else "generic"

    @property
    def system(self) -> str:
        return system_id(self.model, self.condition)


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


class _Budget:
    """The total uncompressed bytes read so far, against the archive's cap."""

    def __init__(self, max_member: int, max_total: int) -> None:
        self.max_member, self.max_total, self.used = max_member, max_total, 0

    def read(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
        name = info.filename
        if info.file_size > self.max_member:
            raise LegacyFormatError(f"{name}: {info.file_size} bytes uncompressed, above the cap of {self.max_member}")
        # The sizes in the directory can lie: read at most one byte past what either cap allows.
        limit = min(self.max_member, self.max_total - self.used)
        try:
            with archive.open(info) as fh:
                data = fh.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise LegacyFormatError(f"{name}: the member is damaged ({exc})") from exc
        except NotImplementedError as exc:
            raise LegacyFormatError(f"{name}: unsupported compression ({exc})") from exc
        except RuntimeError as exc:  # zipfile's "encrypted, password required"
            raise LegacyFormatError(f"{name}: {exc}") from exc
        if len(data) > limit:
            if limit < self.max_member:
                raise LegacyFormatError(
                    f"{name}: the archive's members add up to more than the cap of {self.max_total} bytes uncompressed"
                )
            raise LegacyFormatError(f"{name}: more than the cap of {self.max_member} bytes uncompressed")
        self.used += len(data)
        return data


def _load_json(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: _Budget) -> Any:
    raw = budget.read(archive, info)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise LegacyFormatError(
            f"{info.filename}, line {line}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    if "\x00" in text:
        raise LegacyFormatError(f"{info.filename}, line {text[: text.index(chr(0))].count(chr(10)) + 1}: a NUL byte")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LegacyFormatError(f"{info.filename}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise LegacyFormatError(f"{info.filename}: JSON nested too deeply") from exc


def _user_id(record: Mapping[str, Any]) -> str | None:
    for key in ("id", "user_id", "annotator_id", "annotator", "username"):
        if record.get(key) not in (None, ""):
            return str(record[key])
    return None


def _users(data: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """``users.json`` as a list of user records or a mapping id -> record."""
    if isinstance(data, Mapping):
        if isinstance(data.get("users"), list):
            data = data["users"]
        else:
            return {str(k): v for k, v in data.items() if isinstance(v, Mapping)}
    if not isinstance(data, list):
        raise LegacyFormatError(f"{where}: expected a list of user records, got {type(data).__name__}")
    out: dict[str, Mapping[str, Any]] = {}
    for record in data:
        if isinstance(record, Mapping) and (uid := _user_id(record)) is not None:
            out[uid] = record
    return out


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value is not None and not isinstance(value, str):
        raise LegacyFormatError(f"{where}: {value!r} is not one of {', '.join(allowed)} or N")
    text = NEITHER if value is None else value.strip().upper()
    if text in ("", "NEITHER", "NONE"):
        text = NEITHER
    if text not in (*allowed, NEITHER):
        raise LegacyFormatError(f"{where}: {value!r} is not one of {', '.join(allowed)} or N")
    return text


def strict_bool(value: Any, where: str) -> bool:
    """true/false, 1/0 (as JSON booleans, numbers or strings, any case); anything else is an error.

    ``bool("false")`` is True: the old reader made every ``"false"`` a persona summary.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise LegacyFormatError(f"{where}: {value!r} is not a boolean (true/false or 1/0)")


def _text(value: Any, where: str, *, required: bool = False) -> str:
    if value is None:
        if required:
            raise LegacyFormatError(f"{where} is missing")
        return ""
    if not isinstance(value, str):
        raise LegacyFormatError(f"{where}: expected text, got {type(value).__name__}")
    if "\x00" in value:
        raise LegacyFormatError(f"{where}: contains a NUL character")
    return value


def _query_index(raw: Mapping[str, Any], where: str) -> int:
    if "query_index" not in raw or raw["query_index"] is None:
        raise LegacyFormatError(f"{where}: query_index is missing")
    value = raw["query_index"]
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise LegacyFormatError(f"{where}: query_index {value!r} is not an integer")
    try:
        index = int(value)
    except ValueError as exc:
        raise LegacyFormatError(f"{where}: query_index {value!r} is not an integer") from exc
    if not 0 <= index <= MAX_QUERY_INDEX:
        raise LegacyFormatError(f"{where}: query_index {index} is outside 0-{MAX_QUERY_INDEX}")
    return index


def _annotation(annotator_id: str, raw: Any, where: str, warnings: list[str]) -> LegacyAnnotation:
    if not isinstance(raw, Mapping):
        raise LegacyFormatError(f"{where}: expected an object, got {type(raw).__name__}")
    query_index = _query_index(raw, where)
    where = f"{where} (query_index {query_index})"
    summaries = raw.get("summaries") or {}
    metadata = raw.get("metadata") or {}
    if not isinstance(summaries, Mapping) or not isinstance(metadata, Mapping):
        raise LegacyFormatError(f"{where}: summaries and metadata must be objects keyed by A-D")
    candidates = []
    for label in LABELS:
        meta = metadata.get(label)
        if not isinstance(meta, Mapping) or "model" not in meta:
            raise LegacyFormatError(f"{where}: metadata.{label}.model is missing")
        model = _text(meta["model"], f"{where}: metadata.{label}.model").strip()
        if not model or len(model) > MAX_MODEL_CHARS:
            raise LegacyFormatError(
                f"{where}: metadata.{label}.model is empty or longer than {MAX_MODEL_CHARS} characters"
            )
        if "has_pre_question" not in meta:
            raise LegacyFormatError(f"{where}: metadata.{label}.has_pre_question is missing")
        candidates.append(
            LegacyCandidate(
                label=label,
                text=_text(summaries.get(label), f"{where}: summaries.{label}"),
                model=model,
                has_pre_question=strict_bool(meta["has_pre_question"], f"{where}: metadata.{label}.has_pre_question"),
            )
        )
    seen: dict[str, str] = {}
    for c in candidates:
        if c.system in seen:
            raise LegacyFormatError(
                f"{where}: metadata.{seen[c.system]} and metadata.{c.label} are both {c.model} ({c.condition}); "
                "the four summaries must come from four different systems"
            )
        seen[c.system] = c.label
    ab = _choice(raw.get("round1_ab"), ("A", "B"), f"{where}: round1_ab")
    cd = _choice(raw.get("round1_cd"), ("C", "D"), f"{where}: round1_cd")
    final: str | None = None
    if ab != NEITHER and cd != NEITHER:
        final = _choice(raw.get("final"), (ab, cd), f"{where}: final")
    elif raw.get("final") not in (None, "", NEITHER):
        warnings.append(f"{where}: final {raw.get('final')!r} recorded after a 'neither' in round 1; ignored")
    paper_ids = raw.get("paper_ids") or []
    if not isinstance(paper_ids, list) or not all(isinstance(p, str | int) for p in paper_ids):
        raise LegacyFormatError(f"{where}: paper_ids must be a list of OpenAlex ids")
    return LegacyAnnotation(
        annotator_id=annotator_id,
        query_index=query_index,
        query=_text(raw.get("query"), f"{where}: query"),
        candidates=tuple(candidates),
        paper_ids=tuple(_text(str(p), f"{where}: paper_ids").strip() for p in paper_ids),
        round1_ab=ab,
        round1_cd=cd,
        final=final,
        feedback=_text(raw.get("feedback"), f"{where}: feedback"),
    )


def _open(source: Path | bytes | IO[bytes]) -> zipfile.ZipFile:
    stream: Any = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        return zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise LegacyFormatError(f"not a zip archive (or a truncated one): {exc}") from exc


def _members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if not infos:
        raise LegacyFormatError("the archive is empty")
    names: set[str] = set()
    for info in infos:
        name = info.filename
        path = PurePosixPath(name.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", name):
            raise LegacyFormatError(f"{name}: a member name outside the archive (absolute or with '..')")
        if name in names:
            raise LegacyFormatError(f"{name}: the archive holds two members of this name")
        names.add(name)
    return infos


def parse_legacy_export(
    source: Path | bytes | IO[bytes],
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_annotations: int = MAX_ANNOTATIONS,
) -> LegacyExport:
    """Read an export zip (path, bytes or binary file) into dataclasses.

    Malformed input raises ``LegacyFormatError`` naming the member and, where there is one, the line or
    the annotation (its position in the file and its ``query_index``).
    """
    archive = _open(source)
    warnings: list[str] = []
    budget = _Budget(max_member_bytes, max_total_bytes)
    with archive:
        infos = _members(archive)
        users_info = [i for i in infos if PurePosixPath(i.filename).name == "users.json"]
        results = [
            (m.group("id"), i)
            for i in infos
            if PurePosixPath(i.filename).parent.name == "results"
            and (m := _RESULT.search(PurePosixPath(i.filename).name))
        ]
        if not results:
            raise LegacyFormatError("no results/annotator-*.json files in the archive")
        if len(users_info) > 1:
            raise LegacyFormatError(f"two users.json members: {', '.join(i.filename for i in users_info)}")
        by_id: dict[str, str] = {}
        for annotator_id, info in results:
            if annotator_id in by_id:
                raise LegacyFormatError(
                    f"{info.filename}: annotator {annotator_id} already has results in {by_id[annotator_id]}"
                )
            by_id[annotator_id] = info.filename
        declared = sum(i.file_size for i in [*users_info, *(i for _, i in results)])
        if declared > max_total_bytes:
            raise LegacyFormatError(
                f"the archive's members declare {declared} bytes uncompressed, above the cap of {max_total_bytes}"
            )
        users = _users(_load_json(archive, users_info[0], budget), users_info[0].filename) if users_info else {}
        if not users_info:
            warnings.append("users.json is missing: pre-task answers are empty")
        annotators = []
        total = 0
        for annotator_id, info in sorted(results, key=lambda r: r[0]):
            data = _load_json(archive, info, budget)
            user = users.get(annotator_id, {})
            if isinstance(data, Mapping):
                user = {**user, **{k: v for k, v in data.items() if k == "pre_task_answers"}}
                data = data.get("annotations", data.get("results", []))
            if not isinstance(data, list):
                raise LegacyFormatError(f"{info.filename}: expected a list of annotations, got {type(data).__name__}")
            total += len(data)
            if total > max_annotations:
                raise LegacyFormatError(f"{info.filename}: more than {max_annotations} annotations in the archive")
            if annotator_id not in users and users:
                warnings.append(f"annotator {annotator_id} has results but no entry in users.json")
            annotations = tuple(
                _annotation(annotator_id, raw, f"{info.filename}, annotation {n + 1}", warnings)
                for n, raw in enumerate(data)
            )
            first: dict[int, int] = {}
            for n, ann in enumerate(annotations):
                if ann.query_index in first:
                    raise LegacyFormatError(
                        f"{info.filename}, annotation {n + 1}: query_index {ann.query_index} repeats annotation "
                        f"{first[ann.query_index] + 1}"
                    )
                first[ann.query_index] = n
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
        "left_system": lc.system,
        "right_system": rc.system,
        "left_model": lc.model,
        "right_model": rc.model,
        "left_condition": lc.condition,
        "right_condition": rc.condition,
        "choice": choice,
        "winner_side": None if choice == "neither" else choice,
        "winner_system": None if win is None else win.system,
        "winner_model": None if win is None else win.model,
        "winner_condition": None if win is None else win.condition,
        "shown_at": None,
        "answered_at": None,
        "seconds_on_page": None,
        PLACEMENT_COLUMN: False,
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
    frame = pd.DataFrame(rows, columns=[*COLUMNS, PLACEMENT_COLUMN])
    frame["seconds_on_page"] = frame["seconds_on_page"].astype("float64")
    frame[PLACEMENT_COLUMN] = frame[PLACEMENT_COLUMN].astype(bool)
    return frame
