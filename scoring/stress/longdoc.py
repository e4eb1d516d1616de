"""Long-document analyses of seed 003: the retrieval-window sweep and scores per claim-similarity bin.

Built on `scoring.core.longdoc`: each summary sentence is scored as the max over its top-K
retrieved source snippets (widened by w sentences each side) of M(sentence, snippet), the
summary as the mean over its sentences. Every (sentence, snippet) pair of a metric is scored
in one batch through the metric suite. The snippet stands in for the source for source-based
metrics and for the reference for reference-based ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernel.text import split_sentences
from scoring.core.longdoc import (
    SentenceEmbedder,
    bin_by_similarity,
    claim_similarity,
    default_embedder,
    retrieve_snippets,
)
from scoring.stress.perturb import StressError, StressRow, source_sentences
from scoring.stress.types import LongDocumentResult, MetricBackend

__all__ = ["long_document_analysis"]


class _MemoEmbedder:
    """Embeds each distinct list of texts once, so the window sweep does not re-embed the source."""

    def __init__(self, inner: SentenceEmbedder) -> None:
        self._inner = inner
        self.name = inner.name
        self._memo: dict[tuple[str, ...], Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        key = tuple(texts)
        if key not in self._memo:
            self._memo[key] = self._inner.embed(texts)
        return self._memo[key]


def long_document_analysis(
    rows: Sequence[StressRow],
    metrics: Sequence[str],
    backend: MetricBackend,
    *,
    windows: Sequence[int] = (0, 1, 2),
    top_k: int = 3,
    bins: int = 5,
    bin_window: int | None = None,
    embedder: SentenceEmbedder | None = None,
) -> LongDocumentResult:
    """Sweep the retrieval window and bin sentence scores by claim similarity (seed 003).

    bin_window is the window whose sentence scores are binned (default: 1 when swept, else the first).
    """
    if not windows:
        raise StressError("the window sweep needs at least one window")
    chosen_bin_window = bin_window if bin_window is not None else (1 if 1 in windows else windows[0])
    if chosen_bin_window not in windows:
        raise StressError(f"bin_window {chosen_bin_window} is not among the swept windows {list(windows)}")
    docs = [(row, split_sentences(row.summary), source_sentences(row)) for row in rows]
    docs = [d for d in docs if d[1] and d[2]]
    if not docs:
        raise StressError("long-document analysis needs rows with a summary and a source")
    emb = _MemoEmbedder(embedder or default_embedder())

    # retrieval[(row_id, w)][sentence index] -> snippet texts
    retrieval: dict[tuple[str, int], list[list[str]]] = {}
    similarities: dict[str, list[float]] = {}
    for row, summ, src in docs:
        for w in windows:
            found = retrieve_snippets(summ, src, k=top_k, window=w, embedder=emb)
            retrieval[(row.id, w)] = [[s.text for s in per_sentence] for per_sentence in found]
        similarities[row.id] = claim_similarity(summ, src, embedder=emb)

    all_sims = [s for sims in similarities.values() for s in sims]
    low, high = min(all_sims), max(all_sims)
    if high <= low:
        high = low + 1e-9
    edges = [low + (high - low) * i / bins for i in range(bins + 1)]
    counts = tuple(b.count for b in bin_by_similarity(all_sims, [0.0] * len(all_sims), bins=edges))

    window_means: dict[str, tuple[float, ...]] = {}
    document_scores: dict[str, dict[str, tuple[float, ...]]] = {}
    bin_means: dict[str, tuple[float, ...]] = {}
    skipped: dict[str, str] = {}
    # Metrics of one family that read the snippet from the same field are scored in one call.
    groups: dict[tuple[str, str], list[str]] = {}
    for metric in metrics:
        needs = backend.needs(metric)
        slot = "source" if "source" in needs else "reference" if "reference" in needs else None
        if slot is None:
            skipped[metric] = "reads neither source nor reference, so a snippet cannot change it"
            continue
        groups.setdefault((backend.family(metric), slot), []).append(metric)
    pair_scores: dict[str, dict[tuple[str, str, str], float]] = {}
    for (_, slot), members in groups.items():
        pairs: dict[tuple[str, str, str], int] = {}
        batch: list[dict[str, Any]] = []
        for row, summ, _ in docs:
            extra = {k: v for k, v in row.metric_fields().items() if k != slot}
            for w in windows:
                for sentence, snippets in zip(summ, retrieval[(row.id, w)], strict=True):
                    for snippet in snippets:
                        key = (row.id, sentence, snippet)
                        if key not in pairs:
                            pairs[key] = len(batch)
                            batch.append({"id": str(len(batch)), "summary": sentence, **extra, slot: snippet})
        out = {str(r["id"]): r for r in backend.score(batch, members)}
        for metric in members:
            table = pair_scores[metric] = {}
            for key, index in pairs.items():
                value = out.get(str(index), {}).get(metric)
                table[key] = float(value) if isinstance(value, int | float) else math.nan

    for metric in [m for m in metrics if m in pair_scores]:
        pair_score = pair_scores[metric]
        per_doc: dict[str, tuple[float, ...]] = {}
        binned_scores: list[float] = []
        binned_sims: list[float] = []
        for row, summ, _ in docs:
            per_window: list[float] = []
            for w in windows:
                sentence_scores = []
                for sentence, snippets in zip(summ, retrieval[(row.id, w)], strict=True):
                    vals = [pair_score[(row.id, sentence, s)] for s in snippets]
                    finite = [v for v in vals if math.isfinite(v)]
                    sentence_scores.append(max(finite) if finite else math.nan)
                defined = [s for s in sentence_scores if math.isfinite(s)]
                per_window.append(float(np.mean(defined)) if defined else math.nan)
                if w == chosen_bin_window:
                    for sim, score in zip(similarities[row.id], sentence_scores, strict=True):
                        if math.isfinite(score):
                            binned_sims.append(sim)
                            binned_scores.append(score)
            per_doc[row.id] = tuple(per_window)
        document_scores[metric] = per_doc
        window_means[metric] = tuple(
            float(np.nanmean(col)) if np.isfinite(col).any() else math.nan
            for col in np.asarray(list(per_doc.values()), dtype=float).T
        )
        bin_means[metric] = tuple(
            b.mean_score if b.mean_score is not None else math.nan
            for b in bin_by_similarity(binned_sims, binned_scores, bins=edges)
        )

    return LongDocumentResult(
        windows=tuple(windows),
        top_k=top_k,
        embedder=emb.name,
        n_documents=len(docs),
        n_sentences=len(all_sims),
        window_means=window_means,
        document_scores=document_scores,
        bin_window=chosen_bin_window,
        bin_edges=tuple(edges),
        bin_counts=counts,
        bin_means=bin_means,
        skipped=skipped,
    )
