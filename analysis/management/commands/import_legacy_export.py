"""Import the paper's own platform export (a zip of users.json and results/annotator-*.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from analysis.legacy import LegacyFormatError
from analysis.legacy_import import LegacyImportRefused, legacy_enrich, legacy_import
from studies.models import Study


class Command(BaseCommand):
    help = (
        "Import a legacy export ZIP into a study (created, closed, if it does not exist); re-imports add nothing "
        "twice. An open study, or one with data of its own, is refused unless --into-existing."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("zip", type=Path)
        parser.add_argument("--study", required=True, help="slug of the study to import into")
        parser.add_argument("--title", default=None)
        parser.add_argument("--salt", default="", help="salt for the pseudonymous annotator codes")
        parser.add_argument(
            "--into-existing",
            action="store_true",
            help="import even into a study that is not closed or already holds participations of its own",
        )
        parser.add_argument(
            "--enrich",
            choices=("openalex", "corpus"),
            default=None,
            help="after importing, fill the sources' titles and abstracts from OpenAlex or the local corpus",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["zip"]
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        try:
            result = legacy_import(
                source=path,
                study_slug=options["study"],
                title=options["title"],
                salt=options["salt"],
                into_existing=options["into_existing"],
            )
        except LegacyImportRefused as error:
            raise CommandError(f"{path}: not imported: {error}") from error
        except LegacyFormatError as error:
            raise CommandError(f"{path} is not a legacy export: {error}. Nothing was imported.") from error
        except DatabaseError as error:  # a value the checks above let through; the transaction rolled back
            raise CommandError(f"{path}: could not be stored ({error}). Nothing was imported.") from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {path.name} into '{result.study}': {result.annotators} annotators, {result.queries_added} "
                f"queries ({result.queries_skipped} already present), {result.judgments_added} judgments."
            )
        )
        warnings = list(result.warnings)
        if options["enrich"]:
            try:
                enriched = legacy_enrich(study=Study.objects.get(slug=result.study), source=options["enrich"])
            except LegacyFormatError as error:
                raise CommandError(f"imported, but the sources were not enriched: {error}") from error
            self.stdout.write(
                f"Enriched from {enriched.source}: {enriched.filled} of {enriched.documents} sources filled, "
                f"{enriched.not_found} not found."
            )
            warnings = [w for w in warnings if "have no abstract" not in w] + list(enriched.warnings)
        for warning in warnings:
            self.stdout.write(f"warning: {warning}")
