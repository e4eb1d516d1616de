"""Retrieval benchmark on SciTLDR: Recall@10 and latency of the corpus search beside reference BM25.

Each of SciTLDR's 3,229 papers (train, dev and test) is imported into the configured database with
the same code as `manage.py import_corpus`; each paper's first TLDR (the author's) is a query whose
one relevant answer is that paper. The corpus search runs as a study would: CorpusBM25Retrieval
(CORPUS_SEARCH=bm25: the BM25 index built as import_corpus builds it, into a temporary folder, then
searched from a fresh load of its files, as after a restart) and CorpusRetrieval (PostgreSQL full-text
search with ts_rank and with ts_rank_cd, or SQLite FTS5). bm25s in memory over the same analyser's tokens
is the reference for the index; the reference BM25 implementations (rank-bm25's
BM25Okapi and, if installed, bm25s) rank the very same lexemes that PostgreSQL indexed, so that
only the ranking differs. The offline backend (DemoCorpusRetrieval: the kernel's analyser and its
BM25 on bm25s) ranks the same abstracts exported to JSONL, beside the hand-written Okapi BM25 it
replaced (kept below as the reference). With --distractors N, N synthetic abstracts (sentences of
real ones, shuffled across papers) are added first, to measure the search at scale.

--scale N (default 4000) then grows the corpus to N abstracts with distractors and times, on the
first --scale-queries questions, the corpus search's BM25 fallback (the SQLite path without FTS5;
its SQL is portable, so it runs here on PostgreSQL) and the offline retrieval, each before (the
old code, kept in this file) and after (kernel.bm25). --scale 0 skips it.

It runs on its own PostgreSQL database, `bench_retrieval` (--db-name), created and migrated when missing and
kept between runs, so that a million distractors are added once (--fresh drops it first).

    python bench/retrieval.py [--limit 500] [--distractors 1000000] [--scale 4000]
    python bench/retrieval.py --distractors 1000000 --limit 500 --skip-rank-bm25 --skip-offline --skip-cd --scale 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from _shared import check_db_name, manage, recreate_database  # bench/ is the script directory

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = Path(os.environ.get("SCITLDR_DIR", ROOT.parent / "shared" / "data" / "scitldr"))


def use_database(server: str, name: str, *, fresh: bool) -> None:
    """Point this process at the benchmark's own database (never the developer's, which the import would fill),
    creating and migrating it when it is missing; a developer's .env is not read."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None
    if fresh or not exists:
        recreate_database(f"{server}/postgres", name)
    work = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DATABASE_URL": f"{server}/{name}",
            "ENV_FILE": str(work / "no.env"),
            "LOG_LEVEL": "WARNING",
        }
    )
    manage(dict(os.environ), "migrate", "--noinput")


@dataclass(frozen=True)
class Row:
    system: str
    recall_at_10: float
    mrr_at_10: float
    p50_ms: float
    p95_ms: float
    queries: int


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def evaluate(name: str, search: Callable[[str], list[str]], queries: Sequence[tuple[str, str]]) -> Row:
    row = _evaluate(name, search, queries)
    print(
        f"  {row.system}: R@10 {row.recall_at_10:.3f}, MRR@10 {row.mrr_at_10:.3f}, p50 {row.p50_ms:.2f} ms", flush=True
    )
    return row


def _evaluate(name: str, search: Callable[[str], list[str]], queries: Sequence[tuple[str, str]]) -> Row:
    hits = 0
    reciprocal = 0.0
    latencies = []
    for paper_id, query in queries:
        started = time.perf_counter()
        ranked = search(query)[:10]
        latencies.append((time.perf_counter() - started) * 1000)
        if paper_id in ranked:
            hits += 1
            reciprocal += 1 / (ranked.index(paper_id) + 1)
    n = len(queries)
    return Row(name, hits / n, reciprocal / n, statistics.median(latencies), percentile(latencies, 0.95), n)


def ids_of(retrieval: Any, query: str) -> list[str]:
    return [d.external_id for d in retrieval.search(query, k=10)]


