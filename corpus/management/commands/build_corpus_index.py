"""python manage.py build_corpus_index: (re)build the BM25 search index of the local corpus in CORPUS_INDEX_DIR."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from corpus.index import CorpusIndexError, corpus_index_build


class Command(BaseCommand):
    help = (
        "Build the BM25 search index of the local corpus (CORPUS_SEARCH=bm25) into CORPUS_INDEX_DIR. "
        "import_corpus does this after every import; run it on each host whose CORPUS_INDEX_DIR is not shared."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = corpus_index_build()
        except CorpusIndexError as exc:
            raise CommandError(f"{exc}. Set CORPUS_INDEX_DIR to a folder this user can write.") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Search index built: {result.documents} abstracts, {result.terms} terms, "
                f"{result.seconds:.1f}s, in {result.path}."
            )
        )
