"""The local corpus: one row per paper abstract.

The full-text index is not a model field: on PostgreSQL the migration adds a stored generated
`search_vector` tsvector column with a GIN index, on SQLite an FTS5 table kept in step by
triggers. Both follow every insert and update, so an import needs no extra indexing step.
"""

from __future__ import annotations

from django.db import models


class CorpusDocument(models.Model):
    external_id = models.CharField(max_length=255, unique=True, help_text="The paper's id in its source dataset.")
    title = models.TextField(blank=True)
    abstract = models.TextField()
    url = models.CharField(max_length=2000, blank=True)
    year = models.PositiveSmallIntegerField(null=True, blank=True, db_index=True)
    extra = models.JSONField(default=dict, blank=True, help_text="Every other field of the imported record.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(abstract=""), name="corpus_document_has_abstract"),
        ]

    def __str__(self) -> str:
        return f"{self.external_id}: {self.title[:80]}"


class CorpusLexeme(models.Model):
    """How many documents contain each search lexeme (PostgreSQL only; refreshed after an import).

    Search uses it to keep very common words of a question out of the candidate match, which
    keeps an OR query fast on a million abstracts; they still count in the ranking.
    """

    lexeme = models.CharField(max_length=255, primary_key=True)
    ndoc = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.lexeme} ({self.ndoc})"


class CorpusState(models.Model):
    """One row whose `token` changes with every write to the corpus (database triggers, migration 0004).

    The BM25 search index (corpus.index) records the token it was built from; a different token means
    the corpus changed since, whatever changed it (import_corpus, the admin, raw SQL).
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    token = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"corpus state {self.token}"
