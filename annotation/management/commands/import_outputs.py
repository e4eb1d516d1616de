"""Import a pre-written study's items and one output per study system from a CSV or JSONL file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.services.prewritten import FORMATS, Columns, prewritten_import
from kernel.exceptions import ApplicationError
from studies.models import Study


class Command(BaseCommand):
    help = (
        "Import items and pre-written outputs into a study: one row per item and system (docs/backends.md, "
        "'Pre-written studies'). All or nothing; the same file again changes nothing. Exit 2 naming each bad "
        "line and field."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "args", nargs="+", metavar="[SLUG] FILE", help="The study's slug (or --study) and the file."
        )
        parser.add_argument("--study", help="The study's slug.")
        parser.add_argument("--format", choices=FORMATS, help="csv or jsonl (default: from the file's extension).")
        defaults = Columns()
        for name in ("item", "system", "output", "source", "documents", "title", "prompt"):
            parser.add_argument(
                f"--{name}-column", default=getattr(defaults, name), help=f"default: {getattr(defaults, name)}"
            )

    def handle(self, *args: str, **options: Any) -> None:
        slug = options["study"]
        if slug is None and len(args) == 2:
            slug, file = args
        elif slug is not None and len(args) == 1:
            (file,) = args
        else:
            raise CommandError("Give the study's slug (or --study SLUG) and one file.", returncode=2)
        path = Path(file)
        format = options["format"] or path.suffix.lower().lstrip(".")
        if format not in FORMATS:
            raise CommandError(f"{path}: say --format csv or jsonl (the extension {path.suffix!r} says neither).", 2)
        study = Study.objects.filter(slug=slug).first()
        if study is None:
            raise CommandError(f"No study with the slug {slug!r}.", returncode=2)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise CommandError(f"{path}: cannot read ({error.strerror or error})", returncode=2) from error
        columns = Columns(**{name: options[f"{name}_column"] for name in Columns.__dataclass_fields__})
        try:
            result = prewritten_import(study=study, data=data, format=format, columns=columns, name=str(path))
        except ApplicationError as error:
            problems = error.extra.get("problems")
            if problems:
                for problem in problems:
                    where = f"line {problem['line']}" if problem["line"] is not None else "file"
                    field = f", field {problem['field']}" if problem["field"] else ""
                    self.stderr.write(f"{path} {where}{field}: {problem['message']}")
                more = error.extra.get("count", len(problems)) - len(problems)
                if more:
                    self.stderr.write(f"... and {more} more")
                raise CommandError("nothing was imported", returncode=2) from error
            raise CommandError(error.message, returncode=2) from error
        self.stdout.write(f"{study.slug}: {result.summary()}" + ("" if result.changed else " Nothing changed."))
