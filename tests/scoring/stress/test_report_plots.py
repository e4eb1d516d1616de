"""The stress report's level plots stay readable at any scale: one metric moving 200-fold beside others
moving a few per cent flattens none of them (issue 12). Checked on matplotlib's axis limits."""

from __future__ import annotations

from scoring.stress.report import level_figure, render_html
from scoring.stress.stats import Direction, StressResult, Verdict
from scoring.stress.types import StressReport

LEVELS = ("0", "1", "2", "3", "4", "5")
MEANS = {
    # A metric that explodes with distractors: 200 times its baseline at the last level.
    "exploding": (0.01, 0.3, 0.7, 1.1, 1.6, 2.0),
    "rouge1": (0.42, 0.41, 0.40, 0.395, 0.39, 0.385),
    "bertscore_f1": (0.871, 0.869, 0.866, 0.864, 0.862, 0.860),
    "constant": (0.5,) * 6,
}


def _result(metric: str, means: tuple[float, ...]) -> StressResult:
    return StressResult(
        metric=metric, test="distractor", direction=Direction.DECREASE, levels=LEVELS, level_means=means,
        n_rows=10, n_scored=(10,) * 6, rho=-1.0, monotonicity=1.0, cohens_d=1.0, mean_abs_change=0.1,
        rho_verdict=Verdict.PASS, m_verdict=Verdict.PASS, verdict=Verdict.PASS,
    )  # fmt: skip


def _report() -> StressReport:
    return StressReport(
        seed=0, tests=("distractor",), metrics=tuple(MEANS), n_rows=10,
        results=tuple(_result(m, v) for m, v in MEANS.items()), rewrites=(), timings=(), scores=(),
        provenance={"seed": 0},
    )  # fmt: skip


def test_each_metric_spans_a_visible_range_of_its_own_axis():
    fig = level_figure(_report(), "distractor")
    axes = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert set(axes) == set(MEANS)
    for metric, means in MEANS.items():
        low, high = axes[metric].get_ylim()
        spread = max(means) - min(means)
        if spread == 0:
            assert low < means[0] < high and (high - low) <= 0.1 * abs(means[0]) + 2e-3
            continue
        # The series covers most of its axis (the old shared axis gave rouge1 about 0.02% of it).
        assert spread / (high - low) >= 0.8, (metric, spread, (low, high))
        assert low <= min(means) and max(means) <= high


def test_the_page_draws_one_panel_per_metric():
    page = render_html(_report())
    assert page.count("<svg") == 1 and all(m in page for m in MEANS)


def test_a_metric_name_that_looks_like_mathtext_is_drawn_as_written():
    """A metric named `m$\\frac$` failed the page with a mathtext parse error; it is a name, drawn as written."""
    report = _report()
    odd = _result("m$\\frac$", MEANS["rouge1"])
    report = StressReport(
        seed=0, tests=("distractor",), metrics=(*MEANS, odd.metric), n_rows=10, results=(*report.results, odd),
        rewrites=(), timings=(), scores=(), provenance={"seed": 0},
    )  # fmt: skip
    assert "m$\\frac$" in render_html(report)


def test_the_page_defines_rho_and_m_and_the_docs_describe_the_plots_it_draws():
    """Issue 33: the report did not define rho and M, and docs/stress-tests.md described normalised plots on a
    shared axis that the report does not draw."""
    import re
    from pathlib import Path

    page = render_html(_report())
    definitions = re.search(r"<p id=definitions>(.*?)</p>", page)
    assert definitions is not None
    assert "Spearman's rank correlation between the perturbation level" in definitions.group(1)
    assert "share of steps from one level to the next" in definitions.group(1)
    assert "each on its own scale" in page
    docs = " ".join((Path(__file__).resolve().parents[3] / "docs" / "stress-tests.md").read_text().split())
    assert "share an axis" not in docs and "one panel per metric" in docs
