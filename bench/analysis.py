"""Benchmark of the analysis core: 100,000 comparisons, 500 annotators, 30 metrics, 2,000 resamples.

Times the whole ``analyze()`` (and its parts), measures peak memory, and compares with the same
statistics done the naive way with the reference libraries (a pandas loop over resamples, measured on
a subset of resamples and extrapolated; statsmodels and krippendorff called directly).

    .venv/bin/python bench/analysis.py [--comparisons 100000] [--annotators 500] [--metrics 30]
                                       [--resamples 2000] [--naive-resamples 20] [--json bench/out/analysis.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.stats import (  # noqa: E402
    AnalysisConfig,
    ClusterResampler,
    analyze,
    bradley_terry,
    fit_personalization_logit,
    metric_agreement,
    prepare_table,
    win_rates,
)
from analysis.stats.synthetic import SyntheticStudy, lower_is_better_metrics, simulate_comparisons  # noqa: E402

TIME_TARGET_S = 15.0
MEMORY_TARGET_MB = 2048.0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def naive_bootstrap_seconds(frame: pd.DataFrame, n_resamples: int, seed: int) -> float:
    """Seconds per resample of a textbook pandas cluster bootstrap of the variant/position/persona win rates."""
    annotators = sorted(frame["annotator"].unique())
    groups = {a: g for a, g in frame.groupby("annotator")}
    idx = np.random.default_rng(seed).integers(0, len(annotators), size=(n_resamples, len(annotators)))

    def stats(sample: pd.DataFrame) -> dict[str, float]:
        decided = sample[sample["choice"] != "neither"]
        out: dict[str, float] = {"left": float((decided["choice"] == "left").mean())}
        left_won = decided["choice"] == "left"
        sides = pd.concat(
            [
                pd.DataFrame(
                    {
                        "stage": decided["stage"],
                        "model": decided["left_model"],
                        "cond": decided["left_condition"],
                        "won": left_won,
                    }
                ),
                pd.DataFrame(
                    {
                        "stage": decided["stage"],
                        "model": decided["right_model"],
                        "cond": decided["right_condition"],
                        "won": ~left_won,
                    }
                ),
            ]
        )
        for key, value in sides.groupby(["stage", "model", "cond"])["won"].mean().items():
            out["/".join(map(str, key))] = float(value)
        mixed = decided[decided["left_condition"] != decided["right_condition"]]
        pw = np.where(mixed["left_condition"] == "persona", mixed["choice"] == "left", mixed["choice"] == "right")
        for key, value in pd.Series(pw).groupby(mixed["bracket_pair"].to_numpy()).mean().items():
            out[f"pers/{key}"] = float(value)
        return out

    start = time.perf_counter()
    for b in range(n_resamples):
        stats(pd.concat([groups[annotators[i]] for i in idx[b]], ignore_index=True))
    return (time.perf_counter() - start) / n_resamples


def naive_bt_seconds(frame: pd.DataFrame, n_resamples: int, seed: int) -> float:
    """Seconds per resample of a Bradley-Terry bootstrap refitting a statsmodels logit each time."""
    import statsmodels.api as sm

    decided = frame[frame["choice"] != "neither"]
    systems = sorted(set(decided["left_system"]) | set(decided["right_system"]))
    annotators = sorted(decided["annotator"].unique())
    groups = {a: g for a, g in decided.groupby("annotator")}
    idx = np.random.default_rng(seed).integers(0, len(annotators), size=(n_resamples, len(annotators)))
    start = time.perf_counter()
    for b in range(n_resamples):
        sample = pd.concat([groups[annotators[i]] for i in idx[b]], ignore_index=True)
        x = np.column_stack(
            [
                (sample["left_system"] == s).to_numpy(float) - (sample["right_system"] == s).to_numpy(float)
                for s in systems[1:]
            ]
        )
        sm.Logit((sample["choice"] == "left").to_numpy(float), x).fit(disp=0)
    return (time.perf_counter() - start) / n_resamples


def naive_regression_seconds(frame: pd.DataFrame) -> float:
    import statsmodels.formula.api as smf

    left_p = (frame["left_condition"] == "persona") & (frame["right_condition"] == "generic")
    right_p = (frame["right_condition"] == "persona") & (frame["left_condition"] == "generic")
    keep = (left_p | right_p) & (frame["choice"] != "neither")
    f = frame[keep]
    lp = left_p[keep]
    data = pd.DataFrame(
        {
            "y": np.where(lp, f["choice"] == "left", f["choice"] == "right").astype(int),
            "mp": np.where(lp, f["left_model"], f["right_model"]),
            "mg": np.where(lp, f["right_model"], f["left_model"]),
            "st": f["stage"].to_numpy(),
            "g": pd.factorize(f["annotator"])[0],
        }
    )
    _, seconds = timed(
        lambda: smf.logit("y ~ C(mp) + C(mg) + C(st)", data=data).fit(
            disp=0, cov_type="cluster", cov_kwds={"groups": data["g"]}
        )
    )
    return seconds


def naive_alpha_seconds(frame: pd.DataFrame, metrics: list[str]) -> float:
    import krippendorff

    human = np.where(frame["choice"] == "left", 0.0, np.where(frame["choice"] == "right", 1.0, 2.0))
    start = time.perf_counter()
    for m in metrics:
        d = frame[f"left__{m}"].to_numpy() - frame[f"right__{m}"].to_numpy()
        votes = np.where(d == 0, 2.0, np.where(d > 0, 0.0, 1.0))
        krippendorff.alpha(reliability_data=np.vstack([votes, human]), level_of_measurement="nominal")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=100_000)
    parser.add_argument("--annotators", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--naive-resamples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    queries = int(np.ceil(args.comparisons / 2.8 / args.annotators)) + 1
    spec = SyntheticStudy(
        n_annotators=args.annotators,
        queries_per_annotator=queries,
        n_metrics=args.metrics,
        lower_is_better_every=5,
        seed=args.seed,
    )
    frame, gen_s = timed(lambda: simulate_comparisons(spec, n_comparisons=args.comparisons))
    metrics = [f"metric_{m:02d}" for m in range(args.metrics)]
    config = AnalysisConfig(seed=args.seed, n_resamples=args.resamples, higher_is_better=lower_is_better_metrics(spec))
    print(
        f"synthetic study: {len(frame):,} comparisons, {frame['annotator'].nunique()} annotators, {args.metrics} metrics, "
        f"{args.resamples:,} resamples (generated in {gen_s:.1f}s)"
    )

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # First call pays for importing statsmodels and friends; the second is the steady state.
    _, cold_s = timed(lambda: analyze(frame, config=config))
    report, total_s = timed(lambda: analyze(frame, config=config))
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    analyze(frame, config=config)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    traced_mb = traced_peak / 2**20

    # The parts, each on its own.
    t, prep_s = timed(lambda: prepare_table(frame))
    resampler, draw_s = timed(lambda: ClusterResampler.draw(t.n_annotators, n_resamples=args.resamples, seed=args.seed))
    _, wr_s = timed(lambda: win_rates(t, resampler=resampler))
    _, reg_s = timed(lambda: fit_personalization_logit(t))
    _, ag_s = timed(lambda: metric_agreement(t, higher_is_better=config.higher_is_better))
    _, bt_s = timed(lambda: bradley_terry(t, resampler=resampler))
    n_cells = len(report.win_rates.rows) + len(report.win_rates.neither)

    naive_boot = naive_bootstrap_seconds(frame, args.naive_resamples, args.seed) * args.resamples
    naive_bt = naive_bt_seconds(frame, max(2, args.naive_resamples // 4), args.seed) * args.resamples
    naive_reg = naive_regression_seconds(frame)
    naive_alpha = naive_alpha_seconds(frame, metrics)

    rows = [
        ("prepare table + draw resamples", prep_s + draw_s, None, ""),
        (
            f"win rates, {n_cells} cells, clustered bootstrap",
            wr_s,
            naive_boot,
            f"pandas loop, {args.naive_resamples} resamples x{args.resamples // max(args.naive_resamples, 1)}, fewer cells",
        ),
        ("logit, cluster-robust SEs", reg_s, naive_reg, "statsmodels formula logit directly"),
        (f"Krippendorff alpha, {args.metrics} metrics", ag_s, naive_alpha, "krippendorff.alpha directly"),
        ("Bradley-Terry + bootstrap", bt_s, naive_bt, "statsmodels Logit refit per resample, extrapolated"),
        ("whole analyze(), first call (with imports)", cold_s, None, ""),
        ("whole analyze(), warm", total_s, None, "includes checksum, breakdowns, provenance"),
    ]
    print()
    print(f"{'component':<48} {'ours s':>8} {'naive s':>10} {'speed-up':>9}  reference")
    print("-" * 110)
    for name, ours, naive, how in rows:
        naive_txt = f"{naive:10.2f}" if naive is not None else f"{'':>10}"
        speed = f"{naive / ours:8.1f}x" if naive is not None and ours > 0 else f"{'':>9}"
        print(f"{name:<48} {ours:8.2f} {naive_txt} {speed}  {how}")
    print("-" * 110)
    peak_rss = max(rss_before, rss_after)
    ok_time = cold_s < TIME_TARGET_S
    ok_mem = traced_mb < MEMORY_TARGET_MB and peak_rss < MEMORY_TARGET_MB
    print(
        f"whole analysis: {cold_s:.2f}s first call, {total_s:.2f}s warm "
        f"(target < {TIME_TARGET_S:.0f}s: {'ok' if ok_time else 'MISSED'})"
    )
    print(
        f"peak memory: {traced_mb:.0f} MB allocated during analyze() (tracemalloc), process peak RSS {peak_rss:.0f} MB "
        f"(target < {MEMORY_TARGET_MB:.0f} MB: {'ok' if ok_mem else 'MISSED'})"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "comparisons": len(frame),
                    "annotators": int(frame["annotator"].nunique()),
                    "metrics": args.metrics,
                    "resamples": args.resamples,
                    "seconds_first_call": cold_s,
                    "seconds_warm": total_s,
                    "tracemalloc_peak_mb": traced_mb,
                    "peak_rss_mb": peak_rss,
                    "components": [{"name": n, "ours_s": o, "naive_s": v, "reference": h} for n, o, v, h in rows],
                },
                indent=2,
            )
        )
    return 0 if ok_time and ok_mem else 1


if __name__ == "__main__":
    raise SystemExit(main())
