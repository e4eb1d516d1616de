"""Adjusted p-values beside the raw ones (docs/analysis.md, "Multiple testing"): Holm by default within each
family, Benjamini-Hochberg or none as options; checked by hand and against statsmodels' `multipletests`."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from analysis.cli import main
from analysis.stats import AnalysisConfig, analyze
from analysis.stats.multiplicity import adjust_p_values, p_value_family
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons

REFERENCE = {"holm": "holm", "bh": "fdr_bh"}


def test_holm_and_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then running maximum.
    assert adjust_p_values(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04, then running minimum from the largest.
    assert adjust_p_values(p, "bh").tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_p_values(p, "none").tolist() == p
    # An undefined test is no test: it stays missing and does not count in m.
    with_nan = adjust_p_values([0.01, float("nan"), 0.04], "holm")
    assert with_nan[0] == pytest.approx(0.02) and np.isnan(with_nan[1]) and with_nan[2] == pytest.approx(0.04)
    assert adjust_p_values([0.9, 0.8], "holm").tolist() == [1.0, 1.0]  # capped at 1
    with pytest.raises(ValueError, match="multiplicity must be one of holm, bh, none, not 'bonferroni'"):
        adjust_p_values(p, "bonferroni")


@pytest.mark.parametrize("method", ["holm", "bh"])
def test_adjusted_p_values_equal_statsmodels(method):
    rng = np.random.default_rng(7)
    for m in (1, 2, 5, 17, 60):
        p = rng.beta(0.4, 1.0, size=m)
        p[rng.random(m) < 0.2] = p[0]  # ties
        expected = multipletests(p, method=REFERENCE[method])[1]
        assert adjust_p_values(p, method) == pytest.approx(expected, abs=1e-12)


@pytest.fixture(scope="module")
def frame():
    return simulate_comparisons(SyntheticStudy(n_annotators=12, queries_per_annotator=6, seed=11))


@pytest.mark.parametrize("method", ["holm", "bh", "none"])
def test_every_table_of_tests_carries_its_adjusted_p_values(frame, method):
    report = analyze(frame, config=AnalysisConfig(n_resamples=200, seed=2, multiplicity=method))
    rows = report.win_rates.rows
    statistics = {r.statistic for r in rows}
    assert [f.name for f in report.win_rates.families] == [
        f"win rates: {s}" for s in dict.fromkeys(r.statistic for r in rows)
    ]
    for statistic in statistics:
        members = [r for r in rows if r.statistic == statistic and np.isfinite(r.p_value)]
        raw = np.array([r.p_value for r in members])
        expected = raw if method == "none" else multipletests(raw, method=REFERENCE[method])[1]
        assert [r.p_adjusted for r in members] == pytest.approx(expected, abs=1e-12), statistic
        assert all(np.isnan(r.p_adjusted) for r in rows if r.statistic == statistic and np.isnan(r.p_value))
    assert report.regression is not None and report.regression_family is not None
    raw = np.array([c.p_value for c in report.regression.coefficients])
    expected = raw if method == "none" else multipletests(raw, method=REFERENCE[method])[1]
    assert list(report.regression_family.p_adjusted) == pytest.approx(expected, abs=1e-12)
    assert report.regression_family.labels == tuple(c.term for c in report.regression.coefficients)
    # The raw p-values are those of an analysis that adjusts nothing.
    if method != "none":
        plain = analyze(frame, config=AnalysisConfig(n_resamples=200, seed=2, multiplicity="none"))
        assert [r.p_value for r in plain.win_rates.rows] == pytest.approx([r.p_value for r in rows], nan_ok=True)


def test_the_report_says_which_family_and_method(frame, tmp_path):
    source = tmp_path / "table.csv"
    frame.to_csv(source, index=False)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"multiplicity": "bh"}))
    for name, extra in (("holm", []), ("bh", ["--config", str(settings)])):
        out = tmp_path / name
        assert main(["--comparisons", str(source), "--out", str(out), "--resamples", "100", *extra]) == 0
        html = (out / "report.html").read_text()
        words = "Holm (family-wise error rate)" if name == "holm" else "Benjamini-Hochberg (false discovery rate)"
        assert f"Adjusted p-values: {words}, within one family per statistic" in html
        assert f"Adjusted p-values: {words}, within one family per model (every coefficient" in html
        assert f'<th class="">p ({name})</th>' in html
        with (out / "tables" / "win_rates.csv").open() as fh:
            header = next(csv.reader(fh))
        assert header[header.index("p_value") + 1] == "p_adjusted"
        with (out / "tables" / "regression.csv").open() as fh:
            header = next(csv.reader(fh))
        assert header[header.index("p_value") + 1] == "p_adjusted"
        report = json.loads((out / "report.json").read_text())
        assert report["config"]["multiplicity"] == name
        assert all("p_adjusted" in r for r in report["win_rates"]["rows"])
        assert report["regression_family"]["method"] == name
        assert {f["method"] for f in report["win_rates"]["families"]} == {name}


def test_an_unknown_method_is_refused_by_name(tmp_path, frame):
    with pytest.raises(ValueError, match="multiplicity must be one of holm, bh, none, not 'bonferroni'"):
        AnalysisConfig(multiplicity="bonferroni")
    source = tmp_path / "table.csv"
    frame.to_csv(source, index=False)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"multiplicity": "bonferroni"}))
    stderr = io.StringIO()
    args = ["--comparisons", str(source), "--out", str(tmp_path / "o"), "--config", str(settings)]
    assert main(args, stderr=stderr) == 2
    assert "multiplicity must be one of holm, bh, none, not 'bonferroni'" in stderr.getvalue()


def test_a_family_without_any_p_value_stays_missing():
    for method in ("holm", "bh", "none"):
        assert np.isnan(adjust_p_values([float("nan"), float("nan")], method)).all()
        assert adjust_p_values([], method).tolist() == []


def test_the_default_method_is_holm_and_ties_keep_their_order():
    p = [0.02, 0.01, 0.02, 0.04]
    # Holm by hand: sorted 0.01, 0.02, 0.02, 0.04 times 4, 3, 2, 1 = 0.04, 0.06, 0.04, 0.04, running max.
    assert adjust_p_values(p).tolist() == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # BH by hand: times 4/1, 4/2, 4/3, 4/4 = 0.04, 0.04, 0.0267, 0.04, then the running minimum from the
    # largest carries 0.0267 down to the first two.
    assert adjust_p_values(p, "bh").tolist() == pytest.approx([0.08 / 3, 0.08 / 3, 0.08 / 3, 0.04])
    # A matrix of p-values is one family, read row by row.
    assert adjust_p_values(np.array([[0.01, 0.04], [0.03, 0.005]]), "holm").tolist() == pytest.approx(
        [0.03, 0.06, 0.06, 0.02]
    )


def test_a_family_names_its_tests_counts_them_and_says_how_they_were_adjusted():
    family = p_value_family(
        name="win rates: variant",
        description="each variant against 50 %",
        labels=["a", "b", "c"],
        p_values=[0.01, float("nan"), 0.04],
        method="bh",
    )
    assert family.labels == ("a", "b", "c") and family.method == "bh"
    assert family.p_values[0] == 0.01 and np.isnan(family.p_values[1])
    assert family.p_adjusted[0] == pytest.approx(0.02) and family.p_adjusted[2] == pytest.approx(0.04)
    assert family.m == 2
    assert family.sentence() == (
        "win rates: variant: each variant against 50 %; 2 tests, adjusted by Benjamini-Hochberg (false discovery rate)"
    )
    holm = p_value_family(name="n", description="d", labels=["x"], p_values=[0.2], method="holm")
    assert holm.sentence() == "n: d; 1 tests, adjusted by Holm (family-wise error rate)"
    assert p_value_family(name="n", description="d", labels=["x"], p_values=[0.2], method="none").sentence() == (
        "n: d; 1 tests, adjusted by none (raw p-values)"
    )
