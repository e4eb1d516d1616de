"""The adaptive design's rule, without a database: its Bradley-Terry posterior against choix (an independent
implementation), the pair it asks next, and the within-question rules it shares with the bracket."""

from __future__ import annotations

import random

import choix
import numpy as np
import pytest
from choix.opt import PairwiseFcts

from annotation.adaptive import Entrant, allowed_pairs, next_pair, posterior


def _outcomes(n: int, count: int, seed: int) -> list[tuple[int, int]]:
    """(winner, loser) pairs drawn from planted strengths 0, 0.5, 1, ..."""
    rng = np.random.default_rng(seed)
    theta = np.arange(n) * 0.5
    out = []
    for _ in range(count):
        i, j = rng.choice(n, size=2, replace=False)
        p = 1 / (1 + np.exp(theta[j] - theta[i]))
        out.append((int(i), int(j)) if rng.random() < p else (int(j), int(i)))
    return out


def _wins(n: int, outcomes: list[tuple[int, int]]) -> np.ndarray:
    wins = np.zeros((n, n))
    for winner, loser in outcomes:
        wins[winner, loser] += 1
    return wins


@pytest.mark.parametrize(("n", "count", "seed"), [(4, 30, 0), (8, 120, 1), (12, 40, 2), (16, 400, 3)])
def test_the_posterior_mode_and_covariance_are_choix_s_map_and_its_inverse_hessian(n, count, seed):
    outcomes = _outcomes(n, count, seed)
    fitted = posterior(_wins(n, outcomes), prior_sd=1.0)
    # choix's objective is alpha * sum(theta**2) plus the negative log-likelihood: a N(0, 1 / (2 alpha)) prior,
    # so prior SD 1 is alpha 0.5.
    reference = choix.opt_pairwise(n, outcomes, alpha=0.5, tol=1e-12)
    assert np.allclose(fitted.theta, reference, atol=1e-6)
    hessian = PairwiseFcts(outcomes, 0.5).hessian(np.asarray(reference, dtype=float))
    assert np.allclose(fitted.cov, np.linalg.inv(hessian), atol=1e-6)


def test_one_sided_or_missing_comparisons_still_give_finite_strengths():
    wins = np.zeros((3, 3))
    wins[0, 1] = 20  # system 0 always beat 1; system 2 never compared
    fitted = posterior(wins)
    assert np.isfinite(fitted.theta).all() and np.isfinite(fitted.cov).all()
    assert fitted.theta[0] > fitted.theta[2] > fitted.theta[1]


def test_a_system_never_compared_is_asked_before_a_settled_pair():
    # Systems 0 > 1 > 2 settled by 40-0 records; system 3 never compared.
    wins = np.zeros((4, 4))
    wins[0, 1] = wins[1, 2] = wins[0, 2] = 40
    entrants = [Entrant(candidate=100 + i, system=i, condition="") for i in range(4)]
    gains = posterior(wins).gains()
    for seed in range(20):
        pair = next_pair(entrants, gains=gains, asked=[], retired=set(), constrained=False, rng=random.Random(seed))
        assert pair is not None and 103 in pair


def test_a_close_unsettled_pair_is_asked_before_a_settled_gap():
    # 0 and 1 split 5-5 (close, unsettled); 2 and 3 each lost 30-0 to 0 and 1 (settled far below).
    wins = np.zeros((4, 4))
    wins[0, 1] = wins[1, 0] = 5
    wins[0, 2] = wins[0, 3] = wins[1, 2] = wins[1, 3] = 30
    wins[2, 3] = wins[3, 2] = 15
    gains = posterior(wins).gains()
    assert gains[0, 1] > gains[0, 2] and gains[0, 1] > gains[1, 3]


def test_within_a_question_no_pair_twice_no_retired_summary_and_the_first_round_rule():
    entrants = [Entrant(candidate=c, system=i, condition=cond) for i, (c, cond) in enumerate(
        [(1, "persona"), (2, "generic"), (3, "persona"), (4, "generic")]
    )]  # fmt: skip
    ids = lambda pairs: {frozenset((a.candidate, b.candidate)) for a, b in pairs}  # noqa: E731
    everything = ids(allowed_pairs(entrants, asked=[], retired=set(), constrained=False))
    assert len(everything) == 6
    # Constrained: a summary's first comparison is with the other condition.
    assert ids(allowed_pairs(entrants, asked=[], retired=set(), constrained=True)) == {
        frozenset(p) for p in [(1, 2), (1, 4), (3, 2), (3, 4)]
    }
    # Once 1 and 2 have met, they may meet their own condition; 3 and 4 still only the other (or each other).
    after = ids(allowed_pairs(entrants, asked=[(1, 2)], retired=set(), constrained=True))
    assert frozenset((1, 2)) not in after and frozenset((1, 3)) not in after and frozenset((3, 4)) in after
    assert ids(allowed_pairs(entrants, asked=[(1, 2), (3, 4)], retired=set(), constrained=True)) == {
        frozenset(p) for p in [(1, 3), (1, 4), (2, 3), (2, 4)]
    }
    # "neither" on 1-2 retires both: only 3-4 is left.
    assert ids(allowed_pairs(entrants, asked=[(1, 2)], retired={1, 2}, constrained=False)) == {frozenset((3, 4))}
    gains = posterior(np.zeros((4, 4))).gains()
    done = dict(asked=[(1, 2), (3, 4)], retired={1, 2, 3, 4}, constrained=False, rng=random.Random(0))
    assert next_pair(entrants, gains=gains, **done) is None
