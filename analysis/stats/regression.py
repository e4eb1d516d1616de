"""Logistic regression of ``personalized_won`` with annotator-clustered (cluster-robust) standard errors.

Restricted to decided comparisons with one personalised and one generic side; predictors are the
model on each side and the round stage, each categorical with a chosen reference level.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from analysis.stats._results import ResultMixin, fmt, fmt_p, text_table
from analysis.stats.errors import AnalysisError, InsufficientDataError
from analysis.stats.small_sample import CR1_NORMAL, CR2_T, cluster_vcov
from analysis.stats.table import PreparedTable

FACTORS: tuple[str, ...] = ("model_personalized", "model_generic", "round_stage")
"""The predictors a logit may use, each categorical with one reference level (treatment coding)."""
SEPARATION_VARIANCE = 1e-8
"""A fitted ``mu (1 - mu)`` at or below this is a fitted probability within 1e-8 of 0 or 1: perfect separation."""


@dataclass(frozen=True)
class Coefficient(ResultMixin):
    """One model term on the log-odds scale and as an odds ratio."""

    term: str
    estimate: float
    std_error: float
    z: float
    p_value: float
    odds_ratio: float
    ci_low: float
    ci_high: float
    df: int | None = None
    """Degrees of freedom of the t reference distribution (CR2-t); ``None``: normal (``z`` is a z statistic)."""


@dataclass(frozen=True)
class LogisticRegressionResult(ResultMixin):
    """A fitted logit with cluster-robust errors; ``ci_*`` are odds-ratio intervals."""

    formula: str
    reference_levels: Mapping[str, str]
    coefficients: tuple[Coefficient, ...]
    n_obs: int
    n_clusters: int
    n_events: int
    confidence_level: float
    cov_type: str
    log_likelihood: float
    converged: bool
    notes: tuple[str, ...] = field(default=())
    method: str = CR1_NORMAL
    """``cr1-normal`` (statsmodels' cluster covariance, normal p-values) or ``cr2-t`` (CR2, t(G-1))."""

    def coefficient(self, term: str) -> Coefficient:
        for c in self.coefficients:
            if c.term == term:
                return c
        raise KeyError(term)

    def conf_int(self) -> pd.DataFrame:
        return pd.DataFrame(
            {"ci_low": [c.ci_low for c in self.coefficients], "ci_high": [c.ci_high for c in self.coefficients]},
            index=[c.term for c in self.coefficients],
        )

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.to_dict() for c in self.coefficients])

    def summary(self) -> str:
        level = f"{self.confidence_level:.0%}"
        rows = [
            [
                c.term,
                fmt(c.odds_ratio, 2),
                f"[{fmt(c.ci_low, 2)}, {fmt(c.ci_high, 2)}]",
                fmt(c.estimate),
                fmt(c.std_error),
                fmt_p(c.p_value),
            ]
            for c in self.coefficients
        ]
        refs = ", ".join(f"{k}={v}" for k, v in self.reference_levels.items())
        head = (
            f"Logit: {self.formula}\n"
            f"N = {self.n_obs} comparisons ({self.n_events} personalised wins) from {self.n_clusters} annotators; "
            f"SEs clustered by annotator ({self.cov_type}); reference levels: {refs}"
        )
        return head + "\n" + text_table(["term", "OR", f"{level} CI", "log-odds", "SE", "p"], rows)


