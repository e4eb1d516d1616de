"""How often each inference method rejects a true null: simulated studies without a personalisation effect.

Annotators of ``synthetic.simulate_comparisons`` are independent (each has its own taste for or against
personalised summaries, its own questions and brackets), so one large simulation split into disjoint groups
of ``G`` annotators gives many independent studies of ``G`` annotators at the cost of one. For each study:

- the personalised side's win rate in mixed matches (all brackets, both rounds) is tested against 0.5 by
  the clustered bootstrap and by CR2-t (``bootstrap_ratios``, as ``win_rates`` calls it);
- optionally the logit's intercept (personalisation effect of the reference model in the final; 0 under
  the null by the persona/generic symmetry) by CR1 with normal p-values and by CR2-t
  (``fit_personalization_logit``).

Used by ``bench/small_sample.py`` (the table in docs/analysis.md) and ``tests/analysis/test_small_sample.py``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analysis.stats.bootstrap import ClusterResampler, bootstrap_ratios
from analysis.stats.errors import AnalysisError
from analysis.stats.regression import fit_personalization_logit
from analysis.stats.small_sample import BOOTSTRAP, CR2_T
from analysis.stats.synthetic import SyntheticStudy, simulate_comparisons
from analysis.stats.table import PreparedTable, prepare_table
from analysis.stats.win_rates import build_cells

ALPHA = 0.05
CHUNK_ANNOTATORS = 2_000
"""Annotators simulated per call (bounds memory: about 50,000 comparison rows)."""


@dataclass(frozen=True)
class NullRejections:
    """Rejections at ``alpha`` over ``reps`` null studies of ``n_annotators`` annotators."""

    n_annotators: int
    reps: int
    alpha: float
    bootstrap: int
    cr2_rate: int
    logit_fits: int
    logit_cr1: int
    logit_cr2: int

    @property
    def bootstrap_rate(self) -> float:
        return self.bootstrap / self.reps

    @property
    def cr2_rate_rate(self) -> float:
        return self.cr2_rate / self.reps

    @property
    def logit_cr1_rate(self) -> float:
        return self.logit_cr1 / self.logit_fits if self.logit_fits else math.nan

    @property
    def logit_cr2_rate(self) -> float:
        return self.logit_cr2 / self.logit_fits if self.logit_fits else math.nan


def null_spec(
    n_annotators: int, *, seed: int, taste_sd: float = 0.5, queries: int = 8, effect: float = 0.0
) -> SyntheticStudy:
    """A persona effect of ``effect`` (log-odds, both models; 0: the null); annotators differ in taste (SD
    ``taste_sd`` on the log-odds)."""
    return SyntheticStudy(
        n_annotators=n_annotators,
        queries_per_annotator=queries,
        model_strength={"strong": 0.5, "weak": -0.5},
        persona_effect={"strong": effect, "weak": effect},
        annotator_persona_sd=taste_sd,
        neither_rate=0.05,
        seed=seed,
    )


def _subset(t: PreparedTable, codes: npt.NDArray[np.int64]) -> PreparedTable:
    """The rows of some annotators as a table of its own (annotators recoded 0..len(codes)-1)."""
    rows = np.isin(t.annotator_code, codes)
    recode = np.full(t.n_annotators, -1, dtype=np.int64)
    recode[codes] = np.arange(len(codes))
    arrays = {
        name: getattr(t, name)[rows]
        for name in (
            "stage",
            "bracket_pair",
            "choice",
            "left_system",
            "right_system",
            "left_model",
            "right_model",
            "left_condition",
            "right_condition",
            "left_won",
            "right_won",
            "neither",
            "tie",
        )
    }
    return PreparedTable(
        frame=t.frame.iloc[np.flatnonzero(rows)].reset_index(drop=True),
        annotators=tuple(t.annotators[c] for c in codes),
        annotator_code=recode[t.annotator_code[rows]],
        **arrays,
    )


def null_studies(
    n_annotators: int, reps: int, *, seed: int = 0, taste_sd: float = 0.5, queries: int = 8, effect: float = 0.0
) -> Iterator[tuple[PreparedTable, int]]:
    """``reps`` independent studies of ``n_annotators`` annotators each, as (table, first study index); null
    studies unless ``effect`` is given (``analysis.stats.power`` uses them so)."""
    per_chunk = max(1, CHUNK_ANNOTATORS // n_annotators)
    done = 0
    chunk = 0
    while done < reps:
        k = min(per_chunk, reps - done)
        spec = null_spec(
            k * n_annotators,
            seed=seed * 7_919 + n_annotators * 104_729 + chunk,
            taste_sd=taste_sd,
            queries=queries,
            effect=effect,
        )
        yield prepare_table(simulate_comparisons(spec)), done
        done += k
        chunk += 1


def persona_cell_sums(t: PreparedTable, g: int, k: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The personalised side's wins and decided mixed matches (all brackets, all stages) of ``k`` studies of ``g``
    annotators each in one table: annotators of study j are codes j*g .. j*g+g-1, so the per-annotator sums
    form a (g, k) matrix, one column a study."""
    cell = next(
        c
        for c in build_cells(t)
        if c.statistic == "personalized_vs_generic" and c.group == "all brackets" and c.stage == "all"
    )
    wins = t.per_annotator(cell.wins)[: k * g].reshape(k, g).T
    decided = wins + t.per_annotator(cell.losses)[: k * g].reshape(k, g).T
    return wins, decided


def null_rejections(
    n_annotators: int,
    *,
    reps: int,
    resamples: int = 999,
    seed: int = 0,
    taste_sd: float = 0.5,
    queries: int = 8,
    logit: bool = True,
    logit_cr1: bool = True,
    alpha: float = ALPHA,
) -> NullRejections:
    """Simulate ``reps`` null studies and count each method's rejections at ``alpha``.

    ``logit`` fits the logit (the slow part); ``logit_cr1=False`` skips the CR1 fit (``logit_cr1`` stays 0)."""
    g = n_annotators
    boot = cr2 = fits = l_cr1 = l_cr2 = 0
    for t, first in null_studies(g, reps, seed=seed, taste_sd=taste_sd, queries=queries):
        k = min(t.n_annotators // g, reps - first)
        wins, decided = persona_cell_sums(t, g, k)
        resampler = ClusterResampler.draw(g, n_resamples=resamples, seed=seed + first)
        for method in (BOOTSTRAP, CR2_T):
            p = bootstrap_ratios(
                wins, decided, resampler=resampler, null=np.full(k, 0.5), confidence_level=1 - alpha, method=method
            ).p_value
            rejected = int(np.sum(np.isfinite(p) & (p < alpha)))
            if method == BOOTSTRAP:
                boot += rejected
            else:
                cr2 += rejected
        if not logit:
            continue
        for j in range(k):
            study = _subset(t, np.arange(j * g, (j + 1) * g, dtype=np.int64))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    new = fit_personalization_logit(study, small_sample=True).coefficient("Intercept")
                    old_p = fit_personalization_logit(study).coefficient("Intercept").p_value if logit_cr1 else 1.0
            except AnalysisError:
                continue  # e.g. a constant outcome in a tiny study: no logit, counted as not fitted
            if math.isfinite(old_p) and math.isfinite(new.p_value):
                fits += 1
                l_cr1 += old_p < alpha
                l_cr2 += new.p_value < alpha
    return NullRejections(g, reps, alpha, boot, cr2, fits, l_cr1, l_cr2)