def add_distractors(n: int, *, seed: int) -> None:
    """Insert n synthetic abstracts made of real SciTLDR sentences, in SQL (fast, no Python rows)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM corpus_corpusdocument WHERE external_id LIKE 'distractor-%%'")
        have = cursor.fetchone()[0]
        if have >= n:
            return
        print(f"adding {n - have} distractor abstracts ...", flush=True)
        cursor.execute("SELECT setseed(%s)", [((seed % 1000) / 1000)])
        cursor.execute(
            """
            CREATE TEMP TABLE bench_sentences AS
            SELECT row_number() OVER () AS i, s AS sentence
            FROM corpus_corpusdocument d,
                 regexp_split_to_table(d.abstract, '(?<=[.!?])\\s+') AS s
            WHERE d.extra->>'dataset' = 'scitldr'
            """
        )
        # Without an index every synthetic row would scan all sentences twice.
        cursor.execute("CREATE UNIQUE INDEX ON bench_sentences (i)")
        cursor.execute("ANALYZE bench_sentences")
        cursor.execute("SELECT count(*) FROM bench_sentences")
        total = cursor.fetchone()[0]
        step = 100_000
        for start in range(have, n, step):
            stop = min(n, start + step)
            cursor.execute(
                """
                INSERT INTO corpus_corpusdocument (external_id, title, abstract, url, year, extra, created_at, updated_at)
                SELECT 'distractor-' || g,
                       (SELECT sentence FROM bench_sentences WHERE i = 1 + ((g * 7919) %% %s)),
                       (SELECT string_agg(sentence, ' ') FROM bench_sentences
                         WHERE i IN (1 + ((g * 104729) %% %s), 1 + ((g * 1299709) %% %s),
                                     1 + ((g * 15485863) %% %s), 1 + ((g * 32452843) %% %s),
                                     1 + ((g * 49979687) %% %s))),
                       '', NULL, '{"dataset": "distractor"}'::jsonb, now(), now()
                FROM generate_series(%s::bigint, %s::bigint) AS g
                ON CONFLICT (external_id) DO NOTHING
                """,
                [total] * 6 + [start + 1, stop],
            )
            print(f"  {stop} / {n}", flush=True)
        cursor.execute("ANALYZE corpus_corpusdocument")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries (default: all)")
    parser.add_argument("--distractors", type=int, default=0, help="add N synthetic abstracts first (PostgreSQL)")
    parser.add_argument("--skip-reference", action="store_true", help="do not run the reference BM25")
    parser.add_argument("--skip-offline", action="store_true", help="do not run the offline backend (old and new)")
    parser.add_argument("--skip-index", action="store_true", help="do not build and search the BM25 index")
    parser.add_argument("--skip-cd", action="store_true", help="do not run PostgreSQL with ts_rank_cd")
    parser.add_argument("--skip-fts", action="store_true", help="do not run the database's full-text search")
    parser.add_argument(
        "--reference-from-index",
        action="store_true",
        help="time bm25s in memory on the index's files (use with --skip-reference at 1M: no second build)",
    )
    parser.add_argument(
        "--skip-rank-bm25", action="store_true", help="no rank-bm25 and no bm25s on PostgreSQL's lexemes (slow at 1M)"
    )
    parser.add_argument("--scale", type=int, default=4000, help="abstracts for the before/after timing (0: skip)")
    parser.add_argument("--scale-queries", type=int, default=20, help="questions for the before/after timing")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--db-name", default="bench_retrieval", help="created and migrated when missing, kept between runs"
    )
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, without database")
    parser.add_argument("--fresh", action="store_true", help="drop and recreate the database first")
    args = parser.parse_args()
    check_db_name(parser, args.db_name)
    use_database(args.postgres, args.db_name, fresh=args.fresh)

    import django

    django.setup()
    from django.db import connection

    from corpus.importing import corpus_import, corpus_refresh_lexeme_stats
    from corpus.models import CorpusDocument
    from corpus.search import CorpusRetrieval

    files = sorted(DATA.glob("SciTLDR-A_*.jsonl"))
    if not files:
        raise SystemExit(f"no SciTLDR files in {DATA} (set SCITLDR_DIR)")
    started = time.perf_counter()
    for path in files:
        corpus_import(path=path, fmt="scitldr")
    if args.distractors:
        if connection.vendor != "postgresql":
            raise SystemExit("--distractors needs PostgreSQL")
        add_distractors(args.distractors, seed=args.seed)
    corpus_refresh_lexeme_stats()
    n_docs = CorpusDocument.objects.count()
    print(f"corpus ready in {time.perf_counter() - started:.1f}s: {n_docs} abstracts ({connection.vendor})")

    papers = list(
        CorpusDocument.objects.filter(extra__dataset="scitldr")
        .order_by("external_id")
        .values_list("external_id", "extra")
    )
    queries = [(pid, extra["tldrs"][0]) for pid, extra in papers if extra.get("tldrs")]
    if args.limit:
        queries = queries[: args.limit]
    print(f"{len(queries)} queries (each paper's first TLDR); relevant = that paper\n")

    rows = []
    if not args.skip_index:
        rows += index_rows(queries, in_memory_reference=args.reference_from_index)
    variants = [("ts_rank", "default"), ("ts_rank_cd", "")] if connection.vendor == "postgresql" else [("", "")]
    if args.skip_cd:
        variants = variants[:1]
    if args.skip_fts:
        variants = []
    for rank_function, note in variants:
        retrieval = CorpusRetrieval(rank_function=rank_function) if rank_function else CorpusRetrieval()
        label = f"PostgreSQL FTS, {rank_function}" if rank_function else f"{connection.vendor} FTS5 bm25"
        label += f", {note}" if note else ""
        for query in queries[:20]:  # warm the cache and the connection
            retrieval.search(query[1], k=10)
        rows.append(evaluate(f"CorpusRetrieval ({label})", partial(ids_of, retrieval), queries))

    if not args.skip_reference:
        rows += bm25s_memory_rows(queries)
        if connection.vendor == "postgresql":
            rows += reference_rows(queries, rank_bm25=not args.skip_rank_bm25)
    if not args.skip_offline:
        rows += offline_rows(queries)

    print_table(rows)
    print(f"\nabstracts in the corpus: {n_docs}")

    if args.scale:
        if connection.vendor != "postgresql":
            raise SystemExit("--scale needs PostgreSQL for its distractors (or pass --scale 0)")
        if args.scale > n_docs:
            have = CorpusDocument.objects.filter(external_id__startswith="distractor-").count()
            add_distractors(have + args.scale - n_docs, seed=args.seed)
        n_docs = CorpusDocument.objects.count()
        print(f"\nbefore/after at {n_docs} abstracts, first {args.scale_queries} questions:")
        print_table(scale_rows(queries[: args.scale_queries]))


def print_table(rows: Sequence[Row]) -> None:
    print(f"{'system':<60} {'R@10':>6} {'MRR@10':>7} {'p50 ms':>9} {'p95 ms':>9} {'queries':>8}")
    for row in rows:
        print(
            f"{row.system:<60} {row.recall_at_10:>6.3f} {row.mrr_at_10:>7.3f} {row.p50_ms:>9.2f} {row.p95_ms:>9.2f} "
            f"{row.queries:>8}"
        )


def export_corpus(path: Path) -> None:
    """Every abstract of the database as the offline backend's JSONL (id, title, abstract)."""
    from corpus.models import CorpusDocument

    with path.open("w", encoding="utf-8") as handle:
        for external_id, title, abstract in CorpusDocument.objects.order_by("id").values_list(
            "external_id", "title", "abstract"
        ):
            handle.write(json.dumps({"id": external_id, "title": title, "abstract": abstract}) + "\n")