def personalization_frame(t: PreparedTable, *, persona: str = "persona", generic: str = "generic") -> pd.DataFrame:
    """One row per decided comparison with one personalised and one generic side."""
    left_p = (t.left_condition == persona) & (t.right_condition == generic)
    right_p = (t.right_condition == persona) & (t.left_condition == generic)
    rows = np.asarray((left_p | right_p) & t.decided, dtype=np.bool_)
    lp = np.asarray(left_p, dtype=np.bool_)[rows]
    frame = pd.DataFrame(
        {
            "personalized_won": np.where(lp, t.left_won[rows], t.right_won[rows]).astype(np.int64),
            "model_personalized": np.where(lp, t.left_model[rows], t.right_model[rows]).astype(str),
            "model_generic": np.where(lp, t.right_model[rows], t.left_model[rows]).astype(str),
            "round_stage": t.stage[rows].astype(str),
            "annotator": np.asarray(t.annotators, dtype=object)[t.annotator_code[rows]].astype(str),
        }
    )
    for factor in FACTORS:
        frame[factor] = pd.Categorical(frame[factor])
    return frame


def default_reference_levels(frame: pd.DataFrame) -> dict[str, str]:
    """References when none are chosen: the model winning most often overall (the paper's choice of the
    stronger model), ties broken by name, and the final round."""
    wins: dict[str, int] = {}
    won = frame["personalized_won"].to_numpy() == 1
    for model in pd.unique(pd.concat([frame["model_personalized"], frame["model_generic"]])):
        m = str(model)
        wins[m] = int(((frame["model_personalized"] == m) & won).sum() + ((frame["model_generic"] == m) & ~won).sum())
    best = sorted(wins, key=lambda m: (-wins[m], m))[0] if wins else ""
    stages = set(frame["round_stage"])
    return {
        "model_personalized": best,
        "model_generic": best,
        "round_stage": "final" if "final" in stages else (sorted(stages)[0] if stages else "final"),
    }


def check_predictors(predictors: Sequence[str]) -> tuple[str, ...]:
    """The logit's terms, checked against the closed set: a factor of ``FACTORS``, or two of them joined by ``:``
    (their interaction). Raises ``ValueError`` naming the first term that is not one; nothing is ever evaluated."""
    if isinstance(predictors, str) or not isinstance(predictors, Sequence):
        raise ValueError(f"regression_predictors must be a list of terms, not {predictors!r}")
    terms: list[str] = []
    for term in predictors:
        parts = term.split(":") if isinstance(term, str) else [term]
        if not 1 <= len(parts) <= 2 or any(p not in FACTORS for p in parts) or len(set(parts)) != len(parts):
            raise ValueError(
                f"regression_predictors: {term!r} is not a term; use {', '.join(FACTORS)}, "
                "or two of them joined by ':' for their interaction"
            )
        canonical = ":".join(sorted(parts, key=FACTORS.index))
        if canonical in terms:
            raise ValueError(f"regression_predictors: {term!r} is given twice")
        terms.append(canonical)
    return tuple(terms)


def _indicators(frame: pd.DataFrame, factor: str, reference: str) -> dict[str, npt.NDArray[np.float64]]:
    """One 0/1 column per non-reference level (sorted), named ``factor[level]``."""
    values = frame[factor].astype(str).to_numpy()
    return {f"{factor}[{level}]": (values == level).astype(np.float64) for level in sorted(set(values) - {reference})}


def _treatment_design(
    frame: pd.DataFrame, terms: Sequence[str], refs: Mapping[str, str]
) -> tuple[pd.DataFrame, list[str]]:
    """Intercept plus, per term, one indicator per non-reference level (treatment coding) or, for ``a:b``, the
    products of the two factors' indicators. A product that no row takes (a combination never observed) is left
    out, and named in the notes returned beside the design."""
    columns: dict[str, npt.NDArray[np.float64]] = {"Intercept": np.ones(len(frame))}
    empty: list[str] = []
    for term in terms:
        parts = term.split(":")
        if len(parts) == 1:
            columns.update(_indicators(frame, term, refs[term]))
            continue
        first, second = (_indicators(frame, p, refs[p]) for p in parts)
        for name_a, col_a in first.items():
            for name_b, col_b in second.items():
                product = col_a * col_b
                if product.any():
                    columns[f"{name_a}:{name_b}"] = product
                else:
                    empty.append(f"{name_a}:{name_b}")
    notes = [f"interaction {name} never observed; term left out" for name in empty]
    return pd.DataFrame(columns), notes


