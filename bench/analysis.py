"""Benchmark of the analysis: the whole command-line run, ``analyze()`` and its parts, each checked against a
reference computed independently on the same bootstrap draws.

    .venv/bin/python bench/analysis.py [--comparisons 100000] [--annotators 500] [--metrics 30]
                                       [--resamples 2000] [--reference-resamples 200] [--json out.json]

1. The command line, as a user runs it: the synthetic table is written to Parquet, then
   ``manage.py analyze --comparisons table.parquet --out DIR --config settings.json`` runs in a fresh process
   (report, tables, CSV/JSONL/Parquet exports and manifest). Wall time and that process's peak RSS against
   the targets: under 30 s and 2 GB at 1,000,000 comparisons (``--cli-only`` stops there).
2. ``analyze()`` in process, cold (imports) and warm, with its parts timed one by one.
3. References, each on the same table and the same draws of annotators (``ClusterResampler.weights``):
   - win rates (first-stage variants, left position per stage, persona vs generic per stage): a numpy loop
     over resamples, each one the drawn annotators' rows weighted by their draw counts (``np.bincount``),
     then the percentile interval and the documented p-value; estimates, intervals and p-values compared;
   - Krippendorff's alpha of every metric: the ``krippendorff`` package on the metric's votes (same
     threshold, same direction as the project's: lower-is-better metrics reversed) against the choices;
     the intervals of the first ``--alpha-ci-metrics`` metrics by the same kind of numpy loop over
     resamples (weighted coincidence matrix per resample);
   - the personalisation logit: statsmodels' formula ``logit`` with cluster-robust (CR1) covariance on a
     frame built here; odds ratios, their intervals and p-values compared;
   - Bradley-Terry: statsmodels ``Logit`` on the +1/-1 design of decided matches (the MLE the MM algorithm
     converges to), centred; the bootstrap reference refits a frequency-weighted GLM per resample, timed on
     ``--bt-reference-resamples`` and extrapolated (its intervals are not compared).
   A reference run on fewer resamples than the analysis is timed on those and extrapolated to
   ``--resamples`` (both printed); the project's numbers it is compared with come from the same subset of
   draws. Any mismatch beyond the tolerances printed is a failure (exit status 1); a missed time or memory
   target is exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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
from analysis.stats.metric_info import describe_metrics  # noqa: E402
from analysis.stats.synthetic import SyntheticStudy, lower_is_better_metrics, simulate_comparisons  # noqa: E402
from analysis.stats.table import PreparedTable, metric_names  # noqa: E402

CLI_TIME_TARGET_S = 30.0
MEMORY_TARGET_MB = 2048.0
TOL = {
    "win-rate estimate": 1e-12,
    "win-rate interval": 1e-9,
    "win-rate p-value": 1e-12,
    "alpha": 1e-9,
    "alpha interval": 1e-9,
    "odds ratio (relative)": 1e-6,
    "odds-ratio interval (relative)": 1e-6,
    "logit p-value": 1e-8,
    "Bradley-Terry log-strength": 1e-5,
}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


class Checks:
    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, float, bool]] = []

    def add(self, what: str, ours: Any, ref: Any, tol: float, *, relative: bool = False) -> None:
        a = np.asarray(ours, dtype=np.float64).ravel()
        b = np.asarray(ref, dtype=np.float64).ravel()
        same_missing = np.array_equal(np.isnan(a), np.isnan(b))
        both = ~np.isnan(a) & ~np.isnan(b)
        diff = np.abs(a[both] - b[both])
        if relative:
            diff = diff / np.maximum(np.abs(b[both]), 1e-300)
        worst = float(diff.max()) if diff.size else 0.0
        self.rows.append((what, int(a.size), worst, tol, bool(same_missing and worst <= tol)))

    @property
    def ok(self) -> bool:
        return all(r[-1] for r in self.rows)

    def print(self) -> None:
        print(f"\n{'check (ours vs reference, same draws)':<58} {'values':>7} {'max diff':>10} {'tolerance':>10}")
        print("-" * 92)
        for what, n, worst, tol, ok in self.rows:
            print(f"{what:<58} {n:>7} {worst:>10.2e} {tol:>10.0e}  {'ok' if ok else 'MISMATCH'}")


def subset(resampler: ClusterResampler, k: int) -> ClusterResampler:
    """The first ``k`` draws of the analysis's resampler (the same annotators drawn)."""
    k = min(k, resampler.n_resamples)
    return ClusterResampler(resampler.n_clusters, k, resampler.seed, resampler.weights[:k])