def offline_rows(queries: Sequence[tuple[str, str]], *, label: str = "") -> list[Row]:
    """DemoCorpusRetrieval (kernel analyser + bm25s) and the hand-written BM25 it replaced, same documents."""
    from generation.offline_retrieval import DemoCorpusRetrieval

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        export_corpus(path)
        started = time.perf_counter()
        legacy = LegacyOfflineBM25(path)
        print(f"old offline index ({label or 'corpus'}) built in {time.perf_counter() - started:.2f}s")
        rows.append(evaluate(f"offline, old hand-written BM25{label}", legacy.ids, queries))
        retrieval = DemoCorpusRetrieval(path)
        started = time.perf_counter()
        retrieval.index  # noqa: B018 - builds and caches the index
        print(f"offline index ({label or 'corpus'}) built in {time.perf_counter() - started:.2f}s")
        rows.append(evaluate(f"offline DemoCorpusRetrieval (bm25s){label}", partial(ids_of, retrieval), queries))
    return rows


def scale_rows(queries: Sequence[tuple[str, str]]) -> list[Row]:
    from corpus.search import CorpusRetrieval

    retrieval = CorpusRetrieval()
    old: dict[str, list[str]] = {}
    new: dict[str, list[str]] = {}

    def old_search(q: str) -> list[str]:
        old[q] = legacy_bm25_fallback("default", q)
        return old[q]

    def new_search(q: str) -> list[str]:
        new[q] = [d.external_id for d in retrieval._search_bm25_fallback(q, 10, None, None)]
        return new[q]

    rows = [
        evaluate("fallback BM25, old (quadratic)", old_search, queries),
        evaluate("fallback BM25, new (kernel.bm25)", new_search, queries),
    ]
    same = sum(old[q] == new[q] for _, q in queries)
    print(f"fallback: the new top 10 is the old one for {same} of {len(queries)} questions")
    return rows + offline_rows(queries, label=" @scale")


