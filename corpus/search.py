"""Full-text search over the local corpus, as a RetrievalBackend.

PostgreSQL: the stored `search_vector` (GIN-indexed) matched with the query's lexemes joined by
OR, so that a long natural-language question still matches, ranked with ts_rank (or ts_rank_cd). SQLite: FTS5
with its BM25 ranking; without FTS5, the kernel's BM25 (bm25s) over the rows that contain one of the query's words.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections

from corpus import index as corpus_index
from corpus.models import CorpusDocument
from kernel import years
from kernel.backends import BackendError, Document
from kernel.bm25 import BM25Index
from kernel.text import content_words

logger = logging.getLogger(__name__)

# SQL below is assembled only from these constants and placeholders; user text is always a parameter.
TABLE = "corpus_corpusdocument"
FTS = "corpus_document_fts"
COLUMNS = "d.id, d.external_id, d.title, d.abstract, d.url, d.year, d.extra"

# Ranking: ts_rank with normalisation 1 (divide by 1 + log(document length), so that long abstracts
# do not win by length alone). On the SciTLDR benchmark (bench/retrieval.py) it finds the paper
# of a TLDR in the top 10 about as often as reference BM25, while ts_rank_cd, whose cover density
# rewards query words standing close together, does markedly worse on OR-ed questions.
PG_RANK_FUNCTIONS = ("ts_rank", "ts_rank_cd")
PG_RANK_FUNCTION = "ts_rank"
PG_RANK_NORMALIZATION = 1
LEXEME_TABLE = "corpus_corpuslexeme"
# On a large corpus, a question's candidate abstracts are those sharing one of its rarer words,
# as many as fit in this many rows (see CorpusRetrieval._match_query).
MATCH_BUDGET_ROWS = 20_000
MATCH_BUDGET_FRACTION = 0.02

_NEGATION = re.compile(r"(^|\s)-+(?=\S)")


def year_range(filters: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(from, to) from the study's filters; filters other search services use are ignored with a warning."""
    filters = dict(filters or {})
    ignored = sorted(k for k in filters if k not in years.YEAR_FILTER_KEYS and filters[k])
    if ignored:
        logger.warning("the local corpus ignores the filter(s) %s", ", ".join(ignored))
    try:
        return years.year_range(filters)
    except years.YearError as exc:
        raise BackendError(f"Year filter {exc.key!r} must be a year, not {exc.value!r}.", transient=False) from None


def query_terms(query: str) -> list[str]:
    """Distinct words of the query without stop words (:func:`kernel.text.content_words`), in order.

    Not stemmed: FTS5 stems with its own Porter tokeniser, so it must receive the words as written.
    """
    return list(dict.fromkeys(content_words(query)))


def _document(row: Sequence[Any], score: float) -> Document:
    _id, external_id, title, abstract, url, year, extra = row
    if isinstance(extra, str):  # SQLite returns JSON as text from raw SQL
        extra = json.loads(extra or "{}")
    extra = extra or {}
    authors = extra.get("authors")
    return Document(
        external_id=str(external_id),
        title=str(title or ""),
        abstract=str(abstract),
        url=str(url or ""),
        year=int(year) if year is not None else None,
        venue=str(extra.get("venue") or ""),
        authors=tuple(str(a) for a in authors) if isinstance(authors, list) else (),
        score=float(score),
    )


def _year_sql(lo: int | None, hi: int | None, params: list[Any]) -> str:
    sql = ""
    if lo is not None:
        sql += " AND d.year >= %s"
        params.append(lo)
    if hi is not None:
        sql += " AND d.year <= %s"
        params.append(hi)
    return sql


