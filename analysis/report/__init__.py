"""Render an ``AnalysisReport`` as JSON (every statistic) and as one standalone HTML file with SVG plots."""

from analysis.report.html import render_html
from analysis.report.json_report import report_json, write_report

__all__ = ["render_html", "report_json", "write_report"]
