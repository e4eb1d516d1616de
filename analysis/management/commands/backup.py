"""Back up the database and the research files into a folder, with a manifest (docs/backup.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.backup import backup_create
from kernel.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Write database.dump (or database.sqlite3), files/ and backup.json into --out DIR (new or empty)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--out", type=Path, required=True, help="a new or empty folder")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = backup_create(out=options["out"])
        except ApplicationError as error:
            raise CommandError(f"--out: {error.message}" if error.field == "out" else error.message) from error
        counts = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in result.counts.items())
        self.stdout.write(
            self.style.SUCCESS(f"Backed up {counts}; {result.files} files ({result.bytes} bytes) to {result.folder}.")
        )