class CorpusRetrieval:
    """RetrievalBackend over the imported corpus (see `manage.py import_corpus`)."""

    def __init__(
        self,
        *,
        using: str = "default",
        rank_function: str = PG_RANK_FUNCTION,
        rank_normalization: int = PG_RANK_NORMALIZATION,
    ) -> None:
        if rank_function not in PG_RANK_FUNCTIONS:
            raise ValueError(f"rank_function must be one of {PG_RANK_FUNCTIONS}")
        self.using = using
        self.rank_function = rank_function
        self.rank_normalization = rank_normalization

    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]:
        if k < 1 or not query.strip():
            return []
        lo, hi = year_range(filters)
        connection = connections[self.using]
        if connection.vendor == "postgresql":
            return self._search_postgresql(query, k, lo, hi)
        if connection.vendor == "sqlite":
            if self._has_fts5():
                return self._search_fts5(query, k, lo, hi)
            return self._search_bm25_fallback(query, k, lo, hi)
        return self._search_bm25_fallback(query, k, lo, hi)

    # -- PostgreSQL ---------------------------------------------------------------------

    def _search_postgresql(self, query: str, k: int, lo: int | None, hi: int | None) -> list[Document]:
        # websearch_to_tsquery parses and stems the question (and keeps "quoted phrases"); its
        # ANDs become ORs so that a question need not have every word in one abstract. A leading
        # "-" would turn into a NOT, which under OR matches nearly everything, so it is dropped.
        text = _NEGATION.sub(r"\1", query)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"""
                WITH q AS (SELECT tsvector_to_array(to_tsvector('english', %s)) AS lexemes)
                SELECT replace(websearch_to_tsquery('english', %s)::text, ' & ', ' | '),
                       q.lexemes,
                       (SELECT coalesce(json_object_agg(s.lexeme, s.ndoc), '{{}}'::json)
                          FROM {LEXEME_TABLE} s WHERE s.lexeme = ANY(q.lexemes)),
                       (SELECT reltuples FROM pg_class WHERE oid = '{TABLE}'::regclass)
                FROM q
                """,  # noqa: S608
                [text, text],
            )
            rank_query, lexemes, ndocs, n_rows = cursor.fetchone()
            if not rank_query:
                return []
            match_query = self._match_query(list(lexemes or []), ndocs or {}, float(n_rows or 0)) or rank_query
            params: list[Any] = [rank_query, match_query, self.rank_normalization]
            year_sql = _year_sql(lo, hi, params)
            params.append(k)
            cursor.execute(
                f"""
                WITH q AS (SELECT %s::tsquery AS rank_query, %s::tsquery AS match_query)
                SELECT {COLUMNS}, {self.rank_function}(d.search_vector, q.rank_query, %s) AS score
                FROM {TABLE} d, q
                WHERE d.search_vector @@ q.match_query{year_sql}
                ORDER BY score DESC, d.id
                LIMIT %s
                """,  # noqa: S608
                params,
            )
            rows = cursor.fetchall()
        return [_document(row[:7], row[7]) for row in rows]

    def _match_query(self, lexemes: list[str], ndocs: Mapping[str, int], n_rows: float) -> str:
        """The OR of the question's rarer lexemes, or "" to match on all of them.

        Ranking every abstract that shares a common word ("model", "result") with a question
        means ranking most of a large corpus. Lexemes are taken rarest first while the rows they
        match stay within a budget; all lexemes still count in the ranking. Without statistics
        (SQLite, or a corpus never counted) or on a small corpus, all lexemes match.
        """
        budget = max(MATCH_BUDGET_ROWS, MATCH_BUDGET_FRACTION * n_rows)
        if not ndocs or not lexemes or n_rows <= budget:
            return ""
        chosen: list[str] = []
        total = 0
        for lexeme in sorted(lexemes, key=lambda lex: (ndocs.get(lex, 0), lex)):
            df = ndocs.get(lexeme, 0)
            if chosen and total + df > budget:
                break
            chosen.append(lexeme)
            total += df
        return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in chosen)

    # -- SQLite -------------------------------------------------------------------------

    def _has_fts5(self) -> bool:
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS])
            return cursor.fetchone() is not None

    def _search_fts5(self, query: str, k: int, lo: int | None, hi: int | None) -> list[Document]:
        terms = query_terms(query)
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        params: list[Any] = [match]
        year_sql = _year_sql(lo, hi, params)
        params.append(k)
        # bm25() is lower-is-better; the title counts twice as much as the abstract.
        sql = f"""
            SELECT {COLUMNS}, bm25({FTS}, 2.0, 1.0) AS rank
            FROM {FTS} JOIN {TABLE} d ON d.id = {FTS}.rowid
            WHERE {FTS} MATCH %s{year_sql}
            ORDER BY rank, d.id
            LIMIT %s
        """  # noqa: S608
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [_document(row[:7], -float(row[7])) for row in rows]

    def _search_bm25_fallback(
        self, query: str, k: int, lo: int | None, hi: int | None, *, max_candidates: int = 5000
    ) -> list[Document]:
        """BM25 (:mod:`kernel.bm25`, k1 = 1.5) over the rows containing one of the query's longest words (no index).

        Each candidate is its title twice and its abstract, as distinct words; idf is over the candidates.
        """
        terms = query_terms(query)
        if not terms:
            return []
        probes = sorted(terms, key=len, reverse=True)[:8]
        params: list[Any] = []
        likes = []
        for term in probes:
            likes.append("(LOWER(d.title) LIKE %s OR LOWER(d.abstract) LIKE %s)")
            params += [f"%{term}%", f"%{term}%"]
        year_sql = _year_sql(lo, hi, params)
        params.append(max_candidates)
        sql = f"SELECT {COLUMNS} FROM {TABLE} d WHERE ({' OR '.join(likes)}){year_sql} LIMIT %s"  # noqa: S608
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not rows:
            return []
        rows.sort(key=lambda row: row[0])  # equal scores rank by row id
        # Distinct words per document: the ranking this fallback has always had (term frequency 1).
        index = BM25Index([query_terms(f"{r[2]} {r[2]} {r[3]}") for r in rows], k1=1.5, b=0.75)
        return [_document(rows[i], score) for i, score in index.top(terms, k)]


