"""The texts behind a study's comparisons, for an export that releases them (off by default).

The comparison table itself holds ids and outcomes only: queries, personas and summaries are what
participants wrote or were shown, so they leave the platform only when a researcher asks for them for a
released dataset (``--include-texts``, the research job's ``include_texts``). Sources are named by title.
"""

from __future__ import annotations

import json
from typing import Any

from analysis.exports import TEXT_COLUMNS
from annotation.models import Candidate, Query
from studies.models import Study

__all__ = ["TEXT_COLUMNS", "comparison_texts", "with_texts"]


def comparison_texts(*, study: Study) -> tuple[dict[Any, dict[str, str]], dict[Any, str]]:
    """(per query id: query text, persona JSON, source titles JSON; per candidate id: its text)."""
    queries = Query.objects.filter(participation__study=study).select_related("persona").prefetch_related("documents")
    per_query = {
        q.pk: {
            "query_text": q.text,
            "persona": json.dumps(q.persona.as_dict(), ensure_ascii=False, sort_keys=True),
            "source_titles": json.dumps([d.title for d in q.documents.all()], ensure_ascii=False),
        }
        for q in queries
    }
    per_candidate = dict(Candidate.objects.filter(query__participation__study=study).values_list("pk", "text"))
    return per_query, per_candidate


def with_texts(frame: Any, *, study: Study) -> Any:
    """The comparison frame of ``study`` with ``TEXT_COLUMNS`` filled from the database."""
    out = frame.copy()
    per_query, per_candidate = comparison_texts(study=study)
    empty = {"query_text": None, "persona": None, "source_titles": None}
    rows = [per_query.get(q, empty) for q in out["query_id"]] if len(out) else []
    for col in ("query_text", "persona"):
        out[col] = [r[col] for r in rows]
    out["left_summary"] = [per_candidate.get(c) for c in out["left_candidate"]] if len(out) else []
    out["right_summary"] = [per_candidate.get(c) for c in out["right_candidate"]] if len(out) else []
    out["source_titles"] = [r["source_titles"] for r in rows]
    return out
