"""Everything one analysis writes, the same from the command line, ``manage.py analyze`` and a research job
started on the web: ``report.json``, ``report.html``, one CSV per statistic in ``tables/`` and the comparison
table itself with its manifest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.exports import FORMATS, ExportManifest, export_comparisons, neutralize_frame
from analysis.report.json_report import write_report
from analysis.stats.analyze import AnalysisReport
from analysis.stats.systems import SystemTables, system_tables


@dataclass(frozen=True)
class AnalysisOutputs:
    json: Path
    html: Path
    tables: tuple[Path, ...]
    export: ExportManifest | None


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    neutralize_frame(frame).to_csv(path, index=False, lineterminator="\n")


def report_tables(report: AnalysisReport, systems: SystemTables | None = None) -> dict[str, pd.DataFrame]:
    """One frame per statistic, named as its CSV in ``tables/``."""
    frames: dict[str, pd.DataFrame] = {
        "stages": pd.DataFrame([s.to_dict() for s in report.stages]),
        "win_rates": report.win_rates.to_frame(),
        "neither_rates": report.win_rates.neither_frame(),
        "annotators": pd.DataFrame([a.to_dict() for a in report.annotators]),
        "page_times": pd.DataFrame([p.to_dict() for p in report.page_times]),
    }
    if report.regression is not None:
        frames["regression"] = report.regression.to_frame()
        if report.regression_family is not None and "p_value" in frames["regression"].columns:
            # The adjusted p-value beside the raw one, in the coefficients' order (regression_family).
            at = list(frames["regression"].columns).index("p_value") + 1
            frames["regression"].insert(at, "p_adjusted", list(report.regression_family.p_adjusted))
    if report.agreement is not None:
        frames["agreement"] = report.agreement.to_frame()
        frames["agreement_families"] = pd.DataFrame([f.to_dict() for f in report.agreement.families])
        if report.agreement.excluded:
            frames["agreement_excluded"] = pd.DataFrame([e.to_dict() for e in report.agreement.excluded])
        if report.agreement.position_consistency:
            frames["judge_position_consistency"] = pd.DataFrame(
                [c.to_dict() for c in report.agreement.position_consistency]
            )
    if report.threshold_sweeps:
        frames["threshold_sweeps"] = pd.DataFrame([s.to_dict() for s in report.threshold_sweeps])
    if report.bradley_terry is not None:
        frames["bradley_terry"] = report.bradley_terry.to_frame()
    if systems is not None:
        frames["system_metrics"] = systems.metric_frame()
        if systems.risk:
            frames["system_risk_bands"] = systems.risk_frame()
    return frames


def write_tables(report: AnalysisReport, out_dir: Path, *, systems: SystemTables | None = None) -> list[Path]:
    """One CSV per statistic, for spreadsheets and papers."""
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in report_tables(report, systems).items():
        path = tables_dir / f"{name}.csv"
        _write_csv(frame, path)
        paths.append(path)
    return paths


def write_analysis(
    report: AnalysisReport,
    table: pd.DataFrame,
    out_dir: Path,
    *,
    title: str = "Human evaluation analysis",
    study: str | None = None,
    filters: Mapping[str, Any] | None = None,
    export_formats: Sequence[str] = FORMATS,
) -> AnalysisOutputs:
    """Write the report, its tables and (unless ``export_formats`` is empty) the comparison table. A
    ``filters["source"]`` (the file the table was read from) is recorded in the report's provenance too, so a
    report of a table that is not re-exported still names its input."""
    if filters and filters.get("source") and not report.provenance.source:
        report = replace(report, provenance=replace(report.provenance, source=str(filters["source"])))
    out_dir.mkdir(parents=True, exist_ok=True)
    systems = system_tables(table)
    paths = write_report(report, out_dir, title=title, systems=systems)
    tables = write_tables(report, out_dir, systems=systems)
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
    return AnalysisOutputs(json=paths["json"], html=paths["html"], tables=tuple(tables), export=manifest)
