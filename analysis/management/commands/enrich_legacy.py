"""Fill the titles and abstracts of an imported legacy study's sources from their OpenAlex ids."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.legacy import LegacyFormatError
from analysis.legacy_import import legacy_enrich
from studies.models import Study


class Command(BaseCommand):
    help = (
        "Fill the sources of a legacy import (titles that are OpenAlex ids, empty abstracts) from OpenAlex "
        "(the cached client, OPENALEX_* settings) or, with --from-corpus, offline from the local corpus."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--study", required=True)
        parser.add_argument(
            "--from-corpus", action="store_true", help="match external ids in the local corpus instead of OpenAlex"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with the slug {options['study']!r}.")
        source = "corpus" if options["from_corpus"] else "openalex"
        try:
            result = legacy_enrich(study=study, source=source)
        except LegacyFormatError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Enriched '{study.slug}' from {source}: {result.filled} of {result.documents} sources filled, "
                f"{result.not_found} not found."
            )
        )
        for warning in result.warnings:
            self.stdout.write(f"warning: {warning}")
