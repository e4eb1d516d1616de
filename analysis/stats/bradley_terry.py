"""Bradley-Terry strengths of systems from decided matches, with annotator-clustered bootstrap intervals.

Fitted by Hunter's (2004) MM algorithm, vectorised over bootstrap resamples: each resample's win
matrix is a weighted sum of per-annotator win matrices, so all resamples iterate together.
Strengths are reported on the log scale, centred so that their mean is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from analysis.stats._results import ResultMixin, fmt, text_table
from analysis.stats.bootstrap import ClusterResampler, percentile_interval
from analysis.stats.errors import InsufficientDataError
from analysis.stats.table import PreparedTable

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SystemStrength(ResultMixin):
    system: str
    log_strength: float
    ci_low: float
    ci_high: float
    strength: float
    wins: int
    losses: int


@dataclass(frozen=True)
class BradleyTerryResult(ResultMixin):
    systems: tuple[SystemStrength, ...]
    n_comparisons: int
    iterations: int
    converged: bool
    pseudo_wins: float
    confidence_level: float
    n_resamples: int
    n_valid_resamples: int

    def get(self, system: str) -> SystemStrength:
        for s in self.systems:
            if s.system == system:
                return s
        raise KeyError(system)

    def win_probability(self, a: str, b: str) -> float:
        """Model probability that ``a`` beats ``b``."""
        da = self.get(a).log_strength - self.get(b).log_strength
        return float(1.0 / (1.0 + np.exp(-da)))

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([s.to_dict() for s in self.systems])

    def summary(self) -> str:
        rows = [
            [s.system, fmt(s.log_strength), f"[{fmt(s.ci_low)}, {fmt(s.ci_high)}]", f"{s.wins}-{s.losses}"]
            for s in self.systems
        ]
        return (
            f"Bradley-Terry log-strengths (mean 0), {self.n_comparisons} decided comparisons, "
            f"{self.n_valid_resamples}/{self.n_resamples} valid resamples\n"
            + text_table(["system", "log strength", f"{self.confidence_level:.0%} CI", "W-L"], rows)
        )


def fit_mm(wins: FloatArray, *, max_iter: int = 5_000, tol: float = 1e-10) -> tuple[FloatArray, int, bool]:
    """MM fit of Bradley-Terry log-strengths for a batch of win matrices ``(..., S, S)``.

    ``wins[..., i, j]`` is how often i beat j. Returns centred log-strengths ``(..., S)``, the number of
    iterations and whether every element converged. Elements without a finite MLE (a system that never
    wins or never loses, or that did not converge) are NaN.
    """
    w = np.asarray(wins, dtype=np.float64)
    n = w + np.swapaxes(w, -1, -2)
    total = w.sum(axis=-1)
    degenerate = ((total <= 0) | ((n.sum(axis=-1) - total) <= 0)).any(axis=-1)
    # Degenerate elements iterate on a harmless stand-in and are blanked at the end.
    safe_w = np.where(degenerate[..., None, None], 1.0 - np.eye(w.shape[-1]), w)
    n = safe_w + np.swapaxes(safe_w, -1, -2)
    total = safe_w.sum(axis=-1)
    logp = np.zeros(w.shape[:-1], dtype=np.float64)
    change = np.full(w.shape[:-2], np.inf)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        p = np.exp(logp)
        denom = (n / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        with np.errstate(divide="ignore"):
            new = np.log(total) - np.log(denom)
        new = new - new.mean(axis=-1, keepdims=True)
        change = np.abs(new - logp).max(axis=-1)
        logp = new
        if not np.any(change >= tol):
            break
    unconverged = change >= tol
    logp = np.where((degenerate | unconverged)[..., None], np.nan, logp)
    return logp.astype(np.float64), it, not bool(np.any(unconverged & ~degenerate))


def win_matrices(t: PreparedTable, systems: tuple[str, ...]) -> FloatArray:
    """Per-annotator win matrices ``(annotators, S, S)`` from decided matches."""
    index = {name: i for i, name in enumerate(systems)}
    s = len(systems)
    decided = t.decided
    winner = np.where(t.left_won, t.left_system, t.right_system)[decided]
    loser = np.where(t.left_won, t.right_system, t.left_system)[decided]
    wi = np.asarray([index[str(x)] for x in winner], dtype=np.int64)
    li = np.asarray([index[str(x)] for x in loser], dtype=np.int64)
    flat = t.annotator_code[decided] * s * s + wi * s + li
    counts = np.bincount(flat, minlength=t.n_annotators * s * s).astype(np.float64)
    return counts.reshape(t.n_annotators, s, s)


def bradley_terry(
    t: PreparedTable,
    *,
    resampler: ClusterResampler | None = None,
    confidence_level: float = 0.95,
    pseudo_wins: float = 0.0,
) -> BradleyTerryResult:
    """Strength of each system (``left_system``/``right_system``); ``pseudo_wins`` adds that many wins
    each way between every pair (a light prior that keeps the MLE finite)."""
    systems = tuple(
        sorted({str(x) for x in pd.unique(np.concatenate([t.left_system, t.right_system])) if x is not None})
    )
    if len(systems) < 2:
        raise InsufficientDataError("Bradley-Terry needs at least two systems")
    if not t.decided.any():
        raise InsufficientDataError("Bradley-Terry needs decided matches; every match is 'neither'")
    per_annotator = win_matrices(t, systems)
    prior = np.full((len(systems), len(systems)), pseudo_wins) - np.diag(np.full(len(systems), pseudo_wins))
    total = per_annotator.sum(axis=0) + prior
    graph = csr_matrix((total > 0).astype(np.int8))
    n_comp, _ = connected_components(graph, directed=True, connection="strong")
    if n_comp > 1:
        raise InsufficientDataError(
            "Bradley-Terry strengths are not identified: some system never beats (or never loses to) the rest; "
            "set a small pseudo_wins prior",
            extra={"strong_components": int(n_comp)},
        )
    logp, iters, converged = fit_mm(total)
    s = len(systems)
    if resampler is not None and resampler.n_clusters >= 2:
        flat = per_annotator.reshape(t.n_annotators, s * s)
        boot = resampler.resample_sums(flat).reshape(-1, s, s) + prior
        boot_logp, _, _ = fit_mm(boot)
        low, high = percentile_interval(boot_logp, confidence_level)
        n_valid = int(np.isfinite(boot_logp).all(axis=-1).sum())
    else:
        low = high = np.full(s, np.nan)
        n_valid = 0
    wins = per_annotator.sum(axis=0)
    out = tuple(
        SystemStrength(
            system=name,
            log_strength=float(logp[i]),
            ci_low=float(low[i]),
            ci_high=float(high[i]),
            strength=float(np.exp(logp[i])),
            wins=int(wins[i].sum()),
            losses=int(wins[:, i].sum()),
        )
        for i, name in enumerate(systems)
    )
    return BradleyTerryResult(
        systems=tuple(sorted(out, key=lambda x: -x.log_strength)),
        n_comparisons=int(t.decided.sum()),
        iterations=iters,
        converged=converged,
        pseudo_wins=pseudo_wins,
        confidence_level=confidence_level,
        n_resamples=resampler.n_resamples if resampler is not None else 0,
        n_valid_resamples=n_valid,
    )
