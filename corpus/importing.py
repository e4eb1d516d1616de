"""Reading corpus files (JSONL or SciTLDR) and upserting them into the corpus in batches.

A re-import of the same file changes nothing but `updated_at`: rows are matched on external_id.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.db import connections, transaction

from corpus.models import CorpusDocument, CorpusLexeme
from kernel.jsonl import JsonlError, parse_line
from kernel.years import parse_year

FORMATS = ("auto", "jsonl", "scitldr")
_CORE_FIELDS = ("id", "external_id", "title", "abstract", "url", "year")
_SCITLDR_SPLIT = re.compile(r"(train|dev|test)", re.IGNORECASE)


class CorpusFileError(ValueError):
    """A corpus file cannot be imported; the message names the file and line."""


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


def record_from_jsonl(row: dict[str, Any]) -> CorpusRecord:
    """A generic record: id, title, abstract, url, year; every other field goes to `extra`."""
    external_id = str(row.get("id") if row.get("id") is not None else row.get("external_id") or "").strip()
    if not external_id:
        raise ValueError('no "id"')
    abstract = str(row.get("abstract") or "").strip()
    if not abstract:
        raise ValueError(f'record {external_id!r} has no "abstract"')
    extra = {k: v for k, v in row.items() if k not in _CORE_FIELDS}
    return CorpusRecord(
        external_id=external_id[:255],
        title=str(row.get("title") or "").strip(),
        abstract=abstract,
        url=str(row.get("url") or "").strip()[:2000],
        year=parse_year(row.get("year")),
        extra=extra,
    )


def record_from_scitldr(row: dict[str, Any], *, split: str | None) -> CorpusRecord:
    """A SciTLDR record: the abstract's sentences in `source`, the TLDRs (author's first) in `target`."""
    paper_id = str(row.get("paper_id") or "").strip()
    if not paper_id:
        raise ValueError('no "paper_id"')
    source = row.get("source")
    if not isinstance(source, list) or not source:
        raise ValueError(f'record {paper_id!r} has no "source" sentences')
    abstract = " ".join(str(s).strip() for s in source if str(s).strip())
    target = row.get("target") or []
    extra: dict[str, Any] = {"dataset": "scitldr", "tldrs": [str(t).strip() for t in target]}
    if split:
        extra["split"] = split
    return CorpusRecord(
        external_id=paper_id[:255],
        title=str(row.get("title") or "").strip(),
        abstract=abstract,
        url=f"https://openreview.net/forum?id={paper_id}",
        year=None,
        extra=extra,
    )


def detect_format(row: dict[str, Any]) -> str:
    return "scitldr" if "paper_id" in row and isinstance(row.get("source"), list) else "jsonl"


def _open(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    raw = path.open("rb")
    return raw, (gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw)  # type: ignore[return-value]


def read_records(
    path: Path,
    *,
    fmt: str = "auto",
    skip_invalid: bool = False,
    on_bytes: Callable[[int], None] | None = None,
    on_skip: Callable[[int, str], None] | None = None,
) -> Iterator[tuple[str, CorpusRecord]]:
    """Yield (format, record) for every line; raise CorpusFileError naming the line of a bad one."""
    if fmt not in FORMATS:
        raise CorpusFileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise CorpusFileError(f"{path}: no such file")
    split_match = _SCITLDR_SPLIT.search(path.name)
    split = split_match.group(1).lower() if split_match else None
    raw, stream = _open(path)
    position = 0
    try:
        for number, line in enumerate(stream, start=1):
            if on_bytes is not None:
                now = raw.tell()
                on_bytes(now - position)
                position = now
            try:
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
            yield fmt, record
    except (OSError, EOFError) as exc:
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
) -> ImportResult:
    """Upsert every record of `path` into the corpus, `batch_size` rows per transaction."""
    if batch_size < 1:
        raise CorpusFileError("batch size must be at least 1")
    read = created = updated = skipped = 0

    def count_skip(number: int, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        if on_skip is not None:
            on_skip(number, reason)

    detected = fmt
    # Keyed by external_id: a record repeated within a batch is upserted once (the last wins).
    batch: dict[str, CorpusRecord] = {}
    records = read_records(path, fmt=fmt, skip_invalid=skip_invalid, on_bytes=on_bytes, on_skip=count_skip)
    for record_format, record in records:
        detected = record_format
        read += 1
        batch[record.external_id] = record
        if len(batch) >= batch_size:
            c, u = _upsert(batch)
            created, updated, batch = created + c, updated + u, {}
    if batch:
        c, u = _upsert(batch)
        created, updated = created + c, updated + u
    if read == 0:
        raise CorpusFileError(f"{path}: no records found")
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
