"""Cells that are safe to open in a spreadsheet: a text a spreadsheet would run as a formula is written with a
leading apostrophe, and read back without it. Used by every CSV the platform writes (the comparison and summary
exports, the audit log)."""

from __future__ import annotations

import re
from typing import Any

# defusedcsv's rules (OWASP's CSV injection advice): a cell starting with = + - @ | % is escaped unless it is
# a plain number; widened to what spreadsheets also run: those characters after leading whitespace, their
# full-width forms (which CJK input methods type and spreadsheets read as the ASCII ones), and a cell starting
# with tab or carriage return. defusedcsv wraps the csv module's writer; the comparison exports
# write with pyarrow and apply them to the frame (analysis/exports.py); tests/analysis/test_exports.py holds
# them to defusedcsv's.
FORMULA_TRIGGERS = "=+-@|%\uff1d\uff0b\uff0d\uff20\uff5c\uff05"
FORMULA = rf"^(?:[\t\r]|\s*[{re.escape(FORMULA_TRIGGERS)}])"
PLAIN_NUMBER = r"^-?[0-9,.]+$"  # defusedcsv's: -1.5 stays a number a spreadsheet can add up
ESCAPE = "'"


def is_formula_like(text: str) -> bool:
    """Would a spreadsheet run this cell as a formula (or a DDE command)?"""
    return re.match(FORMULA, text) is not None and re.match(PLAIN_NUMBER, text) is None


def _needs_escape(text: str) -> bool:
    # Apostrophes already in front count as ours on reading, so a genuine "'=x" is escaped too ("''=x"):
    # reading back removes exactly one, and no genuine value is ever turned into a formula or changed.
    return is_formula_like(text.lstrip(ESCAPE))


def neutralize_cell(value: Any) -> Any:
    """Prefix a string that a spreadsheet would evaluate as a formula with an apostrophe."""
    if isinstance(value, str) and _needs_escape(value):
        return ESCAPE + value
    return value


def restore_cell(value: Any) -> Any:
    """Undo ``neutralize_cell`` when reading our own CSV back."""
    if isinstance(value, str) and value.startswith(ESCAPE) and _needs_escape(value[1:]):
        return value[1:]
    return value
