"""What the local corpus covers, for the question page ("This study's sources cover: ...")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from corpus.models import CorpusDocument
from kernel.text import content_words

__all__ = ["DATASET_LABELS", "corpus_coverage", "coverage_from_labels"]

# A document's field is its `extra.field`, else its `extra.venue`, else its dataset's label here.
DATASET_LABELS = {"scitldr": "machine learning (ICLR papers, SciTLDR)"}


# Words too general to say what a set of abstracts is about.
_GENERIC_TITLE_WORDS = frozenset(
    "study studies data analysis evaluation effect effects using based trial randomised randomized method methods "
    "model models approach results outcomes human towards toward review new learning improving improve".split()
)


def coverage_from_labels(
    labels: Iterable[str], *, titles: Iterable[str] = (), limit: int = 6, topic_words: int = 10
) -> dict[str, Any]:
    """What a set of documents covers: `kind` "fields" with the labels shared by two or more documents,
    most common first (ties alphabetically) and how many other labels there are; else `kind` "title_words",
    the content words found in the most titles (a label of its own per document, such as the invented
    venues of the demo corpus, says nothing about the whole); and the document count."""
    counts: Counter[str] = Counter()
    documents = 0
    for label in labels:
        documents += 1
        if label:
            counts[label] += 1
    shared = sorted((n for n in counts if counts[n] >= 2), key=lambda n: (-counts[n], n.casefold()))
    if shared:
        return {
            "kind": "fields",
            "fields": shared[:limit],
            "more": len(counts) - len(shared[:limit]),
            "documents": documents,
        }
    words: Counter[str] = Counter()
    for title in titles:
        words.update({w for w in content_words(title, min_length=4) if w not in _GENERIC_TITLE_WORDS})
    common = sorted((w for w in words if words[w] >= 2), key=lambda w: (-words[w], w))
    return {"kind": "title_words", "fields": common[:topic_words], "more": 0, "documents": documents}


def _label(extra: Mapping[str, Any]) -> str:
    for key in ("field", "venue"):
        value = extra.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    dataset = extra.get("dataset")
    return DATASET_LABELS.get(dataset, str(dataset)) if isinstance(dataset, str) and dataset else ""


def corpus_coverage(*, limit: int = 6) -> dict[str, Any]:
    """Coverage of the local corpus (the "corpus" retrieval backend); reads only the `extra` column."""
    rows = list(CorpusDocument.objects.values_list("extra", "title").iterator(chunk_size=5000))
    labels = (_label(extra) if isinstance(extra, Mapping) else "" for extra, _title in rows)
    return coverage_from_labels(labels, titles=(title for _extra, title in rows), limit=limit)