# --- win rates -------------------------------------------------------------------------------------------


def reference_cells(frame: pd.DataFrame) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """(statistic, group, stage) -> (wins, decided) row indicators, defined here from the docs' table."""
    choice = frame["choice"].to_numpy(dtype=object)
    left_won, right_won = choice == "left", choice == "right"
    decided = left_won | right_won
    stage = frame["stage"].to_numpy(dtype=object)
    stages = [s for s in ("round1", "round2", "round3", "final") if (stage == s).any()]
    cells: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    first = stage == stages[0]
    lm, rm = frame["left_model"].to_numpy(dtype=object), frame["right_model"].to_numpy(dtype=object)
    lc, rc = frame["left_condition"].to_numpy(dtype=object), frame["right_condition"].to_numpy(dtype=object)
    for model in sorted(set(lm) | set(rm)):
        for cond in sorted(set(lc) | set(rc)):
            left_is, right_is = (lm == model) & (lc == cond), (rm == model) & (rc == cond)
            played = first & (left_is | right_is) & decided
            wins = first & ((left_is & left_won) | (right_is & right_won))
            cells[("variant", f"{model} / {cond}", stages[0])] = (wins, played)
    masks = {s: stage == s for s in stages} | ({"all": np.ones(len(frame), bool)} if len(stages) > 1 else {})
    mixed_left = (lc == "persona") & (rc == "generic")
    mixed_right = (rc == "persona") & (lc == "generic")
    for name, rows in masks.items():
        cells[("position", "left", name)] = (rows & left_won, rows & decided)
        persona_won = (mixed_left & left_won) | (mixed_right & right_won)
        cells[("personalized_vs_generic", "all brackets", name)] = (
            rows & persona_won,
            rows & (mixed_left | mixed_right) & decided,
        )
    return cells


def reference_win_rates(
    frame: pd.DataFrame, codes: np.ndarray, weights: np.ndarray, confidence: float
) -> dict[tuple[str, str, str], tuple[float, float, float, float]]:
    """Estimate, percentile interval and p-value (null 0.5) per cell: a loop over resamples, each weighting
    every row by how often its annotator was drawn."""
    cells = reference_cells(frame)
    keys = list(cells)
    num = np.stack([cells[k][0] for k in keys]).astype(np.float64)
    den = np.stack([cells[k][1] for k in keys]).astype(np.float64)
    estimate = num.sum(axis=1) / den.sum(axis=1)
    reps = np.empty((weights.shape[0], len(keys)))
    for b in range(weights.shape[0]):
        w = weights[b, codes]  # each row counts as often as its annotator was drawn
        reps[b] = (num @ w) / np.where(den @ w > 0, den @ w, np.nan)
    tail = 100 * (1 - confidence) / 2
    low, high = np.nanpercentile(reps, [tail, 100 - tail], axis=0)
    valid = np.isfinite(reps)
    extreme = (np.abs(reps - estimate) >= np.abs(estimate - 0.5) - 1e-12) & valid
    p = np.minimum((1 + extreme.sum(axis=0)) / (1 + valid.sum(axis=0)), 1.0)
    return {k: (estimate[i], low[i], high[i], p[i]) for i, k in enumerate(keys)}


# --- alpha -----------------------------------------------------------------------------------------------


def reference_votes(frame: pd.DataFrame, metric: str, threshold: float, higher: bool) -> np.ndarray:
    d = frame[f"left__{metric}"].to_numpy(float) - frame[f"right__{metric}"].to_numpy(float)
    if not higher:
        d = -d
    return np.where(np.abs(d) <= threshold, 2.0, np.where(d > 0, 0.0, 1.0))


def human_codes(frame: pd.DataFrame) -> np.ndarray:
    return np.where(frame["choice"] == "left", 0.0, np.where(frame["choice"] == "right", 1.0, 2.0))


