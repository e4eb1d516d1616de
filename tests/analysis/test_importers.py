"""Outside judgments (pairwise, best-worst, ranking) in: implied pairs, contradictions, analysis end to end."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.cli import main as analysis_main
from analysis.importers import ImportProblem, import_judgments, judgments_table, parse_columns
from analysis.stats import AnalysisConfig, analyze

BEST_WORST_CSV = """item,annotator,systems,best,worst
d1,ann1,A|B|C|D,B,D
d1,ann2,A|B|C|D,A,B
d2,ann1,A|B|C|D,C,A
d2,ann3,A|B|C|D,B,C
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def pairs(table) -> list[tuple[str, str, str]]:
    return sorted(zip(table["left_system"], table["right_system"], table["choice"], strict=True))


def wins(table) -> Counter[str]:
    out: Counter[str] = Counter()
    for left, right, choice in zip(table["left_system"], table["right_system"], table["choice"], strict=True):
        if choice == "left":
            out[left] += 1
        elif choice == "right":
            out[right] += 1
    return out


def test_best_worst_gives_the_implied_pairs(tmp_path):
    path = write(tmp_path, "bw.csv", "item,annotator,systems,best,worst\nd1,ann1,A|B|C|D,B,D\n")
    imported = import_judgments(path, kind="best-worst")
    # B best, D worst of four: B beats A, C, D; A and C beat D (2k - 3 = 5 pairs).
    assert pairs(imported.table) == [
        ("A", "D", "left"),
        ("B", "A", "left"),
        ("B", "C", "left"),
        ("B", "D", "left"),
        ("C", "D", "left"),
    ]
    assert set(imported.table["annotator"]) == {"ann1"}
    assert set(imported.table["query_id"]) == {"d1"}


def test_best_worst_win_counts_over_a_file(tmp_path):
    imported = import_judgments(write(tmp_path, "bw.csv", BEST_WORST_CSV), kind="best-worst")
    # Per judgment the best wins 3 and the two middle systems 1 each:
    # row 1 B3 A1 C1; row 2 A3 C1 D1; row 3 C3 B1 D1; row 4 B3 A1 D1.
    assert wins(imported.table) == Counter({"B": 7, "A": 5, "C": 5, "D": 3})
    assert imported.n_judgments == 4
    assert imported.n_pairs == 20


def test_ranking_with_ties_gives_every_pair(tmp_path):
    path = write(
        tmp_path, "rank.jsonl", json.dumps({"item": "q", "annotator": "w1", "ranking": "A > B = C > D"}) + "\n"
    )
    table = import_judgments(path, kind="ranking").table
    assert pairs(table) == [
        ("A", "B", "left"),
        ("A", "C", "left"),
        ("A", "D", "left"),
        ("B", "C", "tie"),
        ("B", "D", "left"),
        ("C", "D", "left"),
    ]
    # The same ranking as a JSON list with a tied group.
    path = write(
        tmp_path, "rank2.jsonl", json.dumps({"item": "q", "annotator": "w1", "ranking": ["A", ["B", "C"], "D"]})
    )
    assert pairs(import_judgments(path, kind="ranking").table) == pairs(table)


def test_pairwise_choices_map_to_sides(tmp_path):
    text = "item,annotator,system_a,system_b,choice\nx,a1,P,Q,a\nx,a2,P,Q,B\ny,a1,Q,R,tie\n"
    table = import_judgments(write(tmp_path, "p.csv", text), kind="pairwise").table
    assert pairs(table) == [("P", "Q", "left"), ("P", "Q", "right"), ("Q", "R", "tie")]
    assert wins(table) == Counter({"P": 1, "Q": 1})


def test_columns_are_configurable(tmp_path):
    text = "Doc,Rater,Shown,Best,Worst\nd1,r1,A;B;C,C,A\n"
    columns = parse_columns("item=Doc,annotator=Rater,systems=Shown,best=Best,worst=Worst", "best-worst")
    table = import_judgments(write(tmp_path, "bw.csv", text), kind="best-worst", columns=columns).table
    assert pairs(table) == [("B", "A", "left"), ("C", "A", "left"), ("C", "B", "left")]
    with pytest.raises(ImportProblem, match="'bestest' is not a field of best-worst"):
        parse_columns("bestest=Best", "best-worst")


def test_a_missing_column_is_named(tmp_path):
    with pytest.raises(ImportProblem, match=r"worst \(column 'worst'\)"):
        import_judgments(write(tmp_path, "bw.csv", "item,annotator,systems,best\nd,a,A|B,A\n"), kind="best-worst")


def test_contradictions_are_refused_by_row_and_field(tmp_path):
    bw = BEST_WORST_CSV + "d3,ann2,A|B|C,B,B\nd3,ann3,A|B|C,C,A\nd4,ann1,A|B|C,A,A\n"
    with pytest.raises(ImportProblem) as refused:
        import_judgments(write(tmp_path, "bw.csv", bw), kind="best-worst")
    message = str(refused.value)
    assert "row 5, worst: 'B' is both best and worst" in message
    assert "row 7, worst: 'A' is both best and worst" in message
    assert "row 6" not in message
    assert "2 problems" in message

    rank = "item,annotator,ranking\nq,w,A>B>A\nq,v,A>B\n"
    with pytest.raises(ImportProblem, match="row 1, ranking: lists A twice"):
        import_judgments(write(tmp_path, "r.csv", rank), kind="ranking")

    pair = "item,annotator,system_a,system_b,choice\nx,a,P,Q,a\nx,b,P,P,a\n"
    with pytest.raises(ImportProblem, match="row 2, system_b: the pair is 'P' with itself"):
        import_judgments(write(tmp_path, "p.csv", pair), kind="pairwise")


