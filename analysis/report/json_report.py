"""The JSON form of a report: ``AnalysisReport.to_dict()`` with a format marker, strict JSON (no NaN)."""

from __future__ import annotations

import json as _json  # noqa: I001
from pathlib import Path
from typing import Any

from analysis.report.html import render_html
from analysis.stats.analyze import AnalysisReport
from analysis.stats.systems import SystemTables

FORMAT = "satisfy.analysis-report/1"


def report_dict(report: AnalysisReport, *, systems: SystemTables | None = None) -> dict[str, Any]:
    out = {"format": FORMAT, **report.to_dict()}
    if systems is not None:
        out["systems"] = systems.to_dict()
    return out


def report_json(report: AnalysisReport, *, indent: int | None = 2, systems: SystemTables | None = None) -> str:
    return _json.dumps(report_dict(report, systems=systems), indent=indent, allow_nan=False, sort_keys=False)


def write_report(
    report: AnalysisReport,
    out_dir: Path,
    *,
    title: str = "Human evaluation analysis",
    systems: SystemTables | None = None,
) -> dict[str, Path]:
    """Write ``report.json`` and ``report.html`` into ``out_dir`` (created if needed); ``systems`` adds the
    per-system metric, abstractiveness and risk-band tables (``analysis.stats.systems.system_tables``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "html": out_dir / "report.html"}
    paths["json"].write_text(report_json(report, systems=systems), encoding="utf-8")
    paths["html"].write_text(render_html(report, title=title, systems=systems), encoding="utf-8")
    return paths
