"""Benchmark: the deterministic stress tests with every offline metric on 200 SciTLDR pairs.

    python bench/stress.py [--n 200] [--heavy-n 40] [--seed 0] [--out DIR]

Prints the wall time per test and metric family (the "baseline" column scores the original
summaries once; each test column scores only its new texts) and the verdict grid. The families
that run a neural encoder per text (embedding, source_free) run on the first --heavy-n pairs
(all of them with --heavy-n 0 = n) and their time is also extrapolated to n, which keeps the
whole benchmark within a few minutes on a CPU.

Then every claim docs/stress-tests.md makes about a metric's verdict (``DOC_CLAIMS``) beside the verdict
measured, marked where they disagree; exit status 2 when any does.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.core.api import OFFLINE_METRICS, metric_specs  # noqa: E402
from scoring.stress import StressReport, run_stress  # noqa: E402
from scoring.stress.datasets import scitldr_rows  # noqa: E402

TESTS = ["distractor", "incremental", "added_source_text"]
HEAVY_FAMILIES = {"embedding", "source_free"}

# What docs/stress-tests.md ("Benchmark") says each metric does in this benchmark's distractor test; the
# run prints these beside what it measured, so a claim that stops being true shows (exit status 2).
_DISTRACTOR_PASS = ("rouge1", "rouge2", "rougeL", "bleu", "chrf", "coverage", "density", "compression")
_DISTRACTOR_PASS += ("bertscore_p", "bertscore_f1", "embedding_cosine", "supert")
_DISTRACTOR_FAIL = ("meteor", "summary_length", "novel_1gram", "novel_2gram", "novel_3gram")
_DISTRACTOR_FAIL += ("sa_1", "sa_2", "sa_lcs", "ar_1", "ar_2", "ar_lcs", "ar_risk")
DOC_CLAIMS: dict[tuple[str, str], str] = {
    **{(m, "distractor"): "pass" for m in _DISTRACTOR_PASS},
    **{(m, "distractor"): "fail" for m in _DISTRACTOR_FAIL},
    **{(m, "distractor"): "undefined" for m in ("ra_1", "ra_2", "ra_lcs")},
}


def _fmt(x: float) -> str:
    return "undef" if not math.isfinite(x) else f"{x:+.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--heavy-n", type=int, default=40, help="pairs for the encoder-based families (0 = n)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the reports here")
    args = parser.parse_args()

    rows = scitldr_rows(args.n)
    heavy_n = args.heavy_n or args.n
    specs = {s.name: s for s in metric_specs(list(OFFLINE_METRICS))}
    light = [m for m in OFFLINE_METRICS if specs[m].family not in HEAVY_FAMILIES]
    heavy = [m for m in OFFLINE_METRICS if specs[m].family in HEAVY_FAMILIES]
    out = args.out or Path(tempfile.mkdtemp(prefix="stress-bench-"))

    runs: list[tuple[StressReport, int, float]] = []
    for metrics, n, name in ((light, args.n, "light"), (heavy, min(heavy_n, args.n), "heavy")):
        if not metrics:
            continue
        started = time.perf_counter()
        report = run_stress(rows[:n], TESTS, metrics, seed=args.seed, out_dir=out / name)
        runs.append((report, n, time.perf_counter() - started))

    stages = ["baseline", *TESTS]
    print(f"{args.n} SciTLDR pairs, {len(OFFLINE_METRICS)} offline metrics, seed {args.seed}")
    print("seconds per test and metric family; one call scores a family's metrics together; texts scored in brackets\n")
    print(f"{'family':<17}{'pairs':>6}" + "".join(f"{s:>20}" for s in stages) + f"{'total':>9}{'at n':>8}  metrics")
    grand = 0.0
    for report, n, _ in runs:
        secs = {(t.stage, t.group): t.seconds for t in report.timings}
        texts = {(t.stage, t.group): t.n_texts for t in report.timings}
        for t in report.timings:
            if t.stage != "baseline":
                continue
            g = t.group
            cells = [f"{secs.get((s, g), 0.0):.2f} ({texts.get((s, g), 0)})" for s in stages]
            total = sum(secs.get((s, g), 0.0) for s in stages)
            at_n = total * args.n / n
            grand += at_n
            print(
                f"{g:<17}{n:>6}"
                + "".join(f"{c:>20}" for c in cells)
                + f"{total:>9.2f}{at_n:>8.1f}  {', '.join(t.metrics)}"
            )
        perturb = [secs.get((s, "(perturb)"), 0.0) for s in TESTS]
        print(f"{'(perturbing)':<17}{n:>6}{'':>20}" + "".join(f"{p:>20.3f}" for p in perturb))
    print(f"\nscoring time extrapolated to {args.n} pairs for every family: {grand:.1f} s")
    print("wall time: " + ", ".join(f"{len(r.metrics)} metrics on {n} pairs {w:.1f} s" for r, n, w in runs))

    print("\nverdicts: rho / M / overall")
    print(f"{'metric':<17}" + "".join(f"{t:>30}" for t in TESTS))
    for report, _, _ in runs:
        for m in report.metrics:
            cells = []
            for t in TESTS:
                r = report.result(m, t)
                rho = "n/a" if r.rho_verdict.value == "n/a" else _fmt(r.rho)
                mono = "undef" if not math.isfinite(r.monotonicity) else f"{r.monotonicity:.2f}"
                cells.append(f"{rho} / {mono} / {r.verdict.value}")
            print(f"{m:<17}" + "".join(f"{c:>30}" for c in cells))
    print("\nclaims (docs/stress-tests.md) beside this run's verdicts:")
    print(f"{'metric':<17}{'test':<20}{'claimed':>10}{'measured':>10}  {'rho / M':<16}")
    mismatches = 0
    for report, n, _ in runs:
        for m in report.metrics:
            for t in TESTS:
                claim = DOC_CLAIMS.get((m, t))
                if claim is None:
                    continue
                r = report.result(m, t)
                measured = r.verdict.value
                mono = "undef" if not math.isfinite(r.monotonicity) else f"{r.monotonicity:.2f}"
                same = claim == measured
                mismatches += not same
                flag = "" if same else "  <- docs disagree" + (f" (measured on {n} pairs)" if n < args.n else "")
                print(f"{m:<17}{t:<20}{claim:>10}{measured:>10}  {_fmt(r.rho)} / {mono}{flag}")
    print(f"{mismatches} claim(s) contradicted by this run" if mismatches else "every claim holds in this run")
    print("\nreports: " + ", ".join(str(r.files["html"]) for r, _, _ in runs))
    return 2 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
