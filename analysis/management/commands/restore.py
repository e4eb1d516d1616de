"""Restore a backup (manage.py backup) into an empty database and the research storage (docs/backup.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.backup import backup_restore
from kernel.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Restore --from DIR into the configured database (which must be empty) and the research storage."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--from", dest="folder", type=Path, required=True, help="a folder written by backup")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = backup_restore(folder=options["folder"])
        except ApplicationError as error:
            raise CommandError(f"--from: {error.message}" if error.field == "from" else error.message) from error
        counts = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in result.counts.items())
        self.stdout.write(self.style.SUCCESS(f"Restored {counts}; {result.files} files ({result.bytes} bytes)."))
        self.stdout.write("Run `manage.py migrate` if this release is newer than the backup's (docs/backup.md).")
