"""Everything one analysis writes, the same from the command line, ``manage.py analyze`` and a research job
started on the web: ``report.json``, ``report.html``, one CSV per statistic in ``tables/`` and the comparison
table itself with its manifest.

The one path from a report to its files: ``report_content`` computes everything the report shows, then each
renderer (``plots``, ``html``, ``json_report``, the CSV tables here) renders that content and nothing else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.exports import FORMATS, ExportManifest, export_comparisons, neutralize_frame
from analysis.report.content import ReportContent, report_content
from analysis.report.html import render_page
from analysis.report.json_report import render_json
from analysis.report.plots import draw_figures
from analysis.stats.analyze import AnalysisReport
from analysis.stats.systems import SystemTables, system_tables

TITLE = "Human evaluation analysis"


@dataclass(frozen=True)
class AnalysisOutputs:
    json: Path
    html: Path
    tables: tuple[Path, ...]
    export: ExportManifest | None


def render_html(report: AnalysisReport, *, title: str = TITLE, systems: SystemTables | None = None) -> str:
    """The whole report as one HTML document (``systems`` adds the per-system tables)."""
    content = report_content(report, title=title, systems=systems)
    return render_page(content, draw_figures(content.figures))


def report_dict(report: AnalysisReport, *, systems: SystemTables | None = None) -> dict[str, Any]:
    """The report's JSON document as a dict."""
    return dict(report_content(report, systems=systems).data)


def report_json(report: AnalysisReport, *, indent: int | None = 2, systems: SystemTables | None = None) -> str:
    return render_json(report_content(report, systems=systems), indent=indent)


def _write_files(content: ReportContent, out_dir: Path, *, tables: bool) -> dict[str, Path]:
    """Render ``content`` into ``out_dir``: the JSON, the HTML page with its figures, and (``tables``) one CSV
    per statistic, for spreadsheets and papers, keyed ``tables/<name>``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "html": out_dir / "report.html"}
    svgs = draw_figures(content.figures)
    paths["json"].write_text(render_json(content), encoding="utf-8")
    paths["html"].write_text(render_page(content, svgs), encoding="utf-8")
    if tables:
        (out_dir / "tables").mkdir(parents=True, exist_ok=True)
        for name, frame in content.tables.items():
            path = paths[f"tables/{name}"] = out_dir / "tables" / f"{name}.csv"
            neutralize_frame(frame).to_csv(path, index=False, lineterminator="\n")
    return paths


def write_report(
    report: AnalysisReport, out_dir: Path, *, title: str = TITLE, systems: SystemTables | None = None
) -> dict[str, Path]:
    """Write ``report.json`` and ``report.html`` into ``out_dir`` (created if needed); ``systems`` adds the
    per-system metric, abstractiveness and risk-band tables (``analysis.stats.systems.system_tables``)."""
    return _write_files(report_content(report, title=title, systems=systems), out_dir, tables=False)


def write_analysis(
    report: AnalysisReport,
    table: pd.DataFrame,
    out_dir: Path,
    *,
    title: str = TITLE,
    study: str | None = None,
    filters: Mapping[str, Any] | None = None,
    export_formats: Sequence[str] = FORMATS,
) -> AnalysisOutputs:
    """Write the report, its tables and (unless ``export_formats`` is empty) the comparison table. A
    ``filters["source"]`` (the file the table was read from) is recorded in the report's provenance too, so a
    report of a table that is not re-exported still names its input."""
    if filters and filters.get("source") and not report.provenance.source:
        report = replace(report, provenance=replace(report.provenance, source=str(filters["source"])))
    content = report_content(report, title=title, systems=system_tables(table))
    paths = _write_files(content, out_dir, tables=True)
    manifest = None
    if export_formats:
        manifest = export_comparisons(
            table,
            out_dir,
            formats=export_formats,
            study=study,
            filters=filters or {},
            seed=report.provenance.seed,
            exclusion=report.exclusion.to_dict() if report.exclusion else None,
            table_sha256=report.provenance.table_sha256,
        )
    tables = tuple(path for key, path in paths.items() if key.startswith("tables/"))
    return AnalysisOutputs(json=paths["json"], html=paths["html"], tables=tables, export=manifest)
