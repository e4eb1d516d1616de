"""Export a study's summary table (one row per candidate: how it was generated) beside its comparison table."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from analysis.exports import export_summaries
from analysis.management.exporting import add_export_arguments, export_target, writing_into
from analysis.selectors import summary_frame


class Command(BaseCommand):
    help = "Write summaries.<fmt> and summaries.manifest.json for a study into --out DIR."

    def add_arguments(self, parser: Any) -> None:
        add_export_arguments(parser, texts="each summary's text")

    def handle(self, *args: Any, **options: Any) -> None:
        study, formats = export_target(options)
        frame = summary_frame(study=study, include_texts=options["include_texts"])
        with writing_into(options["out"]):
            manifest = export_summaries(frame, options["out"], formats=formats, study=study.slug)
        truncated = int(frame["truncated"].sum())
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {manifest.rows} summaries as {', '.join(formats)} to {options['out']}"
                + (" with texts." if manifest.includes_texts else ".")
            )
        )
        if truncated:
            self.stdout.write(f"{truncated} of them were cut off at max_tokens (column truncated).")
