"""The corpus's BM25 search index: built from the database into a folder, memory-mapped by every process.

A build is a folder under ``CORPUS_INDEX_DIR/builds/`` holding bm25s's saved index (the BM25 score of
every term in every abstract, title + abstract through :func:`kernel.text.index_terms`, Okapi k1 1.2,
b 0.75, idf ln(1 + (N - df + 0.5)/(df + 0.5))), the row id and year of each indexed abstract, and a
manifest with the corpus token it was built from (:class:`corpus.models.CorpusState`, changed by
database triggers on every write to the corpus). ``CURRENT.json`` names the build in use and is
replaced atomically, so a process reading it never sees half a build; older builds are deleted once
replaced (a process that still maps one keeps reading it until it switches).

A build whose token is not the database's is stale; a missing or unreadable one is no index. Search
(corpus.search.CorpusBM25Retrieval) then rebuilds it on the spot for a small corpus, and otherwise
answers from the database's full-text search, logging what to run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.db import connections, transaction

from corpus.models import CorpusDocument, CorpusState
from kernel.text import STOP_WORDS, TOKEN_PATTERN, stem
from kernel.text import _pattern as _token_pattern

__all__ = [
    "ANALYSER",
    "BuildResult",
    "CorpusIndexError",
    "LoadedIndex",
    "corpus_index_build",
    "corpus_index_dir",
    "corpus_token",
    "load_current",
]

logger = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)

# What the manifest must match besides the token: an index built with another analyser or other
# parameters is rebuilt, not used.
ANALYSER = "kernel.text.index_terms/1"
K1 = 1.2
B = 0.75
FORMAT = 1
CURRENT = "CURRENT.json"
MANIFEST = "manifest.json"
DOC_IDS = "doc_ids.npy"
YEARS = "years.npy"
NO_YEAR = -1


class CorpusIndexError(Exception):
    """The index folder cannot be read or written; the message names the folder and what is wrong."""


def corpus_index_dir() -> Path:
    return Path(settings.CORPUS_INDEX_DIR)


_STEMS: dict[str, str] = {}


def analyse(text: str) -> list[str]:
    """:func:`kernel.text.index_terms`, with each word's stem remembered (a million abstracts share their words)."""
    out = []
    stems = _STEMS
    for token in _token_pattern(TOKEN_PATTERN).findall(text.lower()):
        if len(token) < 2 or token in STOP_WORDS:
            continue
        stemmed = stems.get(token)
        if stemmed is None:
            if len(stems) > 2_000_000:  # a corpus of random strings must not grow this forever
                stems.clear()
            stemmed = stems[token] = stem(token)
        out.append(stemmed)
    return out


def corpus_token(*, using: str = "default") -> str:
    """The corpus's current change token (created if the row is missing)."""
    token = CorpusState.objects.using(using).filter(pk=1).values_list("token", flat=True).first()
    if token is None:
        token = os.urandom(16).hex()
        CorpusState.objects.using(using).get_or_create(pk=1, defaults={"token": token})
        token = CorpusState.objects.using(using).values_list("token", flat=True).get(pk=1)
    return str(token)


def _database_identity(using: str) -> str:
    conn = connections[using].settings_dict
    return f"{connections[using].vendor}:{conn.get('HOST') or ''}:{conn.get('PORT') or ''}:{conn.get('NAME')}"


@dataclass(frozen=True)
class BuildResult:
    path: Path
    documents: int
    terms: int
    seconds: float


@dataclass
class LoadedIndex:
    """One build, memory-mapped: scores a question against every abstract without touching the database."""

    path: Path
    manifest: dict[str, Any]
    bm25: bm25s.BM25 | None
    doc_ids: npt.NDArray[np.int64]
    years: npt.NDArray[np.int16]

    @property
    def token(self) -> str:
        return str(self.manifest["token"])

    def top(self, query: str, k: int, *, lo: int | None = None, hi: int | None = None) -> list[tuple[int, float]]:
        """The k best (row id, score) with a positive score; equal scores in row order."""
        n = len(self.doc_ids)
        if self.bm25 is None or n == 0 or k < 1:
            return []
        vocab = self.bm25.vocab_dict
        term_ids = [vocab[t] for t in dict.fromkeys(analyse(query)) if t in vocab]
        if not term_ids:
            return []
        # bm25s's own scoring (a float32 sum per term into one array), the reference's to the last bit.
        scores = self.bm25.get_scores_from_ids(term_ids)
        if lo is not None or hi is not None:
            keep = self.years != NO_YEAR
            if lo is not None:
                keep &= self.years >= lo
            if hi is not None:
                keep &= self.years <= hi
            scores = np.where(keep, scores, 0)
        kth = np.partition(scores, n - k)[n - k] if n > k else 0
        candidates = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)
        values = scores[candidates]
        order = np.lexsort((candidates, -values))[:k]
        return [(int(self.doc_ids[candidates[i]]), float(values[i])) for i in order]


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _rows(using: str, chunk_size: int) -> Iterator[tuple[int, str, str, int | None]]:
    rows = CorpusDocument.objects.using(using).order_by("id").values_list("id", "title", "abstract", "year")
    yield from rows.iterator(chunk_size=chunk_size)