def test_malformed_rows_refuse_even_when_dropping_contradictions(tmp_path):
    text = "item,annotator,systems,best,worst\nd,a,A|B|C,E,A\nd,b,A|B|C,A,A\n"
    with pytest.raises(ImportProblem, match=r"row 1, best: 'E' is not among the systems shown"):
        import_judgments(write(tmp_path, "bw.csv", text), kind="best-worst", drop_contradictions=True)


def test_cli_refuses_contradictions_with_exit_2_and_drops_them_on_request(tmp_path):
    bw = write(tmp_path, "bw.csv", BEST_WORST_CSV + "d3,ann2,A|B|C,B,B\n")
    stderr = io.StringIO()
    status = analysis_main(
        ["import-judgments", "--kind", "best-worst", str(bw), "--out", str(tmp_path / "o")], stderr=stderr
    )
    assert status == 2
    assert "row 5, worst: 'B' is both best and worst" in stderr.getvalue()
    assert "--drop-contradictions" in stderr.getvalue()
    assert not (tmp_path / "o" / "comparisons.csv").exists()

    stdout = io.StringIO()
    status = analysis_main(
        ["import-judgments", "--kind", "best-worst", str(bw), "--out", str(tmp_path / "o"), "--drop-contradictions"],
        stdout=stdout,
    )
    assert status == 0
    assert "dropped: row 5, worst: 'B' is both best and worst" in stdout.getvalue()
    manifest = json.loads((tmp_path / "o" / "comparisons.manifest.json").read_text())
    assert manifest["rows"] == 20
    assert manifest["import"]["dropped"] == [
        {"row": 5, "field": "worst", "problem": "'B' is both best and worst", "contradiction": True}
    ]
    assert "best-worst scaling" in manifest["import"]["rule"]


def test_imported_best_worst_analyses_per_system_clustered_on_annotators(tmp_path):
    bw = write(tmp_path, "bw.csv", BEST_WORST_CSV)
    call_command("import_judgments", str(bw), kind="best-worst", out=tmp_path / "t", stdout=io.StringIO())
    status = analysis_main(
        ["--comparisons", str(tmp_path / "t" / "comparisons.csv"), "--out", str(tmp_path / "r"), "--resamples", "200"],
        stdout=io.StringIO(),
    )
    assert status == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["provenance"]["n_annotators"] == 3
    systems = {r["group"]: r for r in report["win_rates"]["rows"] if r["statistic"] == "system"}
    # A system is in 3 pairs of a judgment as best or worst, in 2 as a middle one. B: best twice (6-0), worst
    # once (0-3), middle once (1-1) = 7-4; D: worst once (0-3), middle three times (3-3) = 3-6.
    assert {s: (r["wins"], r["losses"]) for s, r in systems.items()} == {
        "a": (5, 5),
        "b": (7, 4),
        "c": (5, 5),
        "d": (3, 6),
    }
    assert systems["b"]["n_annotators"] == 3
    assert report["win_rates"]["method"] in ("cr2-t", "cluster-bootstrap")
    assert not any(r["statistic"] in ("variant", "personalized_vs_generic") for r in report["win_rates"]["rows"])
    assert any("no persona/generic conditions" in n for n in report["notes"])
    assert {s["system"] for s in report["bradley_terry"]["systems"]} == {"a", "b", "c", "d"}


def test_the_interval_is_clustered_on_annotators():
    # One annotator's 10 identical judgments are one cluster, not ten independent ones: splitting them over
    # ten annotator ids narrows the interval of the same wins.
    rows = [{"item": f"d{i}", "systems": "A|B|C", "best": "A", "worst": "C"} for i in range(10)]
    rows += [{"item": f"e{i}", "systems": "A|B|C", "best": "C", "worst": "A"} for i in range(10)]

    def width(annotator) -> float:
        records = [dict(r, annotator=annotator(i)) for i, r in enumerate(rows)]
        table = judgments_table(records, kind="best-worst").table
        report = analyze(table, config=AnalysisConfig(n_resamples=400, inference="standard"))
        a = report.win_rates.get("system", "A", "final")
        return a.ci_high - a.ci_low

    two_judges = width(lambda i: "x" if i < 10 else "y")
    twenty_judges = width(lambda i: f"j{i}")
    assert twenty_judges < two_judges


def test_command_refusal_is_a_command_error(tmp_path):
    bw = write(tmp_path, "bw.csv", "item,annotator,systems,best,worst\nd,a,A|B,A,A\n")
    with pytest.raises(CommandError):
        call_command("import_judgments", str(bw), kind="best-worst", out=tmp_path / "o", stderr=io.StringIO())
