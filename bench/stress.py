"""Benchmark: the deterministic stress tests with every offline metric on 200 SciTLDR pairs.

    python bench/stress.py [--n 200] [--seed 0] [--out DIR]

Prints the wall time per test and metric (the "baseline" column scores the original
summaries once; each test column scores only its new texts) and the pass/fail grid.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.core.api import OFFLINE_METRICS  # noqa: E402
from scoring.stress import run_stress  # noqa: E402
from scoring.stress.datasets import scitldr_rows  # noqa: E402

TESTS = ["distractor", "incremental", "added_source_text"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()

    rows = scitldr_rows(args.n)
    metrics = list(OFFLINE_METRICS)
    out = args.out or Path(tempfile.mkdtemp(prefix="stress-bench-"))
    started = time.perf_counter()
    report = run_stress(rows, TESTS, metrics, seed=args.seed, out_dir=out)
    total = time.perf_counter() - started

    stages = ["baseline", *TESTS]
    secs = {(t.stage, t.group): t.seconds for t in report.timings}
    texts = {(t.stage, t.group): t.n_texts for t in report.timings}
    groups: dict[str, tuple[str, ...]] = {}
    for t in report.timings:
        if t.stage == "baseline":
            groups[t.group] = t.metrics
    print(f"{len(rows)} SciTLDR pairs, {len(metrics)} offline metrics, seed {args.seed}\n")
    print("seconds per test and metric family (one call scores a family's metrics together; texts scored in brackets)")
    print(f"{'family':<18}" + "".join(f"{s:>22}" for s in stages) + f"{'total':>10}  metrics")
    col_totals = dict.fromkeys(stages, 0.0)
    for g, members in groups.items():
        cells = []
        for s in stages:
            sec = secs.get((s, g), 0.0)
            col_totals[s] += sec
            cells.append(f"{sec:.2f} ({texts.get((s, g), 0)})")
        row_total = sum(secs.get((s, g), 0.0) for s in stages)
        print(f"{g:<18}" + "".join(f"{c:>22}" for c in cells) + f"{row_total:>10.2f}  {', '.join(members)}")
    print(f"{'(perturbing)':<18}{'':>22}" + "".join(f"{secs.get((t, '(perturb)'), 0.0):>22.3f}" for t in TESTS))
    print(f"{'all families':<18}" + "".join(f"{col_totals[s]:>22.2f}" for s in stages))
    print(f"\nwall time {total:.1f} s (including report writing)\n")
    print("verdicts (rho / M / overall)")
    print(f"{'metric':<24}" + "".join(f"{t:>26}" for t in TESTS))
    for m in metrics:
        cells = []
        for t in TESTS:
            r = report.result(m, t)
            rho = "n/a" if r.rho_verdict.value == "n/a" else ("undef" if r.rho != r.rho else f"{r.rho:+.2f}")
            mono = "undef" if r.monotonicity != r.monotonicity else f"{r.monotonicity:.2f}"
            cells.append(f"{rho} / {mono} / {r.verdict.value}")
        print(f"{m:<24}" + "".join(f"{c:>26}" for c in cells))
    print(f"\nreport: {report.files['html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
