"""JSON and standalone HTML rendering of a report."""

from __future__ import annotations

import json
import re

import pytest

from analysis.report import render_html, report_json, write_report
from analysis.stats import AnalysisConfig, analyze
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from tests.analysis.helpers import row, table


@pytest.fixture(scope="module")
def report():
    frame = simulate_comparisons(SyntheticStudy(n_annotators=12, queries_per_annotator=6, n_metrics=3, seed=8))
    return analyze(frame, config=AnalysisConfig(n_resamples=100, metric_families={"metric_00": "lexical"}))


def test_json_has_every_statistic_and_provenance(report):
    data = json.loads(report_json(report))
    assert data["format"].startswith("satisfy.analysis-report/")
    assert len(data["win_rates"]["rows"]) == len(report.win_rates.rows)
    assert data["regression"]["coefficients"] and data["agreement"]["metrics"]
    for key in ("n_rows", "table_sha256", "code_version", "seed", "created_at"):
        assert data["provenance"][key] is not None


def test_html_is_standalone_and_states_its_data(report, tmp_path):
    paths = write_report(report, tmp_path)
    html = paths["html"].read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") >= 5  # win rates, forest, alpha, strengths, times
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "<script" not in html
    for text in (report.provenance.table_sha256, report.provenance.code_version, "random seed", "Odds ratios"):
        assert text in html


def test_html_escapes_table_text():
    frame = table(
        [
            row("<b>a</b>", "left", left=("<script>alert(1)</script>", "persona")),
            row("b", "right", left=("<script>alert(1)</script>", "persona")),
        ]
    )
    html = render_html(analyze(frame, config=AnalysisConfig(n_resamples=20)))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_degenerate_report_still_renders():
    frame = table([row("a", "neither"), row("b", "neither")])
    html = render_html(analyze(frame, config=AnalysisConfig(n_resamples=20)))
    assert "Not computed" in html and "no decided matches" in html


def test_win_rate_rows_with_no_decided_match_or_few_matches_say_why():
    """Issue 33: rows read "annotators 0" with n of 1 or 2 and no word on what that means."""
    import re

    from analysis.report import render_html
    from analysis.stats import AnalysisConfig, analyze
    from tests.analysis.helpers import row, table

    rows = [
        row("a1", "left", left=("A", "persona"), right=("B", "generic"), query_id="q1"),
        row("a1", "left", left=("A", "persona"), right=("B", "generic"), query_id="q2"),
        row("a2", "neither", left=("B", "persona"), right=("A", "generic"), query_id="q3"),
    ]
    html = render_html(analyze(table(rows), config=AnalysisConfig(n_resamples=50)))
    assert "Annotators deciding” counts the annotators with a decided match" in html
    notes = re.findall(r"<td[^>]*>(no decided match: [^<]*|few matches[^<]*)</td>", html)
    assert any(n.startswith("no decided match: 1 “neither” of 1, so no rate") for n in notes), notes
    assert any(n.startswith("few matches (n = 2); one annotator decided them all") for n in notes), notes
