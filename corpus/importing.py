"""Reading corpus files (JSONL or SciTLDR) and upserting them into the corpus in batches.

A file is read twice: first every line is checked (JSON, an object, the fields' types and lengths, text
PostgreSQL can store), so that a bad line stops the import before anything is written; then the records
are upserted. A re-import of the same file changes nothing but `updated_at`: rows are matched on external_id.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.db import DatabaseError, connections, transaction

from corpus.models import CorpusDocument, CorpusLexeme
from kernel.jsonl import JsonlError, parse_line
from kernel.storable import json_problem
from kernel.years import parse_year

FORMATS = ("auto", "jsonl", "scitldr")
_CORE_FIELDS = ("id", "external_id", "title", "abstract", "url", "year")
_SCITLDR_SPLIT = re.compile(r"(train|dev|test)", re.IGNORECASE)
# Bounds a record must keep: the model's column lengths, and text lengths far beyond any paper's title or
# abstract that keep the full-text index under PostgreSQL's 1 MB per tsvector.
MAX_ID_CHARS = 255
MAX_URL_CHARS = 2000
MAX_TITLE_CHARS = 5_000
MAX_ABSTRACT_CHARS = 100_000
MAX_LINE_BYTES = 8 * 1024 * 1024


class CorpusFileError(ValueError):
    """A corpus file cannot be imported; the message names the file and line. `imported` counts the records
    written before the error (0 unless the database refused a batch: lines are checked before writing)."""

    def __init__(self, message: str, *, imported: int = 0) -> None:
        super().__init__(message)
        self.imported = imported


@dataclass(frozen=True)
class CorpusRecord:
    external_id: str
    title: str
    abstract: str
    url: str
    year: int | None
    extra: dict[str, Any]


@dataclass(frozen=True)
class ImportResult:
    format: str
    read: int
    created: int
    updated: int
    skipped: int
    total_in_corpus: int


def _text(row: dict[str, Any], name: str, *, limit: int, required: bool = False, what: str = "") -> str:
    """The field as stripped text; a number is accepted for an id. ValueError names the field."""
    value = row.get(name)
    if value is None:
        value = ""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and name in ("id", "paper_id"):
        value = str(value)
    if not isinstance(value, str):
        kind = "a string or a number" if name in ("id", "paper_id") else "a string"
        raise ValueError(f'{what}"{name}" must be {kind}, not a JSON {_json_type(value)}')
    value = value.strip()
    if required and not value:
        raise ValueError(f'{what}no "{name}"' if not what else f'{what}has no "{name}"')
    if len(value) > limit:
        raise ValueError(f'{what}"{name}" has {len(value):,} characters; at most {limit:,} are accepted')
    return value


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", bool: "boolean", int: "number", float: "number", str: "string"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _storable(row: dict[str, Any]) -> None:
    if problem := json_problem(row, where="record"):
        raise ValueError(problem)


def record_from_jsonl(row: dict[str, Any]) -> CorpusRecord:
    """A generic record: id, title, abstract, url, year; every other field goes to `extra`."""
    _storable(row)
    id_field = "id" if row.get("id") is not None else "external_id"
    external_id = _text(row, id_field, limit=MAX_ID_CHARS)
    if not external_id:
        raise ValueError('no "id"')
    what = f"record {external_id!r} "
    abstract = _text(row, "abstract", limit=MAX_ABSTRACT_CHARS, required=True, what=what)
    extra = {k: v for k, v in row.items() if k not in _CORE_FIELDS}
    return CorpusRecord(
        external_id=external_id,
        title=_text(row, "title", limit=MAX_TITLE_CHARS, what=what),
        abstract=abstract,
        url=_text(row, "url", limit=MAX_URL_CHARS, what=what),
        year=parse_year(row.get("year")),
        extra=extra,
    )


def _strings(row: dict[str, Any], name: str, *, what: str) -> list[str]:
    value = row.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f'{what}"{name}" must be an array of strings (SciTLDR layout), not {_describe(value)}')
    return [item.strip() for item in value]


def _describe(value: Any) -> str:
    if isinstance(value, list):
        kinds = sorted({_json_type(item) for item in value if not isinstance(item, str)})
        return f"an array holding {' and '.join(kinds)} values"
    return f"a JSON {_json_type(value)}"


def record_from_scitldr(row: dict[str, Any], *, split: str | None) -> CorpusRecord:
    """A SciTLDR record: the abstract's sentences in `source`, the TLDRs (author's first) in `target`."""
    _storable(row)
    paper_id = _text(row, "paper_id", limit=MAX_ID_CHARS)
    if not paper_id:
        raise ValueError('no "paper_id"')
    what = f"record {paper_id!r} "
    abstract = " ".join(sentence for sentence in _strings(row, "source", what=what) if sentence)
    if not abstract:
        raise ValueError(f'{what}has no "source" sentences')
    if len(abstract) > MAX_ABSTRACT_CHARS:
        raise ValueError(
            f'{what}"source" has {len(abstract):,} characters; at most {MAX_ABSTRACT_CHARS:,} are accepted'
        )
    extra: dict[str, Any] = {"dataset": "scitldr", "tldrs": _strings(row, "target", what=what)}
    if split:
        extra["split"] = split
    return CorpusRecord(
        external_id=paper_id,
        title=_text(row, "title", limit=MAX_TITLE_CHARS, what=what),
        abstract=abstract,
        url=f"https://openreview.net/forum?id={paper_id}",
        year=None,
        extra=extra,
    )


def detect_format(row: dict[str, Any]) -> str:
    return "scitldr" if "paper_id" in row and "source" in row else "jsonl"


def _open(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    raw = path.open("rb")
    return raw, (gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw)  # type: ignore[return-value]


def _lines(stream: IO[bytes], *, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) for every line; None for a line longer than `limit` bytes, which is skipped to
    its end without being held in memory."""
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, line