# -- the code that kernel.bm25 replaced, kept as the reference for the timings ----------------

_LEGACY_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_LEGACY_SQL_STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my no not of on or our so than that the their them then there these they this those to was we
    were what when where which who whom why will with would you your about also any some such""".split()
)


def _legacy_query_terms(query: str) -> list[str]:
    return list(
        dict.fromkeys(t for t in (w.lower() for w in _LEGACY_TOKEN.findall(query)) if t not in _LEGACY_SQL_STOP_WORDS)
    )


def legacy_bm25_fallback(using: str, query: str, k: int = 10, *, max_candidates: int = 5000) -> list[str]:
    """corpus.search's BM25 fallback before kernel.bm25 (df recounted over all candidates per term and row)."""
    from django.db import connections

    terms = _legacy_query_terms(query)
    if not terms:
        return []
    probes = sorted(terms, key=len, reverse=True)[:8]
    params: list[Any] = []
    likes = []
    for term in probes:
        likes.append("(LOWER(d.title) LIKE %s OR LOWER(d.abstract) LIKE %s)")
        params += [f"%{term}%", f"%{term}%"]
    params.append(max_candidates)
    sql = f"SELECT d.id, d.external_id, d.title, d.abstract FROM corpus_corpusdocument d WHERE ({' OR '.join(likes)}) LIMIT %s"  # noqa: S608
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return []
    docs = [Counter(_legacy_query_terms(f"{r[2]} {r[2]} {r[3]}")) for r in rows]
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
    return [rows[i][1] for i in order if scores[i] > 0]