def reference_alpha_interval(
    votes: np.ndarray, human: np.ndarray, codes: np.ndarray, weights: np.ndarray, confidence: float
) -> tuple[float, float]:
    """Nominal alpha per resample from the weighted 3 x 3 coincidence matrix (two coders, every unit
    pairable), then the percentile interval."""
    cell = votes.astype(np.int64) * 3 + human.astype(np.int64)
    alphas = np.empty(weights.shape[0])
    for b in range(weights.shape[0]):
        counts = np.bincount(cell, weights=weights[b, codes], minlength=9).reshape(3, 3)
        o = counts + counts.T
        n_c = o.sum(axis=1)
        n = n_c.sum()
        observed = o.sum() - np.trace(o)
        expected = (n * n - (n_c**2).sum()) / (n - 1)
        alphas[b] = 1 - observed / expected
    tail = 100 * (1 - confidence) / 2
    low, high = np.nanpercentile(alphas, [tail, 100 - tail])
    return float(low), float(high)


# --- logit and Bradley-Terry -----------------------------------------------------------------------------


def reference_logit(frame: pd.DataFrame, refs: dict[str, str]) -> dict[str, tuple[float, float, float, float]]:
    import re

    import statsmodels.formula.api as smf

    lp = (frame["left_condition"] == "persona") & (frame["right_condition"] == "generic")
    rp = (frame["right_condition"] == "persona") & (frame["left_condition"] == "generic")
    keep = (lp | rp) & (frame["choice"] != "neither")
    f, lp = frame[keep], lp[keep]
    data = pd.DataFrame(
        {
            "y": np.where(lp, f["choice"] == "left", f["choice"] == "right").astype(float),
            "model_personalized": np.where(lp, f["left_model"], f["right_model"]),
            "model_generic": np.where(lp, f["right_model"], f["left_model"]),
            "round_stage": f["stage"].to_numpy(),
            "g": pd.factorize(f["annotator"])[0],
        }
    )
    terms = [
        f"C({v}, Treatment(reference={refs[v]!r}))"
        for v in ("model_personalized", "model_generic", "round_stage")
        if data[v].nunique() > 1
    ]
    fit = smf.logit("y ~ " + " + ".join(terms), data=data).fit(
        disp=0, cov_type="cluster", cov_kwds={"groups": data["g"]}
    )
    ci = fit.conf_int()
    out = {}
    for name in fit.params.index:
        m = re.match(r"C\((\w+)(?:,[^)]*\))?\)\[T\.(.+)\]$", name)
        term = f"{m.group(1)}[{m.group(2)}]" if m else name
        b = fit.params[name]
        out[term] = (
            float(np.exp(b)),
            float(np.exp(ci.loc[name, 0])),
            float(np.exp(ci.loc[name, 1])),
            float(fit.pvalues[name]),
        )
    return out