def read_records(
    path: Path,
    *,
    fmt: str = "auto",
    skip_invalid: bool = False,
    on_bytes: Callable[[int], None] | None = None,
    on_skip: Callable[[int, str], None] | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[tuple[str, int, CorpusRecord]]:
    """Yield (format, line number, record) for every line; raise CorpusFileError naming the line of a bad one."""
    if fmt not in FORMATS:
        raise CorpusFileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if path.is_dir():
        raise CorpusFileError(f"{path}: a directory, not a corpus file (name the .jsonl or .jsonl.gz files in it)")
    if not path.is_file():
        raise CorpusFileError(f"{path}: no such file")
    split_match = _SCITLDR_SPLIT.search(path.name)
    split = split_match.group(1).lower() if split_match else None
    try:
        raw, stream = _open(path)
    except OSError as exc:
        raise CorpusFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    position = 0
    try:
        for number, line in _lines(stream, limit=max_line_bytes):
            if on_bytes is not None:
                now = raw.tell()
                on_bytes(now - position)
                position = now
            try:
                if line is None:
                    raise JsonlError(path, number, f"longer than {max_line_bytes:,} bytes; one record is far smaller")
                row = parse_line(line, name=path, number=number)
                if row is None:
                    continue
                if fmt == "auto":
                    fmt = detect_format(row)
                try:
                    record = record_from_scitldr(row, split=split) if fmt == "scitldr" else record_from_jsonl(row)
                except (ValueError, TypeError) as exc:
                    raise JsonlError(path, number, str(exc)) from None
            except JsonlError as exc:
                if skip_invalid:
                    if on_skip is not None:
                        on_skip(number, exc.problem)
                    continue
                raise CorpusFileError(str(exc)) from None
            yield fmt, number, record
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a .gz damaged inside, not only cut short
        raise CorpusFileError(f"{path}: cannot read ({exc})") from None
    finally:
        stream.close()
        raw.close()


def _upsert(batch: dict[str, CorpusRecord]) -> tuple[int, int]:
    """Insert or update one batch; returns (created, updated)."""
    with transaction.atomic():
        existing = CorpusDocument.objects.filter(external_id__in=list(batch)).count()
        CorpusDocument.objects.bulk_create(
            [
                CorpusDocument(
                    external_id=r.external_id, title=r.title, abstract=r.abstract, url=r.url, year=r.year, extra=r.extra
                )
                for r in batch.values()
            ],
            update_conflicts=True,
            unique_fields=["external_id"],
            update_fields=["title", "abstract", "url", "year", "extra", "updated_at"],
        )
    return len(batch) - existing, existing


def corpus_import(
    *,
    path: Path,
    fmt: str = "auto",
    batch_size: int = 2000,
    skip_invalid: bool = False,
    on_bytes: Callable[[int], None] | None = None,
    on_skip: Callable[[int, str], None] | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> ImportResult:
    """Upsert every record of `path` into the corpus, `batch_size` rows per transaction.

    Every line is checked before the first is written, so a bad file imports nothing (with `skip_invalid`,
    bad lines are reported through `on_skip` and left out). Should the database still refuse a batch, the
    error says which lines it held and how many records before them were imported.
    """
    if batch_size < 1:
        raise CorpusFileError("batch size must be at least 1")
    checked = 0
    for _ in read_records(path, fmt=fmt, skip_invalid=skip_invalid, max_line_bytes=max_line_bytes):
        checked += 1
    if checked == 0:
        raise CorpusFileError(f"{path}: no records found")
    read = created = updated = skipped = 0

    def count_skip(number: int, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        if on_skip is not None:
            on_skip(number, reason)

    detected = fmt
    # Keyed by external_id: a record repeated within a batch is upserted once (the last wins).
    batch: dict[str, CorpusRecord] = {}
    lines: list[int] = []

    def flush() -> None:
        nonlocal created, updated, batch, lines
        try:
            c, u = _upsert(batch)
        except DatabaseError as exc:
            raise CorpusFileError(
                f"{path} lines {lines[0]}-{lines[-1]}: the database refused this batch "
                f"({str(exc).strip().splitlines()[0]}); the {created + updated} records before line {lines[0]} "
                "were imported",
                imported=created + updated,
            ) from None
        created, updated, batch, lines = created + c, updated + u, {}, []

    records = read_records(
        path, fmt=fmt, skip_invalid=skip_invalid, on_bytes=on_bytes, on_skip=count_skip, max_line_bytes=max_line_bytes
    )
    for record_format, number, record in records:
        detected = record_format
        read += 1
        batch[record.external_id] = record
        lines.append(number)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return ImportResult(
        format=detected,
        read=read,
        created=created,
        updated=updated,
        skipped=skipped,
        total_in_corpus=CorpusDocument.objects.count(),
    )


def corpus_refresh_lexeme_stats(*, using: str = "default") -> int:
    """Recount the documents per search lexeme (PostgreSQL); returns the number of lexemes.

    A few seconds per hundred thousand abstracts; search works without it, only slower on
    very large corpora.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return 0
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {CorpusLexeme._meta.db_table}")
        cursor.execute(
            f"INSERT INTO {CorpusLexeme._meta.db_table} (lexeme, ndoc) "  # noqa: S608 - constant table name
            "SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM corpus_corpusdocument') "
            "WHERE length(word) <= 255"
        )
        return int(cursor.rowcount)
