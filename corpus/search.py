"""Full-text search over the local corpus, as a RetrievalBackend.

PostgreSQL: the stored `search_vector` (GIN-indexed) matched with the query's lexemes joined by
OR, so that a long natural-language question still matches, ranked with ts_rank (or ts_rank_cd). SQLite: FTS5
with its BM25 ranking; without FTS5, BM25 over the rows that contain one of the query's words.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections

from kernel.backends import BackendError, Document

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

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_NEGATION = re.compile(r"(^|\s)-+(?=\S)")
# Only function words: SQLite's FTS5 has no stop-word list of its own.
_STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our so than that the their them then there these they this those to was we
    were what when where which who whom why will with would you your about also any some such""".split()
)
_YEAR_KEYS = frozenset({"from_year", "to_year", "years"})


def year_range(filters: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(from, to) from the study's filters; filters other search services use are ignored with a warning."""
    filters = dict(filters or {})
    ignored = sorted(k for k in filters if k not in _YEAR_KEYS and filters[k])
    if ignored:
        logger.warning("the local corpus ignores the filter(s) %s", ", ".join(ignored))
    lo, hi = filters.get("from_year"), filters.get("to_year")
    years = filters.get("years")
    if years:
        if isinstance(years, str):
            a, _, b = years.partition("-")
            lo, hi = a or None, b or a or None
        else:
            seq = list(years)
            lo, hi = seq[0], seq[-1]
    try:
        return (int(lo) if lo not in (None, "") else None, int(hi) if hi not in (None, "") else None)
    except (TypeError, ValueError):
        raise BackendError(f"Year filters must be years, not {lo!r} and {hi!r}.", transient=False) from None


def query_terms(query: str) -> list[str]:
    """Distinct lower-case words of the query without function words, in order."""
    return list(dict.fromkeys(t for t in (w.lower() for w in _TOKEN.findall(query)) if t not in _STOP_WORDS))


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
        """Okapi BM25 over the rows containing one of the query's longest words (no index)."""
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
        docs = [Counter(query_terms(f"{r[2]} {r[2]} {r[3]}")) for r in rows]
        lengths = [sum(c.values()) for c in docs]
        avg = sum(lengths) / len(lengths) or 1.0
        n = len(docs)
        k1, b = 1.5, 0.75
        scores = []
        for counts, length in zip(docs, lengths, strict=True):
            score = 0.0
            for term in terms:
                tf = counts.get(term, 0)
                if tf:
                    df = sum(1 for c in docs if term in c)
                    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                    score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
            scores.append(score)
        order = sorted(range(n), key=lambda i: (-scores[i], rows[i][0]))[:k]
        return [_document(rows[i], scores[i]) for i in order if scores[i] > 0]
