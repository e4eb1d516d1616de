"""Small comparison tables for the analysis tests: hand-made, simulated, and from SQuALITY's real rankings."""

from __future__ import annotations

import json
import os
from itertools import combinations
from pathlib import Path

import pandas as pd

from analysis.stats.table import with_derived_columns

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
SQUALITY_RESPONSES = DATA_DIR / "squality" / "all-responses.jsonl"


def row(
    annotator: str,
    choice: str,
    *,
    stage: str = "round1",
    bracket_pair: str = "AB",
    left: tuple[str, str] = ("strong", "persona"),
    right: tuple[str, str] = ("weak", "generic"),
    query_id: str = "q1",
    seconds: float = 100.0,
    **metrics: float,
) -> dict[str, object]:
    out: dict[str, object] = {
        "study": "unit",
        "annotator": annotator,
        "query_id": query_id,
        "query_index": 1,
        "bracket_id": f"b-{query_id}",
        "match": {"AB": "round1_ab", "CD": "round1_cd", "final": "final"}[bracket_pair],
        "round": 2 if stage == "final" else 1,
        "stage": stage,
        "bracket_pair": bracket_pair,
        "left_candidate": f"{query_id}-L",
        "right_candidate": f"{query_id}-R",
        "left_position": "A",
        "right_position": "B",
        "left_system": f"{left[0]}/{left[1]}",
        "right_system": f"{right[0]}/{right[1]}",
        "left_model": left[0],
        "right_model": right[0],
        "left_condition": left[1],
        "right_condition": right[1],
        "choice": choice,
        "seconds_on_page": seconds,
    }
    out.update(metrics)
    return out


def table(rows: list[dict[str, object]]) -> pd.DataFrame:
    return with_derived_columns(pd.DataFrame(rows))


def squality_table() -> pd.DataFrame:
    """Pairwise comparisons implied by each SQuALITY reviewer's overall ranks of three systems.

    One row per (passage, question, reviewer, system pair); equal ranks are "neither". Every row is
    a first-round-style match; ``model`` is the system and the condition is "generic".
    """
    rows = []
    for line in SQUALITY_RESPONSES.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for q_id, systems in record["questions"].items():
            ranks: dict[str, dict[str, int]] = {}
            for system, payload in systems.items():
                for review in payload.get("reviews", []):
                    ranks.setdefault(str(review["worker_id"]), {})[system] = int(review["overall-rank"])
            for worker, by_system in ranks.items():
                for a, b in combinations(sorted(by_system), 2):
                    ra, rb = by_system[a], by_system[b]
                    choice = "neither" if ra == rb else ("left" if ra < rb else "right")
                    rows.append(
                        row(
                            f"worker-{worker}",
                            choice,
                            left=(a, "generic"),
                            right=(b, "generic"),
                            query_id=f"{record['passage-id']}-{q_id}",
                        )
                    )
    return table(rows)