def corpus_index_build(
    *, using: str = "default", root: Path | None = None, chunk_size: int = 5000, keep_old: bool = False
) -> BuildResult:
    """Index every abstract of the corpus into a new build and make it the current one.

    The token is read before the rows, so a write during the build leaves the build stale (and rebuilt),
    never current with rows it lacks. Raises CorpusIndexError when the folder cannot be written.
    """
    root = root or corpus_index_dir()
    started = time.perf_counter()
    try:
        with _build_lock(root):
            with transaction.atomic(using=using):
                token = corpus_token(using=using)
            vocab: dict[str, int] = {}
            corpus_ids: list[list[int]] = []
            doc_ids: list[int] = []
            years: list[int] = []
            for pk, title, abstract, year in _rows(using, chunk_size):
                corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in analyse(f"{title} {abstract}")])
                doc_ids.append(pk)
                years.append(NO_YEAR if year is None else int(year))
            build = root / "builds" / f"{datetime.now(UTC):%Y%m%dT%H%M%S.%f}-{os.getpid()}"
            tmp = build.with_name(build.name + ".tmp")
            tmp.mkdir(parents=True)
            if vocab:
                bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
                bm25.index(
                    bm25s.tokenization.Tokenized(ids=corpus_ids, vocab=vocab),
                    create_empty_token=False,
                    show_progress=False,
                )
                del corpus_ids
                bm25.save(tmp, show_progress=False)
            np.save(tmp / DOC_IDS, np.asarray(doc_ids, dtype=np.int64))
            np.save(tmp / YEARS, np.asarray(years, dtype=np.int16))
            manifest = {
                "format": FORMAT,
                "token": token,
                "database": _database_identity(using),
                "analyser": ANALYSER,
                "k1": K1,
                "b": B,
                "documents": len(doc_ids),
                "terms": len(vocab),
                "built_at": datetime.now(UTC).isoformat(),
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
            tmp.rename(build)
            _write_current(root, build.name)
            if not keep_old:
                for old in (root / "builds").iterdir():
                    if old.name != build.name:
                        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise CorpusIndexError(f"cannot write the corpus search index under {root}: {exc}") from exc
    return BuildResult(path=build, documents=len(doc_ids), terms=len(vocab), seconds=time.perf_counter() - started)


def _write_current(root: Path, name: str) -> None:
    tmp = root / f"{CURRENT}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"build": name}), encoding="utf-8")
    os.replace(tmp, root / CURRENT)


def current_build(root: Path | None = None) -> Path | None:
    """The folder CURRENT.json names, or None when there is none; CorpusIndexError when it is unreadable."""
    root = root or corpus_index_dir()
    try:
        name = json.loads((root / CURRENT).read_text(encoding="utf-8"))["build"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusIndexError(f"{root / CURRENT} is unreadable ({exc})") from exc
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise CorpusIndexError(f"{root / CURRENT} names no build")
    return root / "builds" / name


def load_build(path: Path) -> LoadedIndex:
    """Open a build (memory-mapped); CorpusIndexError says what is missing or inconsistent."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CorpusIndexError(f"{path}: not a corpus index of this version")
        doc_ids = np.load(path / DOC_IDS, mmap_mode="r")
        years = np.load(path / YEARS, mmap_mode="r")
        bm25 = None
        if manifest.get("terms"):
            bm25 = bm25s.BM25.load(path, mmap=True, show_progress=False)
            indptr = bm25.scores["indptr"]
            if bm25.scores["num_docs"] != len(doc_ids) or len(indptr) != len(bm25.vocab_dict) + 1:
                raise CorpusIndexError(f"{path}: its files do not belong together")
            if int(indptr[-1]) != len(bm25.scores["indices"]) or len(bm25.scores["data"]) != int(indptr[-1]):
                raise CorpusIndexError(f"{path}: a score file is truncated")
        if len(years) != len(doc_ids) or len(doc_ids) != manifest.get("documents"):
            raise CorpusIndexError(f"{path}: its files do not belong together")
    except CorpusIndexError:
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise CorpusIndexError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from exc
    return LoadedIndex(path=path, manifest=manifest, bm25=bm25, doc_ids=doc_ids, years=years)


_LOADED: dict[str, LoadedIndex] = {}
_LOAD_LOCK = threading.Lock()


def load_current(root: Path | None = None) -> LoadedIndex | None:
    """The current build, loaded once per process (and again when CURRENT.json names another)."""
    path = current_build(root)
    if path is None:
        return None
    key = str(root or corpus_index_dir())
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None or loaded.path != path:
            loaded = _LOADED[key] = load_build(path)
        return loaded


def index_matches(loaded: LoadedIndex, *, token: str, using: str = "default") -> bool:
    manifest = loaded.manifest
    return (
        manifest.get("token") == token
        and manifest.get("database") == _database_identity(using)
        and manifest.get("analyser") == ANALYSER
        and manifest.get("k1") == K1
        and manifest.get("b") == B
    )


def forget_loaded() -> None:
    """Drop the indexes this process holds (tests simulate a restart with it)."""
    with _LOAD_LOCK:
        _LOADED.clear()
