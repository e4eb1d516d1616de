"""Bradley-Terry strengths of systems from decided matches, with annotator-clustered bootstrap intervals.

Fitted by Hunter's (2004) MM algorithm, vectorised over bootstrap resamples: each resample's win
matrix is a weighted sum of per-annotator win matrices, so all resamples iterate together.
Strengths are reported on the log scale, centred so that their mean is zero.

When the matches separate the systems (a system, or a group of systems, never lost to the rest) the
maximum-likelihood strengths do not exist as numbers: the gap to the rest is infinite. Such systems are
reported with an infinite log-strength and ``unbounded`` set, relative to a reference set fitted as usual
(see ``separation``); each resample counts the systems that were unbounded in it.
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
IntArray = npt.NDArray[np.int64]

ABOVE = "above"
"""Never lost to the systems outside its group: log-strength +inf relative to the reference set."""
BELOW = "below"
"""Never beat the systems outside its group: log-strength -inf relative to the reference set."""
NOT_COMPARABLE = "not comparable"
"""No chain of matches links it to the reference set in either direction: no strength on the common scale."""

_BIG = 1e300  # stands in for +-inf while taking percentiles (any weight on it gives an infinite bound)


@dataclass(frozen=True)
class SystemStrength(ResultMixin):
    """One system's log-strength; ``unbounded`` says when it is infinite (``above``/``below``) or undefined.

    ``resamples_above``/``resamples_below`` count the bootstrap resamples in which the system's strength
    was +inf/-inf; ``ci_low_infinite``/``ci_high_infinite`` mark interval ends at -inf/+inf (null in JSON).
    """

    system: str
    log_strength: float
    ci_low: float
    ci_high: float
    strength: float
    wins: int
    losses: int
    unbounded: str | None = None
    resamples_above: int = 0
    resamples_below: int = 0
    ci_low_infinite: bool = False
    ci_high_infinite: bool = False

    def describe_unbounded(self, n_resamples: int) -> str:
        """Plain words for an infinite strength, point estimate and resamples (empty when there is none)."""
        parts = []
        if self.unbounded == ABOVE:
            parts.append("never lost to the rest: strength unbounded (+inf)")
        elif self.unbounded == BELOW:
            parts.append("never beat the rest: strength unbounded (-inf)")
        elif self.unbounded == NOT_COMPARABLE:
            parts.append("no matches linking it to the others: strength not comparable")
        if self.resamples_above:
            parts.append(f"never lost: strength unbounded in {self.resamples_above} of {n_resamples} resamples")
        if self.resamples_below:
            parts.append(f"never won: strength unbounded in {self.resamples_below} of {n_resamples} resamples")
        return "; ".join(parts)


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
    separated: bool = False
    """The matches separate the systems: some strengths are infinite (``SystemStrength.unbounded``)."""

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
            [
                s.system,
                fmt_strength(s.log_strength),
                f"[{fmt_strength(s.ci_low)}, {fmt_strength(s.ci_high)}]",
                f"{s.wins}-{s.losses}",
                s.describe_unbounded(self.n_resamples),
            ]
            for s in self.systems
        ]
        centre = "mean 0 over the systems with a finite strength" if self.separated else "mean 0"
        return (
            f"Bradley-Terry log-strengths ({centre}), {self.n_comparisons} decided comparisons, "
            f"{self.n_valid_resamples}/{self.n_resamples} resamples with every strength finite\n"
            + text_table(["system", "log strength", f"{self.confidence_level:.0%} CI", "W-L", "unbounded"], rows)
        )


def fmt_strength(value: float) -> str:
    """A log-strength for text: infinite ones as +inf/-inf, undefined ones as '-'."""
    if value == np.inf:
        return "+inf"
    if value == -np.inf:
        return "-inf"
    return fmt(value)


def _closure(adjacency: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Reachability ``(..., S, S)``: ``out[i, j]`` when a chain of wins leads from i to j (i reaches itself)."""
    s = adjacency.shape[-1]
    reach = adjacency | np.eye(s, dtype=np.bool_)
    steps = 1
    while steps < s:
        r = reach.astype(np.float64)
        reach = (r @ r) > 0
        steps *= 2
    return reach


def separation(wins: FloatArray) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """Which systems have an infinite maximum-likelihood strength in one win matrix ``(S, S)``.

    The strongly connected components of the "i beat j" graph are the sets whose strengths are finite
    relative to each other. The reference set is the largest component (ties: the one linked by chains
    of wins to the most systems, then the most matches inside it, then the first system by name); systems
    whose component reaches it (they beat someone who ... beat a reference system, and never the other
    way) are +inf (``1``), those it reaches are -inf (``-1``), the rest are not comparable (``2``), the
    reference set itself finite (``0``). When every component is a single system, the reference is one
    that both won and lost; with none, there is no reference: systems that never lost are +inf, those
    that never won -inf. Returns the codes and the reference mask.
    """
    w = np.asarray(wins, dtype=np.float64)
    s = w.shape[0]
    beat = w > 0
    n_comp, labels = connected_components(csr_matrix(beat.astype(np.int8)), directed=True, connection="strong")
    if n_comp == 1:
        return np.zeros(s, dtype=np.int8), np.ones(s, dtype=np.bool_)
    reach = _closure(beat)
    played = (w + w.T).sum(axis=1) > 0

    def key(c: int) -> tuple[int, int, float, int]:
        members = np.flatnonzero(labels == c)
        linked = int((reach[members].any(axis=0) | reach[:, members].any(axis=1)).sum())
        inside = float(w[np.ix_(members, members)].sum())
        return (-len(members), -linked, -inside, int(members[0]))

    candidates = [c for c in range(n_comp) if played[labels == c].any()]
    if candidates and max(int((labels == c).sum()) for c in candidates) == 1:
        # Only single systems: the reference is one that both won and lost, if any; otherwise every
        # system that never lost is +inf and every one that never won is -inf, with no finite strength.
        lost = w.sum(axis=0) > 0
        won = w.sum(axis=1) > 0
        candidates = [c for c in candidates if (won & lost)[labels == c].any()]
        if not candidates:
            code = np.where(won & ~lost, 1, np.where(lost & ~won, -1, 2)).astype(np.int8)
            return code, np.zeros(s, dtype=np.bool_)
    if not candidates:
        return np.full(s, 2, dtype=np.int8), np.zeros(s, dtype=np.bool_)
    ref = labels == min(candidates, key=key)
    anchor = int(np.flatnonzero(ref)[0])
    code = np.full(s, 2, dtype=np.int8)
    code[reach[:, anchor]] = 1
    code[reach[anchor, :]] = -1
    code[ref] = 0
    code[~played] = 2
    return code, ref


