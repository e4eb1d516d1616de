"""python manage.py import_corpus FILE [--format auto|jsonl|scitldr] [--batch-size N] [--no-index]"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from corpus.importing import FORMATS, CorpusFileError, corpus_import, corpus_refresh_lexeme_stats
from corpus.index import CorpusIndexError, corpus_index_build


class Command(BaseCommand):
    help = (
        "Import paper abstracts into the local corpus from JSONL (id, title, abstract, url, year; other "
        "fields kept) or SciTLDR files. Re-importing updates rows in place, matched on id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path, help="JSONL files (optionally .gz)")
        parser.add_argument("--format", choices=FORMATS, default="auto", help="default: detect from the first record")
        parser.add_argument("--batch-size", type=int, default=2000, help="rows per transaction (default 2000)")
        parser.add_argument(
            "--skip-invalid", action="store_true", help="leave bad lines out (each is reported) instead of stopping"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--no-stats", action="store_true", help="do not recount word statistics (PostgreSQL) after the import"
        )
        parser.add_argument(
            "--no-index",
            action="store_true",
            help="do not rebuild the BM25 search index (CORPUS_INDEX_DIR) after the import",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        done: list[str] = []
        for path in options["files"]:
            self._import(path, options, done)
            done.append(path.name)
        if not options["no_stats"]:
            lexemes = corpus_refresh_lexeme_stats()
            if lexemes:
                self.stdout.write(f"Word statistics refreshed: {lexemes} distinct search terms.")
        if not options["no_index"]:
            try:
                built = corpus_index_build()
            except CorpusIndexError as exc:
                raise CommandError(
                    f"The abstracts were imported, but the search index was not built: {exc}. Set "
                    "CORPUS_INDEX_DIR to a folder this user can write and run `manage.py build_corpus_index`."
                ) from None
            self.stdout.write(
                f"Search index built: {built.documents} abstracts, {built.terms} terms, {built.seconds:.1f}s, "
                f"in {built.path}."
            )

    def _import(self, path: Path, options: dict[str, Any], done: list[str]) -> None:
        size = path.stat().st_size if path.is_file() else 0
        skipped_lines: list[str] = []
        with tqdm(
            total=size,
            unit="B",
            unit_scale=True,
            desc=path.name,
            disable=options["no_progress"] or options["verbosity"] < 1,
            file=self.stderr._out,
        ) as bar:
            try:
                result = corpus_import(
                    path=path,
                    fmt=options["format"],
                    batch_size=options["batch_size"],
                    skip_invalid=options["skip_invalid"],
                    on_bytes=bar.update,
                    on_skip=lambda number, reason: skipped_lines.append(f"line {number}: {reason}"),
                )
            except CorpusFileError as exc:
                before = f" {', '.join(done)} {'was' if len(done) == 1 else 'were'} imported." if done else ""
                if exc.imported:
                    raise CommandError(f"{exc}; re-running is safe (rows are matched on id).{before}") from None
                hint = (
                    " Fix the line and re-run, or pass --skip-invalid to leave bad lines out."
                    if " line " in str(exc)
                    else ""
                )
                raise CommandError(f"{exc}. Nothing from {path.name} was imported.{hint}{before}") from None
        for line in skipped_lines[:20]:
            self.stderr.write(f"skipped {path.name} {line}")
        if len(skipped_lines) > 20:
            self.stderr.write(f"... and {len(skipped_lines) - 20} more skipped lines")
        self.stdout.write(
            self.style.SUCCESS(
                f"{path.name} ({result.format}): {result.read} records, {result.created} new, "
                f"{result.updated} updated, {result.skipped} skipped; {result.total_in_corpus} in the corpus."
            )
        )
