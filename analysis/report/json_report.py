"""The JSON form of a report: the content's document (``AnalysisReport.to_dict()`` with a format marker),
strict JSON (no NaN)."""

from __future__ import annotations

import json as _json  # noqa: I001

from analysis.report.content import ReportContent


def render_json(content: ReportContent, *, indent: int | None = 2) -> str:
    return _json.dumps(content.data, indent=indent, allow_nan=False, sort_keys=False)