def _separated_fit(total: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int8], int, bool]:
    """Log-strengths with +-inf for separated systems and NaN for incomparable ones."""
    code, ref = separation(total)
    logp = np.full(total.shape[0], np.nan)
    logp[code == 1] = np.inf
    logp[code == -1] = -np.inf
    idx = np.flatnonzero(ref)
    iters, converged = 0, True
    if len(idx) == 1:
        logp[idx] = 0.0
    elif len(idx) > 1:
        sub, iters, converged = fit_mm(total[np.ix_(idx, idx)])
        logp[idx] = sub
    return logp, code, iters, converged


def _boot_percentiles(values: FloatArray, confidence_level: float) -> tuple[FloatArray, FloatArray]:
    """Percentile interval per column with +-inf allowed (an end that puts weight on inf is inf)."""
    stand_in = np.where(np.isposinf(values), _BIG, np.where(np.isneginf(values), -_BIG, values))
    low, high = percentile_interval(stand_in, confidence_level)

    def unmap(x: FloatArray) -> FloatArray:
        return np.asarray(np.where(x > 1e200, np.inf, np.where(x < -1e200, -np.inf, x)), dtype=np.float64)

    return unmap(low), unmap(high)


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
    each way between every pair (a light prior that keeps the MLE finite).

    Without the prior, separated systems get infinite strengths (``separation``) instead of an error."""
    systems = tuple(
        sorted({str(x) for x in pd.unique(np.concatenate([t.left_system, t.right_system])) if x is not None})
    )
    if len(systems) < 2:
        raise InsufficientDataError("Bradley-Terry needs at least two systems")
    if not t.decided.any():
        raise InsufficientDataError("Bradley-Terry needs decided matches; every match is 'neither'")
    per_annotator = win_matrices(t, systems)
    s = len(systems)
    prior = np.full((s, s), pseudo_wins) - np.diag(np.full(s, pseudo_wins))
    total = per_annotator.sum(axis=0) + prior
    code = np.zeros(s, dtype=np.int8)
    n_comp, _ = connected_components(csr_matrix((total > 0).astype(np.int8)), directed=True, connection="strong")
    if n_comp > 1:
        logp, code, iters, converged = _separated_fit(total)
    else:
        logp, iters, converged = fit_mm(total)
    above = below = np.zeros(s, dtype=np.int64)
    if resampler is not None and resampler.n_clusters >= 2:
        flat = per_annotator.reshape(t.n_annotators, s * s)
        boot = resampler.resample_sums(flat).reshape(-1, s, s) + prior
        connected = _closure(boot > 0).all(axis=(-1, -2))
        boot_logp = np.full((boot.shape[0], s), np.nan)
        if connected.any():
            boot_logp[connected], _, _ = fit_mm(boot[connected])
        for b in np.flatnonzero(~connected):
            # Separated resamples: only the infinite strengths are on a common scale with the others.
            b_code, _ = separation(boot[b])
            boot_logp[b] = np.where(b_code == 1, np.inf, np.where(b_code == -1, -np.inf, np.nan))
        above = np.isposinf(boot_logp).sum(axis=0).astype(np.int64)
        below = np.isneginf(boot_logp).sum(axis=0).astype(np.int64)
        low, high = _boot_percentiles(boot_logp, confidence_level)
        n_valid = int(np.isfinite(boot_logp).all(axis=-1).sum())
    else:
        low = high = np.full(s, np.nan)
        n_valid = 0
    labels = {1: ABOVE, -1: BELOW, 2: NOT_COMPARABLE}
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
            unbounded=labels.get(int(code[i])),
            resamples_above=int(above[i]),
            resamples_below=int(below[i]),
            ci_low_infinite=bool(np.isneginf(low[i])),
            ci_high_infinite=bool(np.isposinf(high[i])),
        )
        for i, name in enumerate(systems)
    )
    order = {ABOVE: 0, None: 1, NOT_COMPARABLE: 2, BELOW: 3}
    return BradleyTerryResult(
        systems=tuple(
            sorted(
                out,
                key=lambda x: (order[x.unbounded], -x.log_strength if np.isfinite(x.log_strength) else 0.0),
            )
        ),
        n_comparisons=int(t.decided.sum()),
        iterations=iters,
        converged=converged,
        pseudo_wins=pseudo_wins,
        confidence_level=confidence_level,
        n_resamples=resampler.n_resamples if resampler is not None else 0,
        n_valid_resamples=n_valid,
        separated=bool(n_comp > 1),
    )
