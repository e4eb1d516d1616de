"""Fixtures for the metric-core tests: the shared real data and one embedding model per session."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


def _need(path: Path) -> Path:
    require(path.exists(), f"shared data not found at {path} (set SHARED_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def scitldr_rows() -> list[dict[str, Any]]:
    """The first 40 SciTLDR-A test papers: abstract sentences as source, TLDRs as summary/reference."""
    rows = []
    with _need(DATA_DIR / "scitldr" / "SciTLDR-A_test.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            paper = json.loads(line)
            rows.append(
                {
                    "id": paper["paper_id"],
                    "source": paper["source"],
                    "summary": paper["target"][0],
                    "reference": paper["target"][-1],
                }
            )
            if len(rows) == 40:
                break
    return rows


@pytest.fixture(scope="session")
def rose_examples() -> list[dict[str, Any]]:
    """RoSE CNN/DailyMail articles with reference and 12 system summaries."""
    data: list[dict[str, Any]] = json.loads(
        _need(DATA_DIR / "rose" / "protocol-comparison.json").read_text(encoding="utf-8")
    )
    return data


@pytest.fixture(scope="session")
def squality_story() -> dict[str, Any]:
    """One SQuALITY story (about 6,000 words) with its questions and human answers."""
    with _need(DATA_DIR / "squality" / "v1-3_txt_test.jsonl").open(encoding="utf-8") as handle:
        story: dict[str, Any] = json.loads(handle.readline())
    return story


@pytest.fixture(scope="session")
def embedding_model() -> Any:
    """The default sentence encoder, loaded once; skips when the embeddings extra is missing."""
    from scoring.core.embeddings import EmbeddingsUnavailable, embeddings_unavailable_reason, load_model

    reason = embeddings_unavailable_reason()
    require(reason is None, f"embeddings extra not available: {reason}")
    try:
        return load_model()
    except EmbeddingsUnavailable as exc:
        require(False, str(exc))
