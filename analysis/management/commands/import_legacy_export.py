"""Import the paper's own platform export (a zip of users.json and results/annotator-*.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.legacy import LegacyFormatError
from analysis.legacy_import import legacy_import


class Command(BaseCommand):
    help = (
        "Import a legacy export ZIP into a study (created, closed, if it does not exist); re-imports add nothing twice."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("zip", type=Path)
        parser.add_argument("--study", required=True, help="slug of the study to import into")
        parser.add_argument("--title", default=None)
        parser.add_argument("--salt", default="", help="salt for the pseudonymous annotator codes")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["zip"]
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        try:
            result = legacy_import(
                source=path, study_slug=options["study"], title=options["title"], salt=options["salt"]
            )
        except LegacyFormatError as error:
            raise CommandError(f"{path} is not a legacy export: {error}") from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported into '{result.study}': {result.annotators} annotators, {result.queries_added} queries "
                f"({result.queries_skipped} already present), {result.judgments_added} judgments."
            )
        )
        for warning in result.warnings:
            self.stdout.write(f"warning: {warning}")
