"""Offline retrieval: BM25 over a JSONL corpus of abstracts (default: the bundled demo corpus).

Plain Python, no Django, deterministic for the same input. The text analysis is the kernel's
(:func:`kernel.text.index_terms`) and the ranking the kernel's BM25 (:mod:`kernel.bm25`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernel.backends import BackendError, Document
from kernel.bm25 import BM25Index
from kernel.jsonl import JsonlError, read_jsonl
from kernel.text import index_terms
from kernel.years import YearError, parse_year

__all__ = ["DEFAULT_CORPUS_PATH", "CorpusIndex", "DemoCorpusRetrieval", "load_corpus_index"]

DEFAULT_CORPUS_PATH = Path(__file__).resolve().parent / "data" / "demo_corpus.jsonl"

# BM25 parameters: k1 = 1.2 (term-frequency saturation) and b = 0.75 (length normalisation).
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True)
class CorpusIndex:
    """The documents of one corpus file and their BM25 index over title + abstract."""

    documents: tuple[Document, ...]
    bm25: BM25Index


_INDEX_CACHE: dict[tuple[str, float, float, float], CorpusIndex] = {}
_INDEX_LOCK = threading.Lock()


def _coerce_record(record: Mapping[str, Any], *, source: str, line_no: int) -> Document:
    external_id = record.get("id", record.get("external_id", record.get("paper_id")))
    title = record.get("title")
    abstract = record.get("abstract")
    if isinstance(abstract, list):  # SciTLDR-style sentence lists
        abstract = " ".join(str(s).strip() for s in abstract)
    if not external_id or not isinstance(title, str) or not isinstance(abstract, str):
        raise JsonlError(source, line_no, "every record needs a non-empty 'id', a 'title' and an 'abstract'")
    authors = record.get("authors") or ()
    if isinstance(authors, str):
        authors = tuple(a.strip() for a in authors.split(",") if a.strip())
    try:
        year = parse_year(record.get("year"))
    except YearError:
        year = None  # a demo corpus without clean years still searches; only the year filters skip it
    return Document(
        external_id=str(external_id),
        title=title.strip(),
        abstract=abstract.strip(),
        url=str(record.get("url") or ""),
        year=year,
        venue=str(record.get("venue") or ""),
        authors=tuple(str(a) for a in authors),
    )


def _build_index(path: Path, *, k1: float, b: float) -> CorpusIndex:
    documents: list[Document] = []
    seen: set[str] = set()
    try:
        for line_no, record in read_jsonl(path):
            document = _coerce_record(record, source=str(path), line_no=line_no)
            if document.external_id in seen:
                raise JsonlError(path, line_no, f"duplicate id {document.external_id!r}")
            seen.add(document.external_id)
            documents.append(document)
    except JsonlError as exc:
        raise BackendError(f"Corpus {exc}.", transient=False) from exc
    if not documents:
        raise BackendError(f"Corpus {path} holds no documents.", transient=False)
    bm25 = BM25Index([index_terms(f"{d.title} {d.abstract}") for d in documents], k1=k1, b=b)
    return CorpusIndex(documents=tuple(documents), bm25=bm25)


def load_corpus_index(path: str | Path, *, k1: float = _K1, b: float = _B) -> CorpusIndex:
    """Load and index a corpus once per process and parameters (re-read only if the file changes)."""
    resolved = Path(path).expanduser().resolve()
    try:
        mtime = resolved.stat().st_mtime
    except OSError as exc:
        raise BackendError(
            f"Corpus file {resolved} not found or unreadable: {exc.strerror or exc}.", transient=False
        ) from exc
    key = (str(resolved), mtime, k1, b)
    with _INDEX_LOCK:
        index = _INDEX_CACHE.get(key)
        if index is None:
            index = _build_index(resolved, k1=k1, b=b)
            for stale in [k for k in _INDEX_CACHE if k[0] == key[0] and k[1] != mtime]:
                del _INDEX_CACHE[stale]
            _INDEX_CACHE[key] = index
    return index


_SUPPORTED_FILTERS = ("year_min", "year_max", "venue")


class DemoCorpusRetrieval:
    """Okapi BM25 over title + abstract of a JSONL corpus (default: the bundled demo corpus).

    Scores are those of :mod:`kernel.bm25` (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) /
    (df + 0.5)), which stays positive for terms in more than half of the documents); repeated
    query terms count once.

    Only documents sharing at least one query term are returned, so fewer than k may come back.
    When no document shares a single query term (a typo, or a word the corpus never uses), we
    fall back to the best partial match: each query term is expanded to the corpus terms that
    share its beginning (at least 4 characters, and all but at most one character of the shorter
    term, e.g. "vaccinology" -> "vaccin"), and BM25 runs on those. If that also finds nothing, the
    first k documents in corpus order are returned with score 0.0 so that a study never starts
    with an empty context; a score of 0 says the document matched nothing in the question, and the
    platform tells the annotator so before the summaries are ranked (Query.retrieval_note).

    Ties are broken by corpus order, so results are deterministic. Filters: `year_min`,
    `year_max` (inclusive) and `venue` (case-insensitive exact match); other keys are an error.
    """

    def __init__(self, path: str | Path | None = None, *, k1: float = _K1, b: float = _B) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise BackendError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}.", transient=False)
        self.path = Path(path) if path is not None else DEFAULT_CORPUS_PATH
        self.k1 = k1
        self.b = b

    @property
    def index(self) -> CorpusIndex:
        return load_corpus_index(self.path, k1=self.k1, b=self.b)

    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]:
        if k < 1:
            raise BackendError(f"k must be at least 1, got {k}.", transient=False)
        index = self.index
        allowed = self._allowed(index, filters)
        terms = list(dict.fromkeys(index_terms(query)))
        ranked = index.bm25.top(terms, k, allowed=allowed)
        if not ranked:
            ranked = index.bm25.top(self._expand_partial(index, terms), k, allowed=allowed)
        if not ranked:
            candidates = [i for i in range(len(index.documents)) if allowed is None or i in allowed]
            ranked = [(i, 0.0) for i in candidates[:k]]
        return [replace(index.documents[i], score=round(score, 6)) for i, score in ranked]

    @staticmethod
    def _expand_partial(index: CorpusIndex, terms: Sequence[str]) -> list[str]:
        """Corpus terms sharing a prefix with a query term (>= 4 characters, at most one short of the shorter)."""
        expanded: list[str] = []
        vocabulary = sorted(index.bm25.vocabulary)
        for term in terms:
            if len(term) < 4:
                continue
            for candidate in vocabulary:
                shared = len(os.path.commonprefix([term, candidate]))
                if shared >= 4 and shared >= min(len(term), len(candidate)) - 1:
                    expanded.append(candidate)
        return list(dict.fromkeys(expanded))

    @staticmethod
    def _allowed(index: CorpusIndex, filters: Mapping[str, Any] | None) -> set[int] | None:
        if not filters:
            return None
        unknown = sorted(set(filters) - set(_SUPPORTED_FILTERS))
        if unknown:
            raise BackendError(
                f"Unsupported filter(s) {', '.join(unknown)} for the demo corpus; use {', '.join(_SUPPORTED_FILTERS)}.",
                transient=False,
            )
        try:
            year_min = parse_year(filters.get("year_min"), key="year_min")
            year_max = parse_year(filters.get("year_max"), key="year_max")
        except YearError as exc:
            raise BackendError("Filters year_min and year_max must be whole years.", transient=False) from exc
        venue = filters.get("venue")
        allowed: set[int] = set()
        for i, doc in enumerate(index.documents):
            if year_min is not None and (doc.year is None or doc.year < year_min):
                continue
            if year_max is not None and (doc.year is None or doc.year > year_max):
                continue
            if venue is not None and doc.venue.casefold() != str(venue).casefold():
                continue
            allowed.add(i)
        return allowed