class LegacyOfflineBM25:
    """The offline backend's hand-written Okapi BM25 (postings in dicts) with its own ASCII tokeniser."""

    _token = re.compile(r"[a-z0-9]+")

    def __init__(self, path: Path, k1: float = 1.2, b: float = 0.75) -> None:
        from kernel.text import STOP_WORDS, stem

        self._stop, self._stem = STOP_WORDS, stem
        self.k1, self.b = k1, b
        self.ids: Callable[[str], list[str]] = self._ids
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        self.doc_ids = [r["id"] for r in records]
        self.term_freqs = [Counter(self.tokenize(f"{r['title']} {r['abstract']}")) for r in records]
        self.lengths = [sum(tf.values()) for tf in self.term_freqs]
        self.avg = (sum(self.lengths) / len(self.lengths)) or 1.0
        self.postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self.term_freqs):
            for term in tf:
                self.postings.setdefault(term, []).append(i)

    def tokenize(self, text: str) -> list[str]:
        return [self._stem(t) for t in self._token.findall(text.lower()) if t not in self._stop and len(t) > 1]

    def _ids(self, query: str) -> list[str]:
        n = len(self.term_freqs)
        scores: dict[int, float] = {}
        for term in dict.fromkeys(self.tokenize(query)):
            postings = self.postings.get(term, [])
            if not postings:
                continue
            idf = math.log(1.0 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for i in postings:
                tf = self.term_freqs[i][term]
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[i] / self.avg)
                scores[i] = scores.get(i, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:10]
        return [self.doc_ids[i] for i, _ in ranked]


def index_rows(queries: Sequence[tuple[str, str]], *, in_memory_reference: bool = False) -> list[Row]:
    """The BM25 index backend (CorpusBM25Retrieval): built as import_corpus builds it, then searched as a study
    searches (token check, index, rows fetched by id), once from a fresh load of the files (a restart)."""
    from corpus import index as corpus_index
    from corpus.search import CorpusBM25Retrieval

    with tempfile.TemporaryDirectory(prefix="bench-corpus-index-") as tmp:
        from django.conf import settings

        settings.CORPUS_INDEX_DIR = tmp
        started = time.perf_counter()
        built = corpus_index.corpus_index_build()
        size = sum(f.stat().st_size for f in built.path.iterdir())
        print(
            f"BM25 index built in {time.perf_counter() - started:.1f}s: {built.documents} abstracts, "
            f"{built.terms} terms, {size / 2**20:.0f} MiB on disk"
        )
        corpus_index.forget_loaded()  # as after a restart: the first search maps the files
        retrieval = CorpusBM25Retrieval(auto_build_max=0)
        started = time.perf_counter()
        retrieval.search(queries[0][1], k=10)
        print(f"first search after a restart (loads the index): {(time.perf_counter() - started) * 1000:.0f} ms")
        if retrieval.last_source != "index":
            raise SystemExit(f"the BM25 index was not used ({retrieval.last_source})")
        for query in queries[:20]:
            retrieval.search(query[1], k=10)
        row = evaluate(
            "CorpusBM25Retrieval (BM25 index, mmap; CORPUS_SEARCH=bm25)", partial(ids_of, retrieval), queries
        )
        if retrieval.last_source != "index":
            raise SystemExit(f"the BM25 index was not used ({retrieval.last_source})")
        corpus_index.forget_loaded()
        rows = [row]
        if in_memory_reference:
            rows.append(bm25s_from_index_row(built.path, queries))
    return rows


def bm25s_from_index_row(path: Path, queries: Sequence[tuple[str, str]]) -> Row:
    """bm25s in memory on the index's own files (loaded without mmap) and its own retrieve(): the latency
    reference at a size where building a second index from scratch is too slow for a shared machine."""
    import bm25s
    import numpy as np

    from corpus.index import DOC_IDS, analyse
    from corpus.models import CorpusDocument

    started = time.perf_counter()
    index = bm25s.BM25.load(path, mmap=False, show_progress=False)
    row_ids = np.load(path / DOC_IDS)
    external = dict(CorpusDocument.objects.filter(extra__dataset="scitldr").values_list("id", "external_id"))
    print(f"bm25s loaded the index into memory in {time.perf_counter() - started:.1f}s")

    def search(q: str) -> list[str]:
        tokens = [t for t in dict.fromkeys(analyse(q)) if t in index.vocab_dict]
        if not tokens:
            return []
        results, _scores = index.retrieve([tokens], k=10, show_progress=False, n_threads=1)
        return [external.get(int(row_ids[i]), "distractor") for i in results[0]]

    return evaluate("bm25s in memory (the index's files, bm25s retrieve), reference", search, queries)


