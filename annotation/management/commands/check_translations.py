"""List what the annotator pages' translations lack: untranslated, fuzzy, new or unused strings, and a stale
compiled catalog; exit 1 if anything is. `--update` first brings the catalogs up to date with the sources."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.translations import catalog_problems, catalog_update, languages_to_check


class Command(BaseCommand):
    help = "List untranslated, fuzzy, new or unused annotator strings and stale .mo files, per language."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("languages", nargs="*", help="language codes (default: every non-default language)")
        parser.add_argument(
            "--update", action="store_true", help="run makemessages first (new strings are added untranslated)"
        )
        parser.add_argument("--compile", action="store_true", help="run compilemessages after any update")

    def handle(self, *args: Any, **options: Any) -> None:
        languages = options["languages"] or languages_to_check()
        unknown = sorted(set(languages) - set(languages_to_check()))
        if unknown:
            raise CommandError(
                f"Unknown language(s) {', '.join(unknown)}; settings.LANGUAGES has {languages_to_check()}."
            )
        for language in languages if options["update"] else []:
            catalog_update(language)
        if options["compile"]:
            call_command("compilemessages", locale=languages, verbosity=options["verbosity"])
        failed = False
        for language in languages:
            problems = catalog_problems(language)
            failed = failed or bool(problems)
            for problem in problems:
                self.stdout.write(f"{language}: {problem}")
            if not problems:
                self.stdout.write(f"{language}: complete")
        if failed:
            raise CommandError("The translations are incomplete (see above).")
