"""How many annotators a study needs: simulated power of the personalisation test at several sizes
(analysis.stats.power; docs/analysis.md, "Planning a study")."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.services import write_plan
from analysis.stats.power import plan_power


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of whole numbers: {text!r}") from None
    if not sizes or min(sizes) < 2 or max(sizes) > 2_000:
        raise argparse.ArgumentTypeError("give numbers of annotators between 2 and 2000, e.g. 10,20,40")
    return sizes


class Command(BaseCommand):
    help = "Simulate the power of the personalised-vs-generic test at several numbers of annotators."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--effect", type=float, required=True, help="persona effect, log-odds (0.4 ~ 60%% wins)")
        parser.add_argument("--sizes", type=_sizes, default=[10, 20, 40, 80], help="annotator counts (10,20,40,80)")
        parser.add_argument("--target", type=float, default=0.8, help="target power (0.8)")
        parser.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
        parser.add_argument("--taste-sd", type=float, default=0.5, help="SD of annotators' taste, log-odds (0.5)")
        parser.add_argument("--questions", type=int, default=8, help="questions per annotator (8)")
        parser.add_argument("--reps", type=int, default=200, help="simulated studies per size (200)")
        parser.add_argument("--resamples", type=int, default=999, help="bootstrap resamples per study (999)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--out", type=Path, default=None, help="folder for plan.json, plan.svg and plan.txt")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["reps"] <= 100_000:
            raise CommandError("--reps must be between 1 and 100000")
        if not 1 <= options["resamples"] <= 100_000:
            raise CommandError("--resamples must be between 1 and 100000")
        try:
            plan = plan_power(
                options["sizes"],
                effect=options["effect"],
                target=options["target"],
                taste_sd=options["taste_sd"],
                queries=options["questions"],
                reps=options["reps"],
                alpha=options["alpha"],
                resamples=options["resamples"],
                seed=options["seed"],
            )
        except ValueError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(plan.summary())
        if options["out"] is not None:
            from analysis.report.power_plot import power_plot  # matplotlib only when a plot is asked for

            out: Path = options["out"]
            write_plan(plan, out, power_plot(plan))  # the research page's job writes the same three files
            self.stdout.write(f"Wrote {out / 'plan.json'}, {out / 'plan.svg'} and {out / 'plan.txt'}.")
