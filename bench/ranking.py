"""Ranking recovery: Kendall's tau between a planted ranking and the one the judgments so far give, every 100
judgments, for the adaptive design against fixed single-elimination brackets, at 4, 8 and 16 systems.

Simulated annotators answer by a planted Bradley-Terry model (each study draws its systems' log-strengths from
N(0, strength_sd**2)); with probability ``--neither`` an answer is "neither". A question is what the platform plays:

- bracket: positions drawn at random, single elimination, the winner goes on; "neither" skips the match it feeds
  (annotation.services.tournament);
- adaptive: ``systems - 1`` comparisons (the study's default), each next pair chosen by the platform's own rule
  (annotation.adaptive.next_pair on the posterior of every judgment so far), a pair once per question, "neither"
  retiring both summaries;
- adaptive, N behind: the same, but the tally the choice reads is refreshed every N judgments only, as when N
  annotators answer at the same moment (``--behind``);
- adaptive, no spread: the best pair always, never one of the near-ties (``NEAR_TIE`` 0);
- adaptive, D-optimal: pairs chosen by the information about all strengths (``INFORMATION``) instead of by how
  much they settle an order (``ORDER``, the platform's rule).

The ranking at each checkpoint is the posterior mode's (annotation.adaptive.posterior, prior SD 1) for every design,
so only the pairs differ. Reference: the bracket's tau; adaptive should be at least as good (the last column is
the difference with its standard error). Exit status 1 when adaptive is worse than the bracket by more than two
standard errors at any checkpoint of 300 judgments or more.

    .venv/bin/python bench/ranking.py             # 100 studies per size (about 6 minutes on the 2-core box)
    .venv/bin/python bench/ranking.py --quick     # 30 studies per size
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotation.adaptive import INFORMATION, NEAR_TIE, ORDER, Entrant, next_pair, posterior  # noqa: E402

CHECKPOINTS = (100, 200, 300, 500, 1000)


class Annotator:
    """Answers by the planted model: i beats j with probability 1 / (1 + exp(theta_j - theta_i))."""

    def __init__(self, theta: np.ndarray, rng: random.Random, neither: float) -> None:
        self.theta, self.rng, self.neither = theta, rng, neither

    def answer(self, i: int, j: int) -> int | None:
        """The winner (i or j), or None for "neither"."""
        if self.rng.random() < self.neither:
            return None
        p = 1.0 / (1.0 + math.exp(self.theta[j] - self.theta[i]))
        return i if self.rng.random() < p else j


Record = Callable[[int, int | None, int], None]  # (first system, winner or None, second system)


def bracket_question(n: int, annotator: Annotator, rng: random.Random, record: Record) -> None:
    """One question of a single-elimination bracket of n = 2**k systems."""
    alive: list[int | None] = list(range(n))
    rng.shuffle(alive)
    while len(alive) > 1:
        nxt: list[int | None] = []
        for a, b in zip(alive[0::2], alive[1::2], strict=True):
            if a is None or b is None:
                nxt.append(None)  # a "neither" before: the match it feeds is skipped
                continue
            winner = annotator.answer(a, b)
            record(a, winner, b)
            nxt.append(winner)
        alive = nxt


def adaptive_question(
    n: int,
    annotator: Annotator,
    rng: random.Random,
    record: Record,
    wins: Callable[[], np.ndarray],
    *,
    near_tie: float,
    criterion: str,
) -> None:
    """One question of the adaptive design: n - 1 comparisons chosen as the platform chooses them."""
    entrants = [Entrant(candidate=i, system=i, condition="") for i in range(n)]
    asked: list[tuple[int, int]] = []
    retired: set[int] = set()
    for _ in range(n - 1):
        pair = next_pair(
            entrants,
            gains=posterior(wins()).gains(criterion=criterion),
            asked=asked,
            retired=retired,
            constrained=False,
            rng=rng,
            near_tie=near_tie,
        )
        if pair is None:
            return
        a, b = pair
        asked.append(pair)
        winner = annotator.answer(a, b)
        if winner is None:
            retired.update(pair)
        record(a, winner, b)


def study_taus(
    design: str,
    n: int,
    seed: int,
    *,
    neither: float,
    strength_sd: float,
    behind: int = 1,
    near_tie: float = NEAR_TIE,
    criterion: str = ORDER,
) -> list[float]:
    """Kendall's tau to the planted ranking at each checkpoint, for one simulated study."""
    planted = np.random.default_rng(seed).normal(0.0, strength_sd, n)
    rng = random.Random(f"{seed}:{design}")
    annotator = Annotator(planted, random.Random(f"{seed}:answers:{design}"), neither)
    wins = np.zeros((n, n))
    seen = wins.copy()  # the tally the adaptive choice reads: refreshed every `behind` judgments
    judgments = 0
    taus: list[float] = []

    def record(a: int, winner: int | None, b: int) -> None:
        nonlocal judgments, seen
        judgments += 1
        if winner is not None:
            wins[winner, b if winner == a else a] += 1
        if judgments % behind == 0:
            seen = wins.copy()
        if judgments in CHECKPOINTS:
            taus.append(float(kendalltau(posterior(wins).theta, planted).statistic))

    while judgments < CHECKPOINTS[-1]:
        if design == "bracket":
            bracket_question(n, annotator, rng, record)
        else:
            adaptive_question(n, annotator, rng, record, lambda: seen, near_tie=near_tie, criterion=criterion)
    return taus