def describe_model(terms: Sequence[str]) -> str:
    """The model in the notation papers use, for reports (a description; nothing reads it back)."""
    return "personalized_won ~ " + (" + ".join(terms) if terms else "1")


def _separated(fit: Any) -> bool:
    """Some fitted probability within 1e-8 of 0 or 1: rows predicted perfectly (a level that always or never
    wins), odds ratios unbounded."""
    mu = np.asarray(fit.mu, dtype=np.float64)
    return not bool(np.all(mu * (1.0 - mu) > SEPARATION_VARIANCE))


def fit_personalization_logit(
    t: PreparedTable,
    *,
    reference_levels: Mapping[str, str] | None = None,
    predictors: Sequence[str] | None = None,
    confidence_level: float = 0.95,
    persona: str = "persona",
    generic: str = "generic",
    small_sample: bool = False,
) -> LogisticRegressionResult:
    """Fit ``personalized_won`` by statsmodels GLM (binomial, logit) with ``cov_type="cluster"`` by annotator.

    ``predictors`` names the terms (``check_predictors``: factors of ``FACTORS`` and their two-way
    interactions), each treatment-coded against its reference level; the design is built here, column by column,
    so no text is ever parsed or evaluated as a formula. ``None``: every factor. A factor observed at a single
    level is dropped (and noted) rather than failing, with the interactions that include it.
    ``small_sample`` replaces statsmodels' CR1 errors and normal p-values by CR2 errors (working-weights
    hat matrix, ``small_sample.cluster_vcov``) with t(G-1) p-values and intervals.
    """
    # statsmodels takes seconds to import; only the regression needs it.
    import statsmodels.api as sm

    terms = check_predictors(FACTORS if predictors is None else predictors)

    frame = personalization_frame(t, persona=persona, generic=generic)
    if len(frame) == 0:
        raise InsufficientDataError("no decided comparisons between a personalised and a generic side")
    n_clusters = int(frame["annotator"].nunique())
    if n_clusters < 2:
        raise InsufficientDataError(
            "cluster-robust standard errors need comparisons from at least 2 annotators",
            extra={"annotators": n_clusters},
        )
    if frame["personalized_won"].nunique() < 2:
        raise InsufficientDataError("personalized_won takes a single value; the logit has no finite estimate")
    refs = default_reference_levels(frame)
    refs.update({k: str(v) for k, v in (reference_levels or {}).items()})
    notes: list[str] = []
    for factor in FACTORS:
        observed = set(frame[factor])
        if refs[factor] not in observed and len(observed) > 1:
            raise AnalysisError(
                f"reference level {refs[factor]!r} of {factor} does not occur; observed: {', '.join(sorted(observed))}",
                extra={"factor": factor, "observed": sorted(observed)},
            )
    single = [f for f in FACTORS if frame[f].nunique() < 2 and any(f in t.split(":") for t in terms)]
    notes.extend(f"{f} has a single level ({frame[f].iloc[0]}); term dropped" for f in single)
    used = [t for t in terms if not set(t.split(":")) & set(single)]
    design, design_notes = _treatment_design(frame, used, refs)
    notes.extend(design_notes)
    spec = describe_model(used)

    groups = pd.factorize(frame["annotator"])[0]
    # The cluster sandwich inverts the Hessian, which separation makes (nearly) singular: whether LAPACK
    # calls it singular depends on the machine, so such a fit is decided from its fitted probabilities.
    hessian_singular = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = sm.GLM(frame["personalized_won"].to_numpy(dtype=np.float64), design, family=sm.families.Binomial())
            try:
                fit: Any = model.fit(cov_type="cluster", cov_kwds={"groups": groups})
            except np.linalg.LinAlgError:
                fit = model.fit()
                if not _separated(fit):
                    raise
                hessian_singular = True
    except Exception as exc:  # statsmodels raises many types; report them as one domain error
        raise AnalysisError(f"logistic regression failed: {exc}", extra={"formula": spec}) from exc

    notes.extend(dict.fromkeys(f"statsmodels warned: {w.category.__name__}: {w.message}" for w in caught))
    params = fit.params
    if small_sample:
        df: int | None = n_clusters - 1
        mu = np.asarray(fit.mu, dtype=np.float64)
        y = np.asarray(fit.model.endog, dtype=np.float64)
        v = mu * (1.0 - mu)  # the logit's variance function, equal to dmu/deta
        x = np.asarray(fit.model.exog, dtype=np.float64)
        if _separated(fit):
            # A fitted probability of 0 or 1: some rows are predicted perfectly (a system that always or never
            # wins against a level), the odds ratios are unbounded and CR2's working weights 1/V infinite.
            raise AnalysisError(
                "fitted probabilities of 0 or 1 (perfect separation: some level always or never wins), so odds "
                "ratios are unbounded and small-sample standard errors undefined",
                extra={"formula": spec},
            )
        try:
            with np.errstate(divide="ignore", invalid="ignore"):
                vcov = cluster_vcov(v[:, None] * x, y - mu, groups, weights=1.0 / v)
        except np.linalg.LinAlgError as exc:
            raise AnalysisError(f"small-sample covariance failed: {exc}") from exc
        bse = pd.Series(np.sqrt(np.clip(np.diag(vcov), 0.0, None)), index=params.index)
        stat = params / bse
        pvalues = pd.Series(2.0 * sps.t.sf(np.abs(stat.to_numpy()), df), index=params.index)
        crit = float(sps.t.ppf(0.5 + confidence_level / 2, df))
    elif hessian_singular:
        # Separated, and the sandwich undefined on this machine: the standard errors are unbounded, which is
        # what a machine that could invert the Hessian reports too (a huge error: z near 0, p near 1).
        df = None
        bse = pd.Series(np.inf, index=params.index)
        stat, pvalues = params * 0.0, pd.Series(1.0, index=params.index)
        crit = float(sps.norm.ppf(0.5 + confidence_level / 2))
    else:
        df = None
        bse, stat, pvalues = fit.bse, fit.tvalues, fit.pvalues
        crit = float(sps.norm.ppf(0.5 + confidence_level / 2))
    coefs = []
    # Under (quasi-)separation an estimate or its SE is huge and exp() overflows to inf: an unbounded odds
    # ratio or interval, which is the honest value (the note below says why), not a warning to print.
    with np.errstate(over="ignore"):
        for name in params.index:
            b = float(params[name])
            se = float(bse[name])
            coefs.append(
                Coefficient(
                    term=str(name),
                    estimate=b,
                    std_error=se,
                    z=float(stat[name]),
                    p_value=float(pvalues[name]),
                    odds_ratio=float(np.exp(b)),
                    ci_low=float(np.exp(b - crit * se)),
                    ci_high=float(np.exp(b + crit * se)),
                    df=df,
                )
            )
    if not np.all(np.isfinite([c.std_error for c in coefs])) or max(abs(c.estimate) for c in coefs) > 15:
        notes.append("estimates are extreme or SEs undefined: likely (quasi-)separation; read with care")
    return LogisticRegressionResult(
        formula=spec,
        reference_levels=dict(refs),
        coefficients=tuple(coefs),
        n_obs=len(frame),
        n_clusters=n_clusters,
        n_events=int(frame["personalized_won"].sum()),
        confidence_level=confidence_level,
        cov_type=f"CR2 (annotator), t({n_clusters - 1})" if small_sample else "CR1 (annotator), normal",
        log_likelihood=float(fit.llf),
        converged=bool(getattr(fit, "converged", True)),
        notes=tuple(notes),
        method=CR2_T if small_sample else CR1_NORMAL,
    )
