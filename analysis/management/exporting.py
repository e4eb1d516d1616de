"""What the export commands share: the study, the formats and the folder asked for, refused before any work."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from analysis.services import EXPORT_FORMATS
from kernel.cli import out_dir_problem
from studies.models import Study


def add_export_arguments(parser: Any, *, texts: str) -> None:
    """``--study``, ``--out``, ``--formats`` and ``--include-texts``, which adds ``texts`` to the export."""
    parser.add_argument("--study", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--formats", default="csv,jsonl,parquet")
    parser.add_argument(
        "--include-texts",
        action="store_true",
        help=f"add {texts} (participants' text: only for a released dataset)",
    )


def export_target(options: dict[str, Any]) -> tuple[Study, list[str]]:
    """The study and formats of ``--study``, ``--formats`` and ``--out``; a CommandError naming what is wrong."""
    study = Study.objects.filter(slug=options["study"]).first()
    if study is None:
        raise CommandError(f"No study with the slug {options['study']!r}.")
    formats = [f.strip() for f in options["formats"].split(",") if f.strip()]
    unknown = sorted(set(formats) - set(EXPORT_FORMATS))
    if unknown:
        raise CommandError(f"Unknown format(s) {', '.join(unknown)}; choose from {', '.join(EXPORT_FORMATS)}.")
    if not formats:  # else only a manifest of no files is written, and reported as a success
        raise CommandError(f"--formats: give at least one of {', '.join(EXPORT_FORMATS)}.")
    problem = out_dir_problem(options["out"])
    if problem:
        raise CommandError(f"--out: {problem}")
    return study, formats


@contextlib.contextmanager
def writing_into(out: Path) -> Iterator[None]:
    """Create ``--out`` and write into it; a folder that cannot be written is a CommandError naming ``--out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as error:
        raise CommandError(f"--out: {error}") from error
