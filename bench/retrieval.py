"""Retrieval benchmark on SciTLDR: Recall@10 and latency of the corpus search beside reference BM25.

Each of SciTLDR's 3,229 papers (train, dev and test) is imported into the configured database with
the same code as `manage.py import_corpus`; each paper's first TLDR (the author's) is a query whose
one relevant answer is that paper. The corpus search (PostgreSQL full-text search with ts_rank and
with ts_rank_cd, or SQLite FTS5) runs through CorpusRetrieval, as a study would; the reference BM25 implementations (rank-bm25's
BM25Okapi and, if installed, bm25s) rank the very same lexemes that PostgreSQL indexed, so that
only the ranking differs. With --distractors N, N synthetic abstracts (sentences of real ones,
shuffled across papers) are added first, to measure the search at scale.

    DJANGO_SETTINGS_MODULE=... python bench/retrieval.py [--limit 500] [--distractors 1000000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = Path(os.environ.get("SCITLDR_DIR", ROOT.parent / "shared" / "data" / "scitldr"))


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
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
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
    variants = [("ts_rank", "default"), ("ts_rank_cd", "")] if connection.vendor == "postgresql" else [("", "")]
    for rank_function, note in variants:
        retrieval = CorpusRetrieval(rank_function=rank_function) if rank_function else CorpusRetrieval()
        label = f"PostgreSQL FTS, {rank_function}" if rank_function else f"{connection.vendor} FTS5 bm25"
        label += f", {note}" if note else ""
        for query in queries[:20]:  # warm the cache and the connection
            retrieval.search(query[1], k=10)
        rows.append(evaluate(f"CorpusRetrieval ({label})", partial(ids_of, retrieval), queries))

    if not args.skip_reference and connection.vendor == "postgresql":
        rows += reference_rows(queries)

    print(f"{'system':<52} {'R@10':>6} {'MRR@10':>7} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}")
    for row in rows:
        print(
            f"{row.system:<52} {row.recall_at_10:>6.3f} {row.mrr_at_10:>7.3f} {row.p50_ms:>8.2f} {row.p95_ms:>8.2f} "
            f"{row.queries:>8}"
        )
    print(f"\nabstracts in the corpus: {n_docs}")


def reference_rows(queries: Sequence[tuple[str, str]]) -> list[Row]:
    """BM25 from well-kept libraries over exactly the lexemes PostgreSQL indexed (tf from positions)."""
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
