"""Settings of one analysis run: seed, resamples, reference levels, metric thresholds and families."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

from analysis.stats._results import json_safe
from analysis.stats.agreement import AGREEMENT_LEVELS, DEFAULT_SD_FRACTION
from analysis.stats.multiplicity import HOLM, MULTIPLICITY_CHOICES
from analysis.stats.regression import FACTORS, check_predictors
from analysis.stats.small_sample import DEFAULT_SMALL_SAMPLE_BELOW, INFERENCE_CHOICES

DEFAULT_SEED = 20_251_130
DEFAULT_RESAMPLES = 2_000


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A finite real number (a JSON number; ``True`` is not one, nor NaN or infinity)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


# Settings come from JSON files (--config) and job options as often as from Python: a wrong type is refused
# by name instead of failing deep inside the statistics, or, worse, being read as truthy ("false" as a
# direction) or never comparing (a NaN threshold).
_SCALAR_CHECKS: dict[str, tuple[Any, str]] = {
    "seed": (_is_int, "a whole number"),
    "n_resamples": (_is_int, "a whole number"),
    "confidence_level": (_is_number, "a number"),
    "persona_condition": (lambda v: isinstance(v, str), "text"),
    "generic_condition": (lambda v: isinstance(v, str), "text"),
    "regression_predictors": (
        lambda v: v is None or (isinstance(v, list | tuple) and all(isinstance(t, str) for t in v)),
        "a list of terms or null",
    ),
    "default_metric_threshold": (lambda v: v is None or _is_number(v), "a number or null"),
    "threshold_sd_fraction": (_is_number, "a number"),
    "use_metric_registry": (lambda v: isinstance(v, bool), "true or false"),
    "bradley_terry_pseudo_wins": (_is_number, "a number"),
    "threshold_sweep_points": (_is_int, "a whole number"),
    "inference": (lambda v: isinstance(v, str), "text"),
    "agreement_level": (lambda v: isinstance(v, str), "text"),
    "small_sample_below": (_is_int, "a whole number"),
}
_MAPPING_CHECKS: dict[str, tuple[Any, str]] = {
    "reference_levels": (lambda v: isinstance(v, str), "text"),
    "metric_thresholds": (_is_number, "a number"),
    "metric_families": (lambda v: isinstance(v, str), "text"),
    "higher_is_better": (lambda v: isinstance(v, bool), "true or false"),
}


NAME = re.compile(r"\w[\w .:/@+-]{0,199}")
"""What a setting that names something (a condition, model, stage, metric, family) may hold: a model's name such
as ``Qwen/Qwen2.5-7B-Instruct`` or ``llama3:8b`` passes; quotes, brackets, braces and control characters, which
no such name needs and every snippet of code does, are refused."""
_NAMED = ("persona_condition", "generic_condition")
_NAMED_VALUES = ("reference_levels", "metric_families")


def _check_name(setting: str, value: str) -> None:
    if not NAME.fullmatch(value):
        raise ValueError(
            f"{setting} must be a name (letters, digits, spaces and . : / @ + - _, at most 200), not {value[:80]!r}"
        )


def _check_types(config: Any) -> None:
    for name, (ok, expected) in _SCALAR_CHECKS.items():
        value = getattr(config, name)
        if not ok(value):
            raise ValueError(f"{name} must be {expected}, not {value!r}")
    for name in _NAMED:
        _check_name(name, getattr(config, name))
    for name, (ok, expected) in _MAPPING_CHECKS.items():
        value = getattr(config, name)
        if not isinstance(value, Mapping):
            raise ValueError(f"{name} must be an object mapping names to {expected}, not {value!r}")
        for key, item in value.items():
            if not isinstance(key, str) or not ok(item):
                raise ValueError(f"{name}[{key!r}] must be {expected}, not {item!r}")
            _check_name(f"{name} key", key)
            if name in _NAMED_VALUES:
                _check_name(f"{name}[{key!r}]", item)


@dataclass(frozen=True)
class AnalysisConfig:
    """Everything that changes the numbers of an analysis; stored in every report.

    ``reference_levels`` keys: ``model_personalized``, ``model_generic``, ``round_stage`` (unset ones
    default to the model that wins most and the final round). ``regression_predictors`` lists the logit's
    terms from a closed set (``regression.check_predictors``: those keys, and two of them joined by ``:``);
    null means all three. ``metric_thresholds`` maps metric -> similarity
    threshold; the others use ``default_metric_threshold`` when set, else ``threshold_sd_fraction`` x
    the metric's pooled standard deviation over the candidates. Family and direction come from the
    metric registry (``use_metric_registry``); ``metric_families`` (metric -> family name) and
    ``higher_is_better`` (metric -> bool) override it.
    """

    seed: int = DEFAULT_SEED
    n_resamples: int = DEFAULT_RESAMPLES
    confidence_level: float = 0.95
    persona_condition: str = "persona"
    generic_condition: str = "generic"
    reference_levels: Mapping[str, str] = field(default_factory=dict)
    regression_predictors: tuple[str, ...] | None = None
    metric_thresholds: Mapping[str, float] = field(default_factory=dict)
    default_metric_threshold: float | None = None
    threshold_sd_fraction: float = DEFAULT_SD_FRACTION
    use_metric_registry: bool = True
    metric_families: Mapping[str, str] = field(default_factory=dict)
    higher_is_better: Mapping[str, bool] = field(default_factory=dict)
    bradley_terry_pseudo_wins: float = 0.0
    threshold_sweep_points: int = 11
    """Alpha at this many thresholds per metric, 0 to 1 pooled SD (0 = off; see ``alpha_threshold_sweep``)."""
    inference: str = "auto"
    """Win-rate and logit inference: ``auto`` (CR2 with t(G-1) below ``small_sample_below`` annotators,
    the clustered bootstrap and CR1 from there on), ``small-sample`` (always CR2-t) or ``standard``."""
    small_sample_below: int = DEFAULT_SMALL_SAMPLE_BELOW
    """Fewer annotators than this count as few: small-sample inference (under ``auto``) and a warning."""
    agreement_level: str = "nominal"
    """Metric-human alpha: ``nominal`` (left, right, neither as categories; the papers' choice) or ``ordinal``
    (left < neither < right: a "neither" against a side is half a disagreement; ``agreement.AGREEMENT_LEVELS``)."""
    multiplicity: str = HOLM
    """How each family of tests' p-values are adjusted beside the raw ones: ``holm`` (family-wise error rate),
    ``bh`` (Benjamini-Hochberg, false discovery rate) or ``none`` (docs/analysis.md, "Multiple testing")."""

    def __post_init__(self) -> None:
        _check_types(self)
        for name in ("reference_levels", "metric_thresholds", "metric_families", "higher_is_better"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if self.regression_predictors is not None:
            object.__setattr__(self, "regression_predictors", check_predictors(self.regression_predictors))
        if unknown := sorted(set(self.reference_levels) - set(FACTORS)):
            raise ValueError(f"reference_levels: unknown factor {unknown[0]!r}; the factors are {', '.join(FACTORS)}")
        if self.seed < 0:  # numpy's own refusal names neither the setting nor --seed
            raise ValueError(f"seed must be a non-negative whole number, not {self.seed}")
        if self.n_resamples < 1:
            raise ValueError("n_resamples must be at least 1")
        if not 0.5 <= self.confidence_level < 1.0:
            raise ValueError("confidence_level must be in [0.5, 1)")
        if self.inference not in INFERENCE_CHOICES:
            raise ValueError(f"inference must be one of {', '.join(INFERENCE_CHOICES)}, not {self.inference!r}")
        if self.agreement_level not in AGREEMENT_LEVELS:
            raise ValueError(
                f"agreement_level must be one of {', '.join(AGREEMENT_LEVELS)}, not {self.agreement_level!r}"
            )
        if self.small_sample_below < 2:
            raise ValueError("small_sample_below must be at least 2")
        if (self.default_metric_threshold is not None and self.default_metric_threshold < 0) or any(
            v < 0 for v in self.metric_thresholds.values()
        ):
            raise ValueError("metric thresholds must be non-negative")
        if self.threshold_sd_fraction < 0:
            raise ValueError("threshold_sd_fraction must be non-negative")
        if self.threshold_sweep_points < 0:
            raise ValueError("threshold_sweep_points must be non-negative")
        if self.bradley_terry_pseudo_wins < 0:
            raise ValueError("bradley_terry_pseudo_wins must be non-negative")
        if not isinstance(self.multiplicity, str) or self.multiplicity not in MULTIPLICITY_CHOICES:
            raise ValueError(
                f"multiplicity must be one of {', '.join(MULTIPLICITY_CHOICES)}, not {self.multiplicity!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = json_safe({f.name: getattr(self, f.name) for f in fields(self)})
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnalysisConfig:
        """Build from JSON-like data; unknown keys are an error so typos do not pass silently."""
        if "regression_formula" in data:
            # A free formula reached patsy, which evaluates its terms as Python: text from a researcher ran as
            # code in the worker. The structured list replaces it (docs/analysis.md, docs/permissions.md).
            raise ValueError(
                "regression_formula is no longer accepted (a formula is evaluated as code); "
                f"list the terms in regression_predictors instead, from {', '.join(FACTORS)} and their 'a:b' pairs"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown analysis settings: {', '.join(unknown)}")
        return cls(**dict(data))