# The BM25 index is rebuilt on the spot, during a search, only for a corpus this small (about a second
# of indexing); a larger stale one is searched with the database's full-text search until rebuilt.
AUTO_BUILD_MAX_DOCUMENTS = 20_000


class CorpusBM25Retrieval:
    """RetrievalBackend over the imported corpus ranked by BM25 from the on-disk index (corpus.index).

    Two statements per question: the corpus's change token (is the index current?) and the top k rows
    by id. A stale, missing or unreadable index is rebuilt here when the corpus is small, and otherwise
    the question is answered by :class:`CorpusRetrieval` (the database's full-text search) with a
    warning naming the command that rebuilds the index; never an error for the annotator.
    """

    def __init__(self, *, using: str = "default", auto_build_max: int | None = None) -> None:
        self.using = using
        self.auto_build_max = AUTO_BUILD_MAX_DOCUMENTS if auto_build_max is None else auto_build_max
        self.last_source = ""  # "index", "rebuilt" or "fallback": which path answered the last search

    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]:
        if k < 1 or not query.strip():
            return []
        lo, hi = year_range(filters)
        loaded = self._index()
        if loaded is None:
            self.last_source = "fallback"
            return CorpusRetrieval(using=self.using).search(query, k=k, filters=filters)
        top = loaded.top(query, k, lo=lo, hi=hi)
        if not top:
            return []
        with connections[self.using].cursor() as cursor:
            placeholders = ", ".join(["%s"] * len(top))
            cursor.execute(f"SELECT {COLUMNS} FROM {TABLE} d WHERE d.id IN ({placeholders})", [i for i, _ in top])  # noqa: S608
            rows = {row[0]: row for row in cursor.fetchall()}
        return [_document(rows[i], score) for i, score in top if i in rows]

    def _index(self) -> corpus_index.LoadedIndex | None:
        token = corpus_index.corpus_token(using=self.using)
        problem = "there is none"
        try:
            loaded = corpus_index.load_current()
            if loaded is not None:
                if corpus_index.index_matches(loaded, token=token, using=self.using):
                    self.last_source = "index"
                    return loaded
                problem = "the corpus changed since it was built"
        except corpus_index.CorpusIndexError as exc:
            problem = str(exc)
        where = corpus_index.corpus_index_dir()
        # Counted up to the bound only: a million rows are not counted on every search of a stale index.
        small = CorpusDocument.objects.using(self.using).order_by()[: self.auto_build_max + 1].count()
        if small <= self.auto_build_max:
            try:
                corpus_index.corpus_index_build(using=self.using)
                loaded = corpus_index.load_current()
            except corpus_index.CorpusIndexError as exc:
                logger.error("corpus search index: cannot rebuild it (%s); searching with full-text search", exc)
                return None
            if loaded is not None and corpus_index.index_matches(loaded, token=loaded.token, using=self.using):
                logger.info("corpus search index at %s rebuilt (%s)", where, problem)
                self.last_source = "rebuilt"
                return loaded
            return None
        logger.warning(
            "corpus search index at %s not used (%s): searching with full-text search until "
            "`python manage.py build_corpus_index` rebuilds it",
            where,
            problem,
        )
        return None


CORPUS_SEARCH_CHOICES = ("fts", "bm25")


def corpus_retrieval(*, using: str = "default") -> CorpusRetrieval | CorpusBM25Retrieval:
    """The corpus search the deployment chose (setting CORPUS_SEARCH: "fts", the default, or "bm25")."""
    from django.conf import settings

    if settings.CORPUS_SEARCH == "bm25":
        return CorpusBM25Retrieval(using=using)
    return CorpusRetrieval(using=using)
