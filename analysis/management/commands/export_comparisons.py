"""Export a study's comparison table as CSV, JSONL and/or Parquet with a manifest."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.community_exports import export_community
from analysis.exports import export_comparisons
from analysis.management.exporting import add_export_arguments, export_target, writing_into
from analysis.selectors import analysis_frame
from analysis.texts import with_texts
from kernel.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Write comparisons.<fmt> and comparisons.manifest.json for a study into --out DIR."

    def add_arguments(self, parser: Any) -> None:
        add_export_arguments(parser, texts="the query, persona, both summaries and the source titles")
        parser.add_argument(
            "--exclude",
            default=None,
            help="exclusion rule: checks, speed, manual (comma-separated) or none; default: the study's (docs/analysis.md)",
        )
        parser.add_argument(
            "--hf",
            action="store_true",
            help="also write OUT/hf: a Hugging Face datasets folder (Parquet split, dataset card) and croissant.json",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study, formats = export_target(options)
        try:
            frame, exclusion = analysis_frame(study=study, exclude=options["exclude"])
        except ApplicationError as error:
            raise CommandError(f"--exclude: {error.message}") from error
        if options["include_texts"]:
            frame = with_texts(frame, study=study)
        with writing_into(options["out"]):
            manifest = export_comparisons(
                frame, options["out"], formats=formats, study=study.slug, exclusion=exclusion.to_dict()
            )
            if options["hf"]:
                export_community(
                    frame, options["out"] / "hf", study=study.slug, name=study.title, exclusion=exclusion.to_dict()
                )
                self.stdout.write(f"Wrote a Hugging Face dataset folder and croissant.json to {options['out'] / 'hf'}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {manifest.rows} rows as {', '.join(formats)} to {options['out']}"
                + (" with texts." if manifest.includes_texts else ".")
            )
        )
        self.stdout.write(exclusion.sentence())
