"""The adaptive design's choice of a question's next pair: pure (numpy, no Django), so that
annotation.services.tournament and bench/ranking.py run the same rule.

The study's judgments so far are a win matrix between its systems. A Bradley-Terry model with a Gaussian prior on
the log-strengths is fitted to it (the posterior mode, by Newton's method) and approximated by a Gaussian there
(Laplace): precision ``H = sum_ij n_ij p_ij (1 - p_ij) (e_i - e_j)(e_i - e_j)' + I / prior_sd**2``. The order of
systems i and j is in doubt while their difference ``d ~ N(delta, v)`` straddles zero; one more comparison of the
two narrows it to ``v / (1 + p (1 - p) v)``. The pair chosen is the one whose order that comparison settles most:
``exp(-delta**2 / 2v) * (1 - 1 / sqrt(1 + p (1 - p) v))``, the share of the difference's uncertainty it removes,
weighed by how much the order is in doubt (1 for equal strengths, near 0 for a gap of several SDs). Close pairs
whose order is unsettled are asked; a settled gap is not asked again and again. bench/ranking.py measures it
against brackets, and against the D-optimal rule (the information about all strengths,
``log(1 + p (1 - p) v) / 2``, as Chatbot Arena's sampling weighs pairs by the uncertainty a vote removes), which
recovers the ranking less well.

Within a question the same rules as the bracket's hold: a pair is asked once; "neither" retires both summaries
(in the bracket neither goes on); under a constrained first round each summary's first comparison is with one of
the other condition (in the bracket, its first-round match). Pairs within ``NEAR_TIE`` of the best are drawn at
random from the question's seed, so annotators answering at the same moment, who read the same tally, spread over
several good pairs rather than all reading the same two summaries.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

PRIOR_SD = 1.0
"""The prior's standard deviation of a log-strength: a 1-in-1 chance that one system beats another at most ~88% of
the time (a gap of 2). It keeps the strengths finite before any comparison and after one-sided ones."""
ORDER = "order"
INFORMATION = "information"
NEAR_TIE = 0.1
"""A pair whose expected information is within this share of the best is as good a choice as the best."""


@dataclass(frozen=True)
class Posterior:
    """The Laplace approximation of the strengths' posterior: mode ``theta`` (log-strengths) and covariance."""

    theta: FloatArray
    cov: FloatArray
    iterations: int

    def gains(self, *, criterion: str = ORDER) -> FloatArray:
        """``gains[i, j]``: what one more comparison of systems i and j is worth (0 on the diagonal). ``ORDER``
        (the design's rule): how much it settles their order; ``INFORMATION``: the information it gives about all
        strengths, in nats (D-optimal)."""
        diagonal = np.diag(self.cov)
        variance = np.maximum(diagonal[:, None] + diagonal[None, :] - 2 * self.cov, 1e-12)
        delta = self.theta[:, None] - self.theta[None, :]
        p = 1.0 / (1.0 + np.exp(-delta))
        information = p * (1 - p) * variance
        if criterion == INFORMATION:
            gains = 0.5 * np.log1p(information)
        elif criterion == ORDER:
            gains = np.exp(-0.5 * delta**2 / variance) * (1 - 1 / np.sqrt(1 + information))
        else:
            raise ValueError(f"unknown criterion {criterion!r}")
        np.fill_diagonal(gains, 0.0)
        return np.asarray(gains, dtype=np.float64)


def posterior(wins: npt.ArrayLike, *, prior_sd: float = PRIOR_SD, max_iter: int = 100, tol: float = 1e-10) -> Posterior:
    """Fit the log-strengths to ``wins[i, j]`` (how often system i beat j; a tie may count half to each) under a
    ``N(0, prior_sd**2)`` prior on each: the posterior mode by Newton's method (the log-posterior is strictly
    concave, so it converges from zero in a few steps) and the inverse of the negative Hessian there."""
    w = np.asarray(wins, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError("wins must be a square matrix")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("wins must be finite and non-negative")
    s = w.shape[0]
    n = w + w.T
    precision = 1.0 / prior_sd**2
    theta = np.zeros(s)
    won = w.sum(axis=1)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        gradient = won - (n * p).sum(axis=1) - precision * theta
        hessian = _precision(n, p, precision)
        step = np.linalg.solve(hessian, gradient)
        theta = theta + step
        if np.abs(step).max() < tol:
            break
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    cov = np.linalg.inv(_precision(n, p, precision))
    return Posterior(theta=theta, cov=(cov + cov.T) / 2, iterations=iterations)


def _precision(n: FloatArray, p: FloatArray, prior_precision: float) -> FloatArray:
    """The negative Hessian of the log-posterior: the comparisons' graph Laplacian weighted by ``n p (1 - p)``,
    plus the prior's precision."""
    weight = n * p * (1 - p)
    laplacian = np.diag(weight.sum(axis=1)) - weight
    return np.asarray(laplacian + prior_precision * np.eye(n.shape[0]), dtype=np.float64)


@dataclass(frozen=True)
class Entrant:
    """One summary of a question: its candidate id, its system's row in the win matrix, its condition."""

    candidate: int
    system: int
    condition: str


def allowed_pairs(
    entrants: Sequence[Entrant], *, asked: Collection[tuple[int, int]], retired: Collection[int], constrained: bool
) -> list[tuple[Entrant, Entrant]]:
    """The pairs a question may ask next: never one asked before (``asked``: candidate id pairs, either order),
    never a retired summary (one of a "neither"), and under ``constrained`` a summary not shown yet only beside one
    of the other condition."""
    asked_pairs = {frozenset(pair) for pair in asked}
    played = {candidate for pair in asked for candidate in pair}
    out = []
    for i, first in enumerate(entrants):
        if first.candidate in retired:
            continue
        for second in entrants[i + 1 :]:
            if second.candidate in retired or frozenset((first.candidate, second.candidate)) in asked_pairs:
                continue
            if constrained and first.condition == second.condition:
                if first.candidate not in played or second.candidate not in played:
                    continue
            out.append((first, second))
    return out


def next_pair(
    entrants: Sequence[Entrant],
    *,
    gains: FloatArray,
    asked: Collection[tuple[int, int]],
    retired: Collection[int],
    constrained: bool,
    rng: random.Random,
    near_tie: float = NEAR_TIE,
) -> tuple[int, int] | None:
    """The candidate ids of the question's next pair: among ``allowed_pairs``, the one whose systems' comparison
    tells the most (``Posterior.gains``), drawn at random among those within ``near_tie`` of the best; None when no
    pair is left."""
    pairs = allowed_pairs(entrants, asked=asked, retired=retired, constrained=constrained)
    if not pairs:
        return None
    scores = [float(gains[a.system, b.system]) for a, b in pairs]
    best = max(scores)
    bar = best * (1 - near_tie) if best > 0 else -math.inf
    first, second = rng.choice([pair for pair, score in zip(pairs, scores, strict=True) if score >= bar])
    return first.candidate, second.candidate


def default_budget(systems: int) -> int:
    """Comparisons per question when the study sets none: as many as a bracket plays, ``systems - 1``."""
    return max(systems - 1, 1)


def max_budget(systems: int) -> int:
    """The most comparisons a question can ask: every pair of its summaries once."""
    return systems * (systems - 1) // 2


def pair_label(number: int) -> str:
    """An adaptive comparison's label: ``pair<k>``, its place among the question's comparisons as shown."""
    return f"pair{number}"
