"""Statistics of pairwise human evaluations, computed from a comparison table (no Django here).

Entry point: ``analyze(table, config=AnalysisConfig(...)) -> AnalysisReport``. The building blocks
(win rates, clustered bootstrap, logistic regression, metric agreement, Bradley-Terry) are importable
on their own for notebooks.
"""

from analysis.stats.agreement import (
    AgreementResult,
    MetricAgreement,
    alpha_threshold_sweep,
    metric_agreement,
    metric_votes,
    nominal_alpha,
)
from analysis.stats.alpha import AlphaEstimate, clustered_alpha, krippendorff_alpha
from analysis.stats.analyze import AnalysisReport, analyze
from analysis.stats.annotators import AnnotatorSummary, PageTime, annotator_breakdown, page_times
from analysis.stats.bootstrap import ClusterResampler, bootstrap_ratios
from analysis.stats.bradley_terry import BradleyTerryResult, SystemStrength, bradley_terry
from analysis.stats.config import AnalysisConfig
from analysis.stats.errors import AnalysisError, InsufficientDataError
from analysis.stats.provenance import Provenance, code_version, table_checksum
from analysis.stats.regression import (
    Coefficient,
    LogisticRegressionResult,
    fit_personalization_logit,
    personalization_frame,
)
from analysis.stats.table import COLUMNS, PreparedTable, metric_names, prepare_table, with_derived_columns
from analysis.stats.win_rates import Proportion, WinRate, WinRateTable, win_rates

__all__ = [
    "COLUMNS",
    "AgreementResult",
    "AlphaEstimate",
    "AnalysisConfig",
    "AnalysisError",
    "AnalysisReport",
    "AnnotatorSummary",
    "BradleyTerryResult",
    "ClusterResampler",
    "Coefficient",
    "InsufficientDataError",
    "LogisticRegressionResult",
    "MetricAgreement",
    "PageTime",
    "PreparedTable",
    "Proportion",
    "Provenance",
    "SystemStrength",
    "WinRate",
    "WinRateTable",
    "alpha_threshold_sweep",
    "analyze",
    "annotator_breakdown",
    "bootstrap_ratios",
    "bradley_terry",
    "clustered_alpha",
    "code_version",
    "fit_personalization_logit",
    "krippendorff_alpha",
    "metric_agreement",
    "metric_names",
    "metric_votes",
    "nominal_alpha",
    "page_times",
    "personalization_frame",
    "prepare_table",
    "table_checksum",
    "win_rates",
    "with_derived_columns",
]
