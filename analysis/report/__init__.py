"""Render an ``AnalysisReport`` as JSON (every statistic) and as one standalone HTML file with SVG plots:
``content`` computes what the report shows, the renderers render it (``bundle`` is the one path)."""

from analysis.report.bundle import render_html, report_dict, report_json, write_analysis, write_report

__all__ = ["render_html", "report_dict", "report_json", "write_analysis", "write_report"]
