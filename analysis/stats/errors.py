"""The one error family the statistics core raises for inputs it cannot analyse."""

from __future__ import annotations


class AnalysisError(ValueError):
    """A comparison table, or a part of it, that a statistic cannot be computed from.

    ``extra`` carries machine-readable detail (column names, counts) for callers that
    map the error to a response or a report note.
    """

    def __init__(self, message: str, *, extra: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra: dict[str, object] = dict(extra or {})


class InsufficientDataError(AnalysisError):
    """The table is well formed but holds too little data for this statistic."""
