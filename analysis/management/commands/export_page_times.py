"""Export a study's page-time table: one row per page each annotator was shown, with its time on page."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from analysis.exports import export_page_times
from analysis.management.exporting import add_export_arguments, export_target, writing_into
from analysis.selectors import page_frame


class Command(BaseCommand):
    help = "Write pages.<fmt> and pages.manifest.json (consent, persona, question, wait, comparison) into --out DIR."

    def add_arguments(self, parser: Any) -> None:
        add_export_arguments(parser, texts="nothing (the page-time table holds no participant text)")

    def handle(self, *args: Any, **options: Any) -> None:
        study, formats = export_target(options)
        frame = page_frame(study=study)
        with writing_into(options["out"]):
            manifest = export_page_times(frame, options["out"], formats=formats, study=study.slug)
        pages = frame["page"].value_counts().to_dict()
        counts = ", ".join(f"{pages.get(p, 0)} {p}" for p in ("consent", "persona", "question", "wait", "comparison"))
        self.stdout.write(self.style.SUCCESS(f"Wrote {manifest.rows} page times ({counts}) to {options['out']}."))
