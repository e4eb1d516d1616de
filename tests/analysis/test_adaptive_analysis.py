"""Tables of the adaptive design: the report names its estimand (Bradley-Terry strengths, not per-stage win rates),
its strengths are choix's maximum-likelihood ones, its rates are out of all the variant's comparisons, and the
exports say which design chose the pairs."""

from __future__ import annotations

import json
import random

import choix
import numpy as np
import pandas as pd
import pytest

from analysis.community_exports import export_community
from analysis.exports import export_comparisons
from analysis.stats import AnalysisConfig, analyze
from analysis.stats.table import check_rows
from annotation.adaptive import Entrant, next_pair, posterior
from tests.analysis.helpers import row

SYSTEMS = 8
PLANTED = np.linspace(1.5, -1.5, SYSTEMS)  # system 0 the strongest


def _system(i: int) -> tuple[str, str]:
    return f"model-{i // 2}", ("persona", "generic")[i % 2]


def adaptive_table(annotators: int = 30, questions: int = 3, seed: int = 0) -> pd.DataFrame:
    """A study played by the adaptive design's own rule: each annotator's questions ask 7 comparisons of 8 systems,
    each next pair chosen from every answer before it; answers drawn from a planted Bradley-Terry model (5%
    "neither"), left/right at random."""
    rng = random.Random(seed)
    wins = np.zeros((SYSTEMS, SYSTEMS))
    rows = []
    for a in range(annotators):
        for q in range(questions):
            entrants = [Entrant(candidate=i, system=i, condition=_system(i)[1]) for i in range(SYSTEMS)]
            asked: list[tuple[int, int]] = []
            retired: set[int] = set()
            for k in range(1, SYSTEMS):
                pair = next_pair(
                    entrants,
                    gains=posterior(wins).gains(),
                    asked=asked,
                    retired=retired,
                    constrained=False,
                    rng=rng,
                )
                if pair is None:
                    break
                left, right = pair if rng.random() < 0.5 else pair[::-1]
                asked.append(pair)
                if rng.random() < 0.05:
                    choice = "neither"
                    retired.update(pair)
                else:
                    p_left = 1 / (1 + np.exp(PLANTED[right] - PLANTED[left]))
                    choice = "left" if rng.random() < p_left else "right"
                    winner, loser = (left, right) if choice == "left" else (right, left)
                    wins[winner, loser] += 1
                query = f"q{a}-{q}"
                rows.append(
                    row(
                        f"ann-{a:02d}",
                        choice,
                        stage="adaptive",
                        left=_system(left),
                        right=_system(right),
                        query_id=query,
                    )
                    | {"match": f"pair{k}", "round": k, "bracket_pair": None, "bracket_id": f"b-{query}"}
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return adaptive_table()


@pytest.fixture(scope="module")
def report(table):  # type: ignore[no-untyped-def]
    return analyze(table, config=AnalysisConfig(n_resamples=200, seed=1))


def test_the_report_names_bradley_terry_as_the_adaptive_design_s_headline(report):
    assert report.estimand.design == "adaptive" and report.estimand.headline == "bradley_terry"
    assert "not comparable to a bracket's per-stage rates" in report.estimand.sentence
    text = report.summary()
    assert "Estimand: Adaptive design" in text
    assert text.index("Bradley-Terry log-strengths") < text.index("Win rates (")
    assert report.to_dict()["estimand"]["headline"] == "bradley_terry"
    assert [s.stage for s in report.stages] == ["adaptive"]


def test_the_strengths_are_choix_s_maximum_likelihood_ones(table, report):
    decided = table[table["choice"].isin(["left", "right"])]
    names = sorted({*table["left_system"], *table["right_system"]})
    index = {name: i for i, name in enumerate(names)}
    data = [
        (index[r.left_system], index[r.right_system])
        if r.choice == "left"
        else (index[r.right_system], index[r.left_system])
        for r in decided.itertuples()
    ]
    reference = choix.ilsr_pairwise(len(names), data, alpha=0.0, tol=1e-12, max_iter=10_000)
    reference = reference - reference.mean()
    bt = report.bradley_terry
    assert bt is not None and not bt.separated and bt.n_comparisons == len(decided)
    for name, expected in zip(names, reference, strict=True):
        assert bt.get(name).log_strength == pytest.approx(expected, abs=1e-6)
    # And the planted order is recovered: system 0 (model-0 / persona) first, system 7 (model-3 / generic) last.
    assert bt.systems[0].system == "model-0/persona" and bt.systems[-1].system == "model-3/generic"


def test_an_adaptive_variant_rate_is_out_of_all_its_comparisons(table, report):
    rows = report.win_rates.select("variant", "adaptive")
    assert len(rows) == SYSTEMS
    for r in rows:
        model, condition = r.group.split(" / ")
        left = (table["left_model"] == model) & (table["left_condition"] == condition)
        right = (table["right_model"] == model) & (table["right_condition"] == condition)
        won = (left & table["choice"].eq("left")) | (right & table["choice"].eq("right"))
        assert (r.n, r.wins) == (int((left | right).sum()), int(won.sum()))


def test_a_bracket_table_keeps_the_win_rates_as_headline_and_a_mixed_one_says_so(table):
    bracket = pd.DataFrame(
        [row("a1", "left"), row("a2", "right"), row("a1", "left", stage="final", bracket_pair="final")]
    )
    assert analyze(bracket, config=AnalysisConfig(n_resamples=50)).estimand.headline == "win_rates"
    mixed = analyze(pd.concat([bracket, table]), config=AnalysisConfig(n_resamples=50))
    assert mixed.estimand.design == "mixed" and mixed.estimand.headline == "bradley_terry"
    assert any("mixes bracket and adaptive comparisons" in note for note in mixed.notes)
    outside = analyze(bracket.drop(columns=["stage", "bracket_pair"]), config=AnalysisConfig(n_resamples=50))
    assert outside.estimand.design == "pairs" and outside.estimand.headline == "win_rates"


def test_a_file_of_adaptive_rows_passes_the_row_checks(table):
    check_rows(table, conditions=("persona", "generic"))  # raises on any row it refuses


def test_the_exports_and_the_dataset_card_say_the_design(table, tmp_path):
    (tmp_path / "export").mkdir()
    manifest = export_comparisons(table, tmp_path / "export", formats=("csv",))
    assert manifest.design == "adaptive"
    written = json.loads((tmp_path / "export" / "comparisons.manifest.json").read_text())
    assert written["design"] == "adaptive" and written["stages"] == {"adaptive": len(table)}
    export_community(table, tmp_path / "hf", study="unit")
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "design: adaptive" in card and "analyse with Bradley-Terry strengths" in card
