"""A small, realistic export of the paper's platform (users.json + results/annotator-*.json) as a zip."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

MODELS = ("DeepSeek-V3.1", "Llama-3.3-70B-Instruct")
QUERIES = (
    "What are current approaches to predicting sepsis onset in ICU patients?",
    "How do perovskite solar cells degrade under humidity?",
    "Which methods reduce hallucination in retrieval-augmented generation?",
    "What evidence links sleep duration to adolescent academic performance?",
    "How is graph neural network explainability evaluated?",
    "What are nurse-led interventions for reducing patient falls?",
    "How do solid-state electrolytes compare for lithium metal batteries?",
    "What are benchmarks for long-document summarisation?",
)
PERSONAS = (
    {
        "role": "nurse",
        "expertise": "practising professional",
        "research_area": "critical care",
        "use_case": "update my practice",
    },
    {
        "role": "researcher",
        "expertise": "expert",
        "research_area": "materials science",
        "use_case": "literature review",
    },
    {
        "role": "undergraduate student",
        "expertise": "novice",
        "research_area": "computer science",
        "use_case": "course project",
    },
)


def annotation(rng: np.random.Generator, index: int, *, neither_rate: float = 0.1) -> dict[str, object]:
    variants = [(m, p) for m in MODELS for p in (True, False)]
    order = rng.permutation(4)
    metadata = {
        label: {"model": variants[i][0], "has_pre_question": variants[i][1]}
        for label, i in zip("ABCD", order, strict=True)
    }
    summaries = {
        label: f"Summary {label} for query {index}: recent work [1] and a follow-up study [3] report ..."
        for label in "ABCD"
    }

    def pick(a: str, b: str) -> str:
        if rng.random() < neither_rate:
            return "N"
        # The stronger model (listed first) wins more often, more so when personalised.
        score = {
            lab: (1.0 if metadata[lab]["model"] == MODELS[0] else 0.0)
            + (0.3 if metadata[lab]["has_pre_question"] else 0.0)
            for lab in (a, b)
        }
        p_a = 1.0 / (1.0 + np.exp(-(score[a] - score[b])))
        return a if rng.random() < p_a else b

    ab, cd = pick("A", "B"), pick("C", "D")
    final = pick(ab, cd) if "N" not in (ab, cd) else "N"
    return {
        "query_index": index,
        "query": QUERIES[index % len(QUERIES)],
        "summaries": summaries,
        "metadata": metadata,
        "paper_ids": [f"W{2_700_000_000 + int(x)}" for x in rng.integers(0, 99_999_999, 10)],
        "round1_ab": ab,
        "round1_cd": cd,
        "final": final,
        "feedback": "" if rng.random() < 0.7 else "The second summary cited the wrong paper.",
    }


def make_legacy_zip(
    path: Path | None = None,
    *,
    n_annotators: int = 5,
    queries: int = 8,
    seed: int = 0,
    extra: dict[str, bytes] | None = None,
) -> bytes:
    """Build the export; returns the zip bytes (and writes them to ``path`` if given)."""
    rng = np.random.default_rng(seed)
    users = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for a in range(n_annotators):
            uid = f"{1000 + a}"
            users.append(
                {"id": uid, "email": f"annotator{a}@example.org", "pre_task_answers": PERSONAS[a % len(PERSONAS)]}
            )
            n = int(rng.integers(max(1, queries - 3), queries + 1))
            results = [annotation(rng, i) for i in range(n)]
            zf.writestr(f"export/results/annotator-{uid}.json", json.dumps(results, indent=1))
        zf.writestr("export/users.json", json.dumps(users, indent=1))
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    data = buf.getvalue()
    if path is not None:
        path.write_bytes(data)
    return data
