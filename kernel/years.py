"""Publication years: one parser for a record's year and for the study's year filters.

A study's retrieval filters give a range as ``from_year`` / ``to_year`` or as ``years``
(``[2018, 2023]`` or ``"2018-2023"``); every retrieval backend reads them with
:func:`year_range`, and importers read a record's year with :func:`parse_year`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["YEAR_FILTER_KEYS", "YearError", "parse_year", "year_range"]

YEAR_FILTER_KEYS = frozenset({"from_year", "to_year", "years"})


class YearError(ValueError):
    """A value that is not a year; ``key`` names the filter (or field) it came from, when known."""

    def __init__(self, value: Any, problem: str, *, key: str | None = None) -> None:
        self.value = value
        self.key = key
        super().__init__(f"year {value!r} {problem}")


def parse_year(value: Any, *, key: str | None = None) -> int | None:
    """``value`` as a year (1..9999), None when it is missing or empty.

    Integers are years as they are; a string is read from its first four characters, so that a
    date ("2019-05-01") gives its year. Booleans and anything else raise :class:`YearError`.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise YearError(value, "is not a year", key=key)
    try:
        year = int(value.strip()[:4]) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise YearError(value, "is not a year", key=key) from None
    if not 0 < year < 10000:
        raise YearError(value, "is out of range", key=key)
    return year


def year_range(filters: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """``(from, to)`` of a study's filters, either end None when open; other keys are ignored.

    ``years`` wins over ``from_year`` / ``to_year``: a list gives its first and last element, a
    string "A-B" gives A and B ("2020" alone is that one year, "-2020" has no lower end).
    """
    filters = filters or {}
    lo, hi = filters.get("from_year"), filters.get("to_year")
    lo_key, hi_key = "from_year", "to_year"
    years = filters.get("years")
    if years:
        lo_key = hi_key = "years"
        if isinstance(years, str):
            a, _, b = years.partition("-")
            lo, hi = a, b or a
        else:
            seq = list(years)
            lo, hi = seq[0], seq[-1]
    return parse_year(lo, key=lo_key), parse_year(hi, key=hi_key)