def bt_design(frame: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    decided = frame[frame["choice"] != "neither"]
    systems = sorted(set(decided["left_system"]) | set(decided["right_system"]))
    x = np.column_stack(
        [
            (decided["left_system"] == s).to_numpy(float) - (decided["right_system"] == s).to_numpy(float)
            for s in systems[1:]
        ]
    )
    y = (decided["choice"] == "left").to_numpy(float)
    return systems, x, y, pd.factorize(decided["annotator"], sort=True)[0]


def reference_bt(frame: pd.DataFrame) -> dict[str, float]:
    import statsmodels.api as sm

    systems, x, y, _ = bt_design(frame)
    beta = np.concatenate([[0.0], sm.Logit(y, x).fit(disp=0, tol=1e-12, maxiter=200).params])
    return dict(zip(systems, beta - beta.mean(), strict=True))


def reference_bt_resample_seconds(frame: pd.DataFrame, t: PreparedTable, weights: np.ndarray) -> float:
    """Seconds per resample of refitting the Bradley-Terry logit with each row weighted by its draw count."""
    import statsmodels.api as sm

    _, x, y, _ = bt_design(frame)
    decided = frame["choice"].to_numpy(dtype=object) != "neither"
    codes = t.annotator_code[decided]
    start = time.perf_counter()
    for b in range(weights.shape[0]):
        w = weights[b, codes]
        sm.GLM(y, x, family=sm.families.Binomial(), freq_weights=w).fit()
    return (time.perf_counter() - start) / weights.shape[0]


# --- the command line ------------------------------------------------------------------------------------


_HWM_LAUNCHER = """
import atexit, runpy, sys
def _hwm(path=sys.argv[1]):
    try:
        with open("/proc/self/status") as status:
            kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return
    with open(path, "w") as out:
        out.write(kb)
atexit.register(_hwm)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
"""Runs ``manage.py`` and writes the process's peak RSS in kB (VmHWM) to the file named first on exit."""


def run_cli(table_path: Path, settings: dict[str, Any], out_dir: Path) -> tuple[float, float, float, str]:
    """``manage.py analyze`` on the table file in a fresh process: wall seconds, its peak RSS (MB), its CPU
    seconds (user + system: less inflated by a loaded machine than the wall time), stdout."""
    config_path = out_dir.parent / "settings.json"
    config_path.write_text(json.dumps(settings), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        str(REPO / "manage.py"),
        "analyze",
        "--comparisons",
        str(table_path),
        "--out",
        str(out_dir),
        "--config",
        str(config_path),
    ]
    # The child's own high-water mark (VmHWM, Linux), written as it exits: the children's ru_maxrss also
    # counts this process's peak, since a child forked from it before exec starts at its size.
    hwm_file = out_dir.parent / "analyze.vmhwm"
    hwm_file.unlink(missing_ok=True)
    cmd[1:2] = ["-c", _HWM_LAUNCHER, str(hwm_file), cmd[1]]
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"manage.py analyze failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    if hwm_file.exists() and hwm_file.read_text().strip():
        peak = float(hwm_file.read_text())
    else:
        peak = float(after.ru_maxrss)
        print("warning: no VmHWM (not Linux?): the children's ru_maxrss, an upper bound, is reported")
    return seconds, peak / 1024, cpu, done.stdout.strip().splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=100_000)
    parser.add_argument("--annotators", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--reference-resamples", type=int, default=200, help="resamples the references run on")
    parser.add_argument("--alpha-ci-metrics", type=int, default=5, help="metrics whose alpha interval is checked")
    parser.add_argument("--bt-reference-resamples", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cli-only", action="store_true", help="only the command-line run")
    parser.add_argument("--no-cli", action="store_true", help="skip the command-line run")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="folder for the Parquet table, settings and the command's outputs (kept); default: a temporary one",
    )
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
    higher = lower_is_better_metrics(spec)
    settings = {"seed": args.seed, "n_resamples": args.resamples, "higher_is_better": higher}
    config = AnalysisConfig.from_dict(settings)
    print(
        f"synthetic study: {len(frame):,} comparisons, {frame['annotator'].nunique()} annotators, {args.metrics} "
        f"metrics, {args.resamples:,} resamples (generated in {gen_s:.1f}s); load average {os.getloadavg()[0]:.1f}"
    )
    result: dict[str, Any] = {"comparisons": len(frame), "resamples": args.resamples, "metrics": args.metrics}
    status = 0

    if not args.no_cli:
        with contextlib.ExitStack() as stack:
            if args.work_dir is None:
                work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-analysis-")))
            else:
                work = args.work_dir
                work.mkdir(parents=True, exist_ok=True)
            table_path = work / "comparisons.parquet"
            frame.to_parquet(table_path, index=False)
            load_before = os.getloadavg()[0]
            cli_s, cli_mb, cli_cpu, line = run_cli(table_path, settings, work / "out")
            load_after = os.getloadavg()[0]
            sizes = {p.name: p.stat().st_size for p in (work / "out").glob("comparisons.*")}
        ok = cli_s < CLI_TIME_TARGET_S and cli_mb < MEMORY_TARGET_MB
        print(
            f"\nmanage.py analyze --comparisons table.parquet (report, HTML, tables; a table input is not re-exported): {line}"
        )
        print(
            f"  wall {cli_s:.1f}s (target < {CLI_TIME_TARGET_S:.0f}s), peak RSS {cli_mb:.0f} MB (target < "
            f"{MEMORY_TARGET_MB:.0f} MB): {'ok' if ok else 'MISSED'}; CPU {cli_cpu:.1f}s (user + system); load "
            f"average {load_before:.1f} before, {load_after:.1f} after; exports "
            + (
                ", ".join(f"{k} {v / 2**20:.0f} MB" for k, v in sorted(sizes.items()) if not k.endswith(".json"))
                or "none"
            )
        )
        result |= {"cli_seconds": cli_s, "cli_peak_rss_mb": cli_mb, "cli_cpu_seconds": cli_cpu}
        status = 0 if ok else 2
        if args.cli_only:
            return status

    _, cold_s = timed(lambda: analyze(frame, config=config))
    report, warm_s = timed(lambda: analyze(frame, config=config))
    tracemalloc.start()
    analyze(frame, config=config)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    t, prep_s = timed(lambda: prepare_table(frame))
    resampler, draw_s = timed(lambda: ClusterResampler.draw(t.n_annotators, n_resamples=args.resamples, seed=args.seed))
    rates, wr_s = timed(lambda: win_rates(t, resampler=resampler))
    logit, reg_s = timed(lambda: fit_personalization_logit(t))
    info = describe_metrics(metric_names(frame))
    agreement, ag_s = timed(lambda: metric_agreement(t, info=info, higher_is_better=higher, resampler=resampler))
    bt, bt_s = timed(lambda: bradley_terry(t, resampler=resampler))

    checks = Checks()
    k = min(args.reference_resamples, args.resamples)
    sub = subset(resampler, k)
    scale = args.resamples / k
    codes = t.annotator_code

    # Win rates on the same k draws.
    ours_sub = {(r.statistic, r.group, r.stage): r for r in win_rates(t, resampler=sub).rows}
    ref_wr, ref_wr_s = timed(lambda: reference_win_rates(frame, codes, sub.weights, config.confidence_level))
    keys = [key for key in ref_wr if key in ours_sub]
    missing = [key for key in ref_wr if key not in ours_sub]
    if missing:
        print(f"cells the reference defines but the analysis lacks: {missing}")
        checks.rows.append(("win-rate cells present", len(ref_wr), float(len(missing)), 0.0, False))
    checks.add(
        "win-rate estimate (decided rate)",
        [ours_sub[q].decided_rate for q in keys],
        [ref_wr[q][0] for q in keys],
        TOL["win-rate estimate"],
    )
    checks.add(
        "win-rate interval ends",
        [(ours_sub[q].ci_low, ours_sub[q].ci_high) for q in keys],
        [ref_wr[q][1:3] for q in keys],
        TOL["win-rate interval"],
    )
    checks.add(
        "win-rate p-value", [ours_sub[q].p_value for q in keys], [ref_wr[q][3] for q in keys], TOL["win-rate p-value"]
    )
    full = {(r.statistic, r.group, r.stage): r for r in rates.rows}
    checks.add(
        "win-rate estimate, all draws = subset",
        [full[q].decided_rate for q in keys],
        [ours_sub[q].decided_rate for q in keys],
        0.0,
    )

    # Alpha: krippendorff on every metric; intervals of the first few on the k draws.
    import krippendorff

    human = human_codes(frame)
    ours_alpha, ref_alpha = [], []
    start = time.perf_counter()
    for m in agreement.metrics:
        votes = reference_votes(frame, m.metric, m.threshold, higher.get(m.metric, True))
        ref_alpha.append(krippendorff.alpha(reliability_data=np.vstack([votes, human]), level_of_measurement="nominal"))
        ours_alpha.append(m.alpha)
    ref_alpha_s = time.perf_counter() - start
    checks.add(f"alpha, {len(ours_alpha)} metrics (krippendorff package)", ours_alpha, ref_alpha, TOL["alpha"])
    ci_metrics = agreement.metrics[: args.alpha_ci_metrics]
    ours_ci_sub = metric_agreement(
        t, metrics=[m.metric for m in ci_metrics], info=info, higher_is_better=higher, resampler=sub
    )
    start = time.perf_counter()
    ref_ci = [
        reference_alpha_interval(
            reference_votes(frame, m.metric, m.threshold, higher.get(m.metric, True)),
            human,
            codes,
            sub.weights,
            config.confidence_level,
        )
        for m in ci_metrics
    ]
    ref_alpha_ci_s = (time.perf_counter() - start) / max(len(ci_metrics), 1) * len(agreement.metrics)
    checks.add(
        f"alpha interval ends, {len(ci_metrics)} metrics",
        [(ours_ci_sub.get(m.metric).ci_low, ours_ci_sub.get(m.metric).ci_high) for m in ci_metrics],
        ref_ci,
        TOL["alpha interval"],
    )

    # Logit.
    ref_or, ref_reg_s = timed(lambda: reference_logit(frame, dict(logit.reference_levels)))
    terms = [c.term for c in logit.coefficients]
    if sorted(terms) != sorted(ref_or):
        print(f"logit terms differ: ours {terms}, reference {sorted(ref_or)}")
        checks.rows.append(("logit terms", len(terms), 1.0, 0.0, False))
    else:
        coef = {c.term: c for c in logit.coefficients}
        checks.add(
            "odds ratios",
            [coef[q].odds_ratio for q in terms],
            [ref_or[q][0] for q in terms],
            TOL["odds ratio (relative)"],
            relative=True,
        )
        checks.add(
            "odds-ratio interval ends",
            [(coef[q].ci_low, coef[q].ci_high) for q in terms],
            [ref_or[q][1:3] for q in terms],
            TOL["odds-ratio interval (relative)"],
            relative=True,
        )
        checks.add(
            "logit p-values", [coef[q].p_value for q in terms], [ref_or[q][3] for q in terms], TOL["logit p-value"]
        )

    # Bradley-Terry.
    ref_strength, ref_bt_fit_s = timed(lambda: reference_bt(frame))
    ours_strength = {s.system: s.log_strength for s in bt.systems}
    checks.add(
        "Bradley-Terry log-strengths",
        [ours_strength[s] for s in ref_strength],
        list(ref_strength.values()),
        TOL["Bradley-Terry log-strength"],
    )
    bt_k = max(1, min(args.bt_reference_resamples, args.resamples))
    ref_bt_per = reference_bt_resample_seconds(frame, t, resampler.weights[:bt_k])

    rows = [
        ("prepare table + draw resamples", prep_s + draw_s, None, ""),
        (
            f"win rates, {len(rates.rows) + len(rates.neither)} cells, {args.resamples} resamples",
            wr_s,
            ref_wr_s * scale,
            f"numpy loop over resamples, {len(keys)} cells: {ref_wr_s:.2f}s for {k} resamples x{scale:g}",
        ),
        ("logit, cluster-robust SEs", reg_s, ref_reg_s, "statsmodels formula logit, CR1, measured in full"),
        (
            f"Krippendorff alpha + intervals, {len(agreement.metrics)} metrics",
            ag_s,
            ref_alpha_s + ref_alpha_ci_s * scale,
            f"krippendorff.alpha {ref_alpha_s:.2f}s in full + numpy interval loop "
            f"{ref_alpha_ci_s:.2f}s per {k} resamples x{scale:g}",
        ),
        (
            "Bradley-Terry + bootstrap",
            bt_s,
            ref_bt_fit_s + ref_bt_per * args.resamples,
            f"statsmodels fit {ref_bt_fit_s:.2f}s + weighted GLM refit {ref_bt_per:.2f}s/resample "
            f"(measured on {bt_k}) x{args.resamples}",
        ),
        ("whole analyze(), first call (with imports)", cold_s, None, ""),
        ("whole analyze(), warm", warm_s, None, "includes checksum, sweeps, breakdowns, provenance"),
    ]
    print(
        f"\n{'component':<52} {'ours s':>8} {'ref s':>9} {'speed-up':>9}  reference (timed on the same machine, same run)"
    )
    print("-" * 150)
    for name, ours, ref, how in rows:
        ref_txt = f"{ref:9.2f}" if ref is not None else f"{'':>9}"
        speed = f"{ref / ours:8.1f}x" if ref is not None and ours > 0 else f"{'':>9}"
        print(f"{name:<52} {ours:8.2f} {ref_txt} {speed}  {how}")
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nin process: analyze() {cold_s:.2f}s cold, {warm_s:.2f}s warm; {traced / 2**20:.0f} MB allocated during "
        f"analyze() (tracemalloc), this process's peak RSS {peak_rss:.0f} MB (references included)"
    )
    checks.print()
    if not checks.ok:
        print("\nFAILED: the analysis disagrees with a reference beyond the tolerance")
        status = 1
    result |= {
        "seconds_first_call": cold_s,
        "seconds_warm": warm_s,
        "tracemalloc_peak_mb": traced / 2**20,
        "components": [{"name": n, "ours_s": o, "reference_s": r, "reference": h} for n, o, r, h in rows],
        "checks": [
            {"check": w, "values": n, "max_diff": d, "tolerance": tol, "ok": ok} for w, n, d, tol, ok in checks.rows
        ],
    }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
