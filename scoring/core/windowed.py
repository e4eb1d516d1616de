"""Any metric suite scored the seed-003 way: by retrieval windows over a long source, behind the same interface.

`WindowedMetrics` wraps a suite (``names``, ``needs``, ``family``, ``score``; `scoring.stress.runner.CoreMetrics`
or any `MetricBackend`) so that each row's summary is scored as in `scoring.core.longdoc`: every summary
sentence against the snippets around its top-K source sentences (widened by ``window`` sentences), max over
snippets, mean over sentences. The stress runner then measures perturbations on window scores with no change
to it. `MemoMetrics` remembers every (metric, row) score so that the window sweep and the perturbation runs
share the pairs they have in common.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from kernel.text import split_sentences
from scoring.core.longdoc import SentenceEmbedder, default_embedder, retrieve_snippets

__all__ = ["MemoEmbedder", "MemoMetrics", "MetricSuite", "WindowedMetrics"]


class MetricSuite(Protocol):
    """The metric-suite interface the stress runner uses (`scoring.stress.runner.MetricBackend`)."""

    def names(self) -> list[str]: ...

    def offline(self) -> list[str]: ...

    def needs(self, name: str) -> frozenset[str]: ...

    def family(self, name: str) -> str: ...

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]: ...


class MemoEmbedder:
    """Embeds each distinct list of texts once (a source is embedded once for every window and variant)."""

    def __init__(self, inner: SentenceEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._memo: dict[tuple[str, ...], Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        key = tuple(texts)
        if key not in self._memo:
            self._memo[key] = self.inner.embed(texts)
        return self._memo[key]


class _Delegate:
    def __init__(self, inner: MetricSuite) -> None:
        self.inner = inner

    def names(self) -> list[str]:
        return self.inner.names()

    def offline(self) -> list[str]:
        return self.inner.offline()

    def needs(self, name: str) -> frozenset[str]:
        return self.inner.needs(name)

    def family(self, name: str) -> str:
        return self.inner.family(name)


def _key(row: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v if isinstance(v, str) else " ".join(v)) for k, v in row.items() if k != "id"))


class MemoMetrics(_Delegate):
    """A suite that scores each distinct (metric, row content) once per process; rows it has seen cost nothing.

    ``scored`` counts the (metric, row) scores actually asked of the inner suite, ``asked`` those asked of
    this one; ``failures[metric][reason]`` counts the distinct rows that metric could not score, by reason.
    """

    def __init__(self, inner: MetricSuite) -> None:
        super().__init__(inner)
        self._memo: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float | None, str | None]] = {}
        self.asked = 0
        self.scored = 0
        self.failures: dict[str, dict[str, int]] = {}

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
        keys = [_key(r) for r in rows]
        self.asked += len(rows) * len(metrics)
        todo: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        for row, key in zip(rows, keys, strict=True):
            if any((m, key) not in self._memo for m in metrics) and key not in todo:
                todo[key] = {**row, "id": str(len(todo))}
        if todo:
            self.scored += len(todo) * len(metrics)
            results = {str(r["id"]): r for r in self.inner.score(list(todo.values()), list(metrics))}
            for key, row in todo.items():
                got = results.get(str(row["id"]), {})
                errors = got.get("errors") or {}
                for m in metrics:
                    value = got.get(m)
                    if isinstance(value, int | float) and math.isfinite(value):
                        self._memo[(m, key)] = (float(value), None)
                        continue
                    reason = str(errors.get(m) or "no score returned")
                    self._memo[(m, key)] = (None, reason)
                    counts = self.failures.setdefault(m, {})
                    counts[reason] = counts.get(reason, 0) + 1
        out: list[dict[str, Any]] = []
        for row, key in zip(rows, keys, strict=True):
            res: dict[str, Any] = {"id": row.get("id"), "errors": {}}
            for m in metrics:
                value, error = self._memo[(m, key)]
                res[m] = value
                if error is not None:
                    res["errors"][m] = error
            out.append(res)
        return out


class WindowedMetrics(_Delegate):
    """Scores each row's summary by retrieval windows over its source (or reference), as seed 003 does.

    A metric reading the source gets snippets of the source; one reading only the reference gets snippets of
    the reference; one reading neither is scored on the row as it is.
    """

    def __init__(
        self, inner: MetricSuite, *, window: int, top_k: int = 3, embedder: SentenceEmbedder | None = None
    ) -> None:
        super().__init__(inner)
        if window < 0 or top_k < 1:
            raise ValueError("window must be >= 0 and top_k >= 1")
        self.window = window
        self.top_k = top_k
        chosen = embedder or default_embedder()
        self.embedder = chosen if isinstance(chosen, MemoEmbedder) else MemoEmbedder(chosen)

    def _slot(self, metric: str) -> str | None:
        needs = self.inner.needs(metric)
        return "source" if "source" in needs else "reference" if "reference" in needs else None

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"id": r.get("id"), "errors": {}, **dict.fromkeys(metrics)} for r in rows]
        by_slot: dict[str | None, list[str]] = {}
        for metric in metrics:
            by_slot.setdefault(self._slot(metric), []).append(metric)
        for slot, members in by_slot.items():
            if slot is None:
                for res, got in zip(out, self.inner.score(rows, members), strict=True):
                    res.update({m: got.get(m) for m in members})
                    res["errors"].update((got.get("errors") or {}).items())
                continue
            self._score_slot(rows, members, slot, out)
        return out

    def _score_slot(self, rows: list[dict[str, Any]], members: list[str], slot: str, out: list[dict[str, Any]]) -> None:
        pairs: list[dict[str, Any]] = []
        layout: list[list[list[int]] | None] = []  # layout[row][sentence] = indices into pairs
        for index, row in enumerate(rows):
            summary = split_sentences(str(row.get("summary") or ""))
            raw = row.get(slot)
            evidence = [s for s in raw if str(s).strip()] if isinstance(raw, list) else split_sentences(str(raw or ""))
            if not summary or not evidence:
                what = "summary" if not summary else slot
                out[index]["errors"].update(dict.fromkeys(members, f"the {what} has no sentences"))
                layout.append(None)
                continue
            extra = {k: v for k, v in row.items() if k not in {"id", "summary", slot}}
            found = retrieve_snippets(summary, evidence, k=self.top_k, window=self.window, embedder=self.embedder)
            grid: list[list[int]] = []
            for sentence, snippets in zip(summary, found, strict=True):
                cells = []
                for snippet in snippets:
                    cells.append(len(pairs))
                    pairs.append({**extra, "id": str(len(pairs)), "summary": sentence, slot: snippet.text})
                grid.append(cells)
            layout.append(grid)
        if not pairs:
            return
        results = {str(r["id"]): r for r in self.inner.score(pairs, members)}
        for index, laid in enumerate(layout):
            if laid is None:
                continue
            for metric in members:
                sentence_scores: list[float] = []
                first_error: str | None = None
                for cells in laid:
                    values = []
                    for cell in cells:
                        got = results.get(str(cell), {})
                        value = got.get(metric)
                        if isinstance(value, int | float) and math.isfinite(value):
                            values.append(float(value))
                        elif first_error is None:
                            first_error = str((got.get("errors") or {}).get(metric) or "no score returned")
                    if values:
                        sentence_scores.append(max(values))
                if sentence_scores:
                    out[index][metric] = float(np.mean(sentence_scores))
                else:
                    out[index]["errors"][metric] = first_error or "no score returned"
