"""Export a study's comparison table as CSV, JSONL and/or Parquet with a manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.exports import export_comparisons
from analysis.selectors import analysis_frame
from analysis.services import EXPORT_FORMATS
from analysis.texts import with_texts
from annotation.models import Study
from kernel.cli import out_dir_problem
from kernel.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Write comparisons.<fmt> and comparisons.manifest.json for a study into --out DIR."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--study", required=True)
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--formats", default="csv,jsonl,parquet")
        parser.add_argument(
            "--include-texts",
            action="store_true",
            help="add the query, persona, both summaries and the source titles (participants' text: only for a "
            "released dataset)",
        )
        parser.add_argument(
            "--exclude",
            default=None,
            help="exclusion rule: checks, speed, manual (comma-separated) or none; default: the study's (docs/analysis.md)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
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
        try:
            frame, exclusion = analysis_frame(study=study, exclude=options["exclude"])
        except ApplicationError as error:
            raise CommandError(f"--exclude: {error.message}") from error
        if options["include_texts"]:
            frame = with_texts(frame, study=study)
        try:
            options["out"].mkdir(parents=True, exist_ok=True)
            manifest = export_comparisons(
                frame, options["out"], formats=formats, study=study.slug, exclusion=exclusion.to_dict()
            )
        except OSError as error:
            raise CommandError(f"--out: {error}") from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {manifest.rows} rows as {', '.join(formats)} to {options['out']}"
                + (" with texts." if manifest.includes_texts else ".")
            )
        )
        self.stdout.write(exclusion.sentence())
