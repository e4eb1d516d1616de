"""The one JSONL reader: one JSON object per line, and one error that names the file and line.

Every reader of JSONL files (corpora, rows to score, stress-test rows, shared data sets) goes
through :func:`read_jsonl`; each edge turns :class:`JsonlError` into its own error
(BackendError, CommandError, a CLI's exit message) without rewording the location.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["JsonlError", "iter_jsonl", "parse_line", "read_jsonl"]


class JsonlError(ValueError):
    """A JSONL file cannot be read: ``str()`` is ``"<file> line N: <problem>"`` (or ``"<file>: <problem>"``)."""

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path} line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


def parse_line(line: str | bytes, *, name: str | Path, number: int) -> dict[str, Any] | None:
    """The object on one line, None for a blank line; :class:`JsonlError` for anything else."""
    if not line.strip():
        return None
    try:
        # Without the line break, an unfinished line's error points into the line, not past it.
        row = json.loads(line.rstrip())
    except json.JSONDecodeError as exc:
        raise JsonlError(name, number, f"not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except UnicodeDecodeError as exc:
        raise JsonlError(name, number, f"not valid JSON (not UTF-8: {exc.reason})") from exc
    except RecursionError:
        raise JsonlError(name, number, "not valid JSON (nested too deeply to read)") from None
    if not isinstance(row, dict):
        raise JsonlError(name, number, f"a JSON {type(row).__name__}, not an object")
    return row


def iter_jsonl(lines: Iterable[str | bytes], *, name: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``lines``; ``name`` is the file in errors.

    Raises :class:`JsonlError` at the first line that is not valid JSON (or not UTF-8) or is
    valid JSON but not an object. Line numbers count blank lines, as an editor does.
    """
    for number, line in enumerate(lines, start=1):
        row = parse_line(line, name=name, number=number)
        if row is not None:
            yield number, row


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`iter_jsonl` over a file; a missing or unreadable file is a :class:`JsonlError` too."""
    try:
        # Binary, so that json.loads decodes (UTF-8, with or without a byte-order mark) line by line.
        with Path(path).open("rb") as handle:
            yield from iter_jsonl(handle, name=path)
    except OSError as exc:
        raise JsonlError(path, None, f"cannot read ({exc.strerror or exc})") from exc