def bm25s_memory_rows(queries: Sequence[tuple[str, str]]) -> list[Row]:
    """bm25s in memory, the reference: the same analyser and parameters as the index.

    corpus.index.analyse is kernel.text.index_terms with its stems memoised (3x faster on a million abstracts;
    the same tokens, tests/corpus/test_bm25_index.py)."""
    import bm25s
    from django.db import connection

    from corpus.index import analyse as index_terms

    ids: list[str] = []
    docs: list[list[str]] = []
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT external_id, title, abstract FROM corpus_corpusdocument ORDER BY id")
        while chunk := cursor.fetchmany(10_000):
            for external_id, title, abstract in chunk:
                ids.append(external_id)
                docs.append(index_terms(f"{title} {abstract}"))
    index = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    index.index(docs, show_progress=False)
    del docs
    vocab = set(index.vocab_dict)
    print(f"bm25s in-memory index built in {time.perf_counter() - started:.1f}s (reading and tokenising included)")

    def search(q: str) -> list[str]:
        tokens = [t for t in dict.fromkeys(index_terms(q)) if t in vocab] or [""]
        results, _scores = index.retrieve([tokens], k=10, show_progress=False, n_threads=1)
        return [ids[i] for i in results[0]]

    return [evaluate("bm25s in memory (kernel analyser), reference", search, queries)]


def reference_rows(queries: Sequence[tuple[str, str]], *, rank_bm25: bool = True) -> list[Row]:
    """BM25 from well-kept libraries over exactly the lexemes PostgreSQL indexed (tf from positions)."""
    if not rank_bm25:
        return []
    from django.db import connection
    from rank_bm25 import BM25Okapi

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.external_id, array_agg(t.lexeme), array_agg(coalesce(array_length(t.positions, 1), 1))
            FROM corpus_corpusdocument d, unnest(d.search_vector) AS t
            GROUP BY d.id ORDER BY d.id
            """
        )
        ids, docs = [], []
        for external_id, lexemes, counts in cursor.fetchall():
            ids.append(external_id)
            docs.append([lex for lex, c in zip(lexemes, counts, strict=True) for _ in range(c)])
        cursor.execute(
            "SELECT q.i, coalesce(array_agg(t.lexeme) FILTER (WHERE t.lexeme IS NOT NULL), '{}') FROM "
            "unnest(%s::text[]) WITH ORDINALITY AS q(text, i) "
            "LEFT JOIN LATERAL unnest(to_tsvector('english', q.text)) AS t ON true GROUP BY q.i ORDER BY q.i",
            [[q for _, q in queries]],
        )
        # The search functions receive the query text; its lexemes come from PostgreSQL's analyser.
        tokens_of = {q: list(tokens) for (_, q), (_, tokens) in zip(queries, cursor.fetchall(), strict=True)}

    rows = []
    started = time.perf_counter()
    okapi = BM25Okapi(docs)
    print(f"rank-bm25 index built in {time.perf_counter() - started:.1f}s")

    def okapi_search(q: str) -> list[str]:
        import numpy as np

        scores = okapi.get_scores(tokens_of[q])
        top = np.argpartition(-scores, 10)[:10] if len(scores) > 10 else np.arange(len(scores))
        return [ids[i] for i in sorted(top, key=lambda i: -scores[i])]

    rows.append(evaluate("rank-bm25 BM25Okapi (same lexemes)", okapi_search, queries))

    try:
        import bm25s
    except ImportError:
        print("bm25s not installed: skipped")
        return rows
    started = time.perf_counter()
    index = bm25s.BM25()
    index.index(docs, show_progress=False)
    vocab = set(index.vocab_dict)
    print(f"bm25s index built in {time.perf_counter() - started:.1f}s")

    def bm25s_search(q: str) -> list[str]:
        tokens = [t for t in tokens_of[q] if t in vocab] or [""]
        results, _scores = index.retrieve([tokens], k=10, show_progress=False, n_threads=1)
        return [ids[i] for i in results[0]]

    rows.append(evaluate("bm25s BM25 (same lexemes)", bm25s_search, queries))
    return rows


if __name__ == "__main__":
    main()
