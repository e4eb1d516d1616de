"""False-positive rates under the null: clustered bootstrap and CR1 logit against CR2 with t(G-1).

Simulates studies with no personalisation effect (``analysis.stats.null_simulation``: annotators with their
own random taste for or against personalised summaries, several questions each, the tournament's bracket)
for several numbers of annotators G and prints how often each method rejects at alpha = 0.05: the
personalised side's win rate against 0.5, and the logit's intercept (personalisation effect) against 0.

    .venv/bin/python bench/small_sample.py              # 1,000 studies per G (a few minutes)
    .venv/bin/python bench/small_sample.py --quick      # 200 studies per G
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.stats.null_simulation import ALPHA, null_rejections  # noqa: E402

TARGET = (0.03, 0.07)


def _rate(count: int, n: int) -> str:
    if n == 0:
        return "-"
    rate = count / n
    se = math.sqrt(max(rate * (1 - rate), 1e-12) / n)
    flag = "" if TARGET[0] <= rate <= TARGET[1] else " *"
    return f"{rate:5.1%} ±{se:.1%}{flag}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="False-positive rates of the win-rate test and the logit under the null."
    )
    parser.add_argument("--quick", action="store_true", help="200 studies per G instead of 1,000")
    parser.add_argument("--reps", type=int, default=None, help="studies per number of annotators")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 6, 10, 20, 40], help="numbers of annotators")
    parser.add_argument("--resamples", type=int, default=999, help="bootstrap resamples per study")
    parser.add_argument("--taste-sd", type=float, default=0.5, help="SD of annotators' taste for personalisation")
    parser.add_argument("--queries", type=int, default=8, help="questions per annotator")
    parser.add_argument("--no-logit", action="store_true", help="win rates only (seconds instead of minutes)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    reps = args.reps or (200 if args.quick else 1_000)
    print(
        f"Null simulation: {reps} studies per G, {args.queries} questions per annotator, taste SD {args.taste_sd}, "
        f"{args.resamples} bootstrap resamples; alpha {ALPHA}; target {TARGET[0]:.0%}-{TARGET[1]:.0%}"
    )
    header = ["G", "win rate: bootstrap", "win rate: CR2-t", "logit: CR1", "logit: CR2-t", "logit fits", "seconds"]
    widths = [4, 20, 20, 16, 16, 11, 8]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    in_target = True
    for g in args.sizes:
        started = time.perf_counter()
        run = null_rejections(
            g,
            reps=reps,
            resamples=args.resamples,
            seed=args.seed,
            taste_sd=args.taste_sd,
            queries=args.queries,
            logit=not args.no_logit,
        )
        cells = [
            str(g),
            _rate(run.bootstrap, reps),
            _rate(run.cr2_rate, reps),
            _rate(run.logit_cr1, run.logit_fits),
            _rate(run.logit_cr2, run.logit_fits),
            f"{run.logit_fits}/{reps}" if not args.no_logit else "-",
            f"{time.perf_counter() - started:.0f}",
        ]
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), flush=True)
        new = [run.cr2_rate_rate] + ([run.logit_cr2_rate] if not args.no_logit else [])
        in_target = in_target and all(TARGET[0] <= r <= TARGET[1] for r in new)
    print("* outside the target; ± is the simulation's standard error")
    return 0 if in_target else 1


if __name__ == "__main__":
    raise SystemExit(main())
