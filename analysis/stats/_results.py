"""Shared behaviour of result dataclasses: JSON-safe ``to_dict`` and plain-text tables."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    """Convert numpy scalars, NaN/inf, tuples and nested dataclasses into JSON-safe values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, str | bytes):
        return value.decode() if isinstance(value, bytes) else value
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, Sequence):
        return [json_safe(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        f = float(value)
        return f if math.isfinite(f) else None
    return value


class ResultMixin:
    """``to_dict`` for frozen result dataclasses (NaN becomes ``None``)."""

    def to_dict(self) -> dict[str, Any]:
        out = json_safe(self)
        assert isinstance(out, dict)
        return out


def fmt(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if not math.isfinite(float(value)):
        return "-"
    return f"{float(value):.{digits}f}"


def fmt_p(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width table for ``summary()`` output."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([line, rule, *body])
