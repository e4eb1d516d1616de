"""The JSON form of a report: ``AnalysisReport.to_dict()`` with a format marker, strict JSON (no NaN)."""

from __future__ import annotations

import json as _json  # noqa: I001
from pathlib import Path
from typing import Any

from analysis.report.html import render_html
from analysis.stats.analyze import AnalysisReport

FORMAT = "satisfy.analysis-report/1"


def report_dict(report: AnalysisReport) -> dict[str, Any]:
    return {"format": FORMAT, **report.to_dict()}


def report_json(report: AnalysisReport, *, indent: int | None = 2) -> str:
    return _json.dumps(report_dict(report), indent=indent, allow_nan=False, sort_keys=False)


def write_report(report: AnalysisReport, out_dir: Path, *, title: str = "Human evaluation analysis") -> dict[str, Path]:
    """Write ``report.json`` and ``report.html`` into ``out_dir`` (created if needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "html": out_dir / "report.html"}
    paths["json"].write_text(report_json(report), encoding="utf-8")
    paths["html"].write_text(render_html(report, title=title), encoding="utf-8")
    return paths
