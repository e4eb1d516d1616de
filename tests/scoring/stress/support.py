"""A tiny in-process metric suite for stress tests that must not depend on the real one."""

from __future__ import annotations

from typing import Any

from kernel.text import tokenize


def _overlap_f1(summary: str, reference: str) -> float:
    s, r = tokenize(summary), tokenize(reference)
    if not s or not r:
        return 0.0
    common = len(set(s) & set(r))
    p, rc = common / len(set(s)), common / len(set(r))
    return 0.0 if common == 0 else 2 * p * rc / (p + rc)


class TinyMetrics:
    """overlap_f1 (unigram-set F1 with the reference), length (summary tokens), constant (always 1),
    flaky (fails on empty summaries)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[str, ...]]] = []

    def names(self) -> list[str]:
        return ["overlap_f1", "length", "constant", "flaky"]

    def offline(self) -> list[str]:
        return self.names()

    def needs(self, name: str) -> frozenset[str]:
        return frozenset({"reference"}) if name == "overlap_f1" else frozenset()

    def family(self, name: str) -> str:
        return "tiny" if name in ("overlap_f1", "length") else name

    def score(self, rows: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
        self.calls.append((len(rows), tuple(metrics)))
        out = []
        for row in rows:
            res: dict[str, Any] = {"id": row["id"], "errors": {}}
            for m in metrics:
                if m == "overlap_f1":
                    res[m] = _overlap_f1(row["summary"], row.get("reference", ""))
                elif m == "length":
                    res[m] = float(len(tokenize(row["summary"])))
                elif m == "constant":
                    res[m] = 1.0
                elif not row["summary"].strip():
                    res[m] = None
                    res["errors"][m] = "empty summary"
                else:
                    res[m] = 0.5
            out.append(res)
        return out


ROWS = [
    {
        "id": f"doc{i}",
        "summary": f"Topic{i} models learn topic{i} features. They beat baselines on topic{i} data.",
        "source": [
            f"We study topic{i} models in depth.",
            f"Our topic{i} models learn useful features from raw data.",
            f"Experiments on topic{i} benchmarks show gains over strong baselines.",
            f"The weather section {i} mentions rainfall totals in distant valleys.",
        ],
        "reference": f"Topic{i} models learn features and beat baselines on topic{i} data.",
    }
    for i in range(8)
]