def choice_times(sizes: tuple[int, ...] = (4, 8, 16, 32), repeats: int = 200) -> list[tuple[int, float, float]]:
    """(systems, median, p95 milliseconds) of choosing one next pair as a request does after reading the tallies:
    the posterior of a study's win matrix (1,000 comparisons drawn at random), its gains and ``next_pair``."""
    out = []
    for n in sizes:
        rng = np.random.default_rng(n)
        wins = np.zeros((n, n))
        for _ in range(1000):
            i, j = rng.choice(n, size=2, replace=False)
            wins[i, j] += 1
        entrants = [Entrant(candidate=i, system=i, condition="") for i in range(n)]
        times = []
        for r in range(repeats):
            started = time.perf_counter()
            next_pair(
                entrants,
                gains=posterior(wins).gains(),
                asked=[],
                retired=set(),
                constrained=False,
                rng=random.Random(r),
            )
            times.append((time.perf_counter() - started) * 1000)
        out.append((n, float(np.median(times)), float(np.percentile(times, 95))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ranking recovery of the adaptive design against brackets.")
    parser.add_argument("--quick", action="store_true", help="30 studies per size instead of 100")
    parser.add_argument("--reps", type=int, default=None, help="studies per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16], help="numbers of systems (powers of 2)")
    parser.add_argument("--neither", type=float, default=0.05, help="share of 'neither' answers")
    parser.add_argument("--strength-sd", type=float, default=1.0, help="SD of the planted log-strengths")
    parser.add_argument("--behind", type=int, default=20, help="judgments the stale tally lags behind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timing-only", action="store_true", help="only the time one choice of a pair takes")
    args = parser.parse_args(argv)
    print("Choosing one pair (posterior, gains, next pair; one process, no database):")
    for n, median, p95 in choice_times():
        print(f"  {n:2d} systems: median {median:.3f} ms, p95 {p95:.3f} ms")
    if args.timing_only:
        return 0
    reps = args.reps or (30 if args.quick else 100)
    if any(n < 2 or n & (n - 1) for n in args.sizes):
        parser.error("--sizes: powers of two from 2 (the brackets have no byes here)")
    designs: dict[str, dict[str, Any]] = {
        "bracket": {},
        "adaptive": {},
        f"{args.behind} behind": {"behind": args.behind},
        "no spread": {"near_tie": 0.0},
        "D-optimal": {"criterion": INFORMATION},
    }
    print(
        f"Ranking recovery: Kendall's tau (posterior-mode ranking vs planted), mean ± SE over {reps} studies per size; "
        f"planted log-strengths N(0, {args.strength_sd}^2), {args.neither:.0%} 'neither'; seed {args.seed}"
    )
    header = ["systems", "judgments", *designs, "adaptive - bracket"]
    widths = [7, 9, *(max(len(d), 12) for d in designs), 18]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    worse = False
    for n in args.sizes:
        started = time.perf_counter()
        results = {
            name: np.asarray(
                [
                    study_taus(
                        "bracket" if name == "bracket" else "adaptive",
                        n,
                        args.seed * 100_003 + rep,
                        neither=args.neither,
                        strength_sd=args.strength_sd,
                        **options,
                    )
                    for rep in range(reps)
                ]
            )
            for name, options in designs.items()
        }
        for k, checkpoint in enumerate(CHECKPOINTS):
            cells = [str(n), str(checkpoint)]
            for name in designs:
                column = results[name][:, k]
                cells.append(f"{column.mean():.3f} ±{column.std(ddof=1) / math.sqrt(reps):.3f}")
            # Paired by study: the same planted strengths under both designs.
            gap = results["adaptive"][:, k] - results["bracket"][:, k]
            se = gap.std(ddof=1) / math.sqrt(reps)
            cells.append(f"{gap.mean():+.3f} ±{se:.3f}")
            worse = worse or (checkpoint >= 300 and gap.mean() < -2 * se)
            print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), flush=True)
        print(f"  ({n} systems: {time.perf_counter() - started:.0f} s)", flush=True)
    print("± is the standard error over studies; the last column pairs each study's two designs")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
