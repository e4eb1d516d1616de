"""What the command lines share about their input, refused before any work (no Django here)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path


def at_least_one(text: str) -> int:
    """An argparse type for a count that must be at least 1 (0 or less would quietly mean something else)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def not_blank(what_instead: str) -> Callable[[str], str]:
    """An argparse type for a text that must not be empty or only spaces (a password nobody could type, say);
    ``what_instead`` says what leaving the option out does."""

    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must not be empty ({what_instead})")
        return text

    return check


def out_dir_problem(out_dir: Path) -> str | None:
    """Why `out_dir` cannot be the folder a command writes into, or None: asked before the work runs, so a
    wrong `--out` costs nothing and leaves nothing half-written."""
    for path in (out_dir, *out_dir.parents):
        if path.exists():
            if not path.is_dir():
                return f"{path} exists and is not a folder"
            if not os.access(path, os.W_OK | os.X_OK):
                return f"cannot write into {path}"
            return None
    return None
