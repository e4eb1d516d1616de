"""What PostgreSQL can store: the one check that request input and JSON values are storable.

PostgreSQL's text and jsonb refuse a NUL character (U+0000) and jsonb refuses numbers JSON cannot write
(NaN, infinities); no UTF-8 encoding exists for a lone surrogate (U+D800-U+DFFF), which JSON's
``\\ud800`` escape can produce; and a value nested thousands of levels deep exhausts Python's stack
wherever it is walked. Every edge asks :func:`unstorable_text` or :func:`json_problem` first and answers
400 with the message, instead of failing in the database.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "DB_BIGINT_MAX",
    "DB_INT_MAX",
    "MAX_JSON_DEPTH",
    "json_problem",
    "storable_json",
    "storable_text",
    "unstorable_text",
]

# The largest value of PostgreSQL's `integer` (Django's IntegerField and PositiveIntegerField).
DB_INT_MAX = 2**31 - 1
# A key's column (BigAutoField): a larger number in a URL names no row, and SQLite cannot even bind it.
DB_BIGINT_MAX = 2**63 - 1
# Deeper than any settings object or answer the platform reads; far below Python's recursion limit.
MAX_JSON_DEPTH = 32
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(text: str) -> str | None:
    """Why `text` cannot be stored (a NUL character, a lone surrogate), or None when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000)"
    return f"contains a lone surrogate (\\u{ord(found.group()):04x}), which is not a character"


def json_problem(value: Any, *, where: str = "", max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a parsed JSON value cannot be stored, naming where in it (``options.rows[2]``), or None.

    Walks iteratively, so a value nested deeper than the stack is reported, not a RecursionError.
    """
    stack: list[tuple[str, Any, int]] = [(where, value, 1)]
    while stack:
        path, item, depth = stack.pop()
        label = path or "the value"
        if depth > max_depth and isinstance(item, (dict, list)):
            return f"{label} is nested more than {max_depth} levels deep"
        if isinstance(item, str):
            if problem := unstorable_text(item):
                return f"{label} {problem}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{label} is {item}, which JSON cannot store"
        elif isinstance(item, dict):
            for key, child in item.items():
                if problem := unstorable_text(str(key)):
                    return f"a key of {label} {problem}"
                stack.append((f"{path}.{key}" if path else str(key), child, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{label}[{index}]", child, depth + 1) for index, child in enumerate(item))
    return None


def storable_text(text: str) -> str:
    """``text`` as PostgreSQL can store it: NUL characters dropped, lone surrogates replaced by U+FFFD.

    For text the platform did not ask anyone to type (a model's reply), where refusing it would only
    fail the work that produced it; input a person sends is refused instead (:func:`unstorable_text`).
    """
    if _UNSTORABLE.search(text) is None:
        return text
    return _UNSTORABLE.sub(lambda found: "" if found.group() == "\x00" else "\ufffd", text)


def storable_json(value: Any) -> Any:
    """A parsed JSON value with :func:`storable_text` applied to every string and key."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(key)): storable_json(child) for key, child in value.items()}
    if isinstance(value, list):
        return [storable_json(child) for child in value]
    return value
