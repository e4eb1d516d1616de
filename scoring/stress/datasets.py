"""Stress-test rows from the shared real data sets (SciTLDR, SQuALITY) for tests, benchmarks and examples.

The data lives beside the repository in `shared/data` (or where SHARED_DATA_DIR points); it is
read, never copied into the project.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernel.jsonl import JsonlError, read_jsonl
from kernel.text import fold_whitespace
from scoring.stress.perturb import StressError

__all__ = ["scitldr_rows", "shared_data_dir", "squality_rows"]


def shared_data_dir() -> Path:
    default = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return Path(os.environ.get("SHARED_DATA_DIR", default))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise StressError(f"data file {path} is missing (set SHARED_DATA_DIR to the shared data folder)")
    try:
        return [row for _number, row in read_jsonl(path)]
    except JsonlError as exc:
        raise StressError(str(exc)) from exc


def scitldr_rows(n: int | None = None, *, split: str = "test") -> list[dict[str, Any]]:
    """SciTLDR-A pairs: summary = the author TLDR, source = the abstract (as sentences),
    reference = the first reviewer TLDR when there is one, else the paper title."""
    records = _jsonl(shared_data_dir() / "scitldr" / f"SciTLDR-A_{split}.jsonl")
    rows: list[dict[str, Any]] = []
    for rec in records:
        targets = [t.strip() for t in rec.get("target", []) if t and t.strip()]
        if not targets or not rec.get("source"):
            continue
        rows.append(
            {
                "id": rec["paper_id"],
                "summary": targets[0],
                "source": [fold_whitespace(s) for s in rec["source"]],
                "reference": targets[1] if len(targets) > 1 else rec.get("title", ""),
                "query": rec.get("title", ""),
            }
        )
        if n is not None and len(rows) >= n:
            break
    return rows


def squality_rows(n: int | None = None, *, question: int = 1) -> list[dict[str, Any]]:
    """SQuALITY stories: summary = the first worker's answer to `question` (1 asks for the plot),
    source = the whole story (about 6,000 words), reference = the second worker's answer."""
    records = _jsonl(shared_data_dir() / "squality" / "v1-3_txt_test.jsonl")
    rows: list[dict[str, Any]] = []
    for rec in records:
        for q in rec.get("questions", []):
            if q.get("question_number") != question:
                continue
            answers = [r["response_text"].strip() for r in q.get("responses", []) if r.get("response_text")]
            if not answers:
                continue
            rows.append(
                {
                    "id": f"{rec['metadata']['passage_id']}-q{question}",
                    "summary": answers[0],
                    "source": rec["document"],
                    "reference": answers[1] if len(answers) > 1 else "",
                    "query": q.get("question_text", ""),
                }
            )
        if n is not None and len(rows) >= n:
            break
    return rows
