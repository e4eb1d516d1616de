"""What the local corpus covers, for the question page ("This study's sources cover: ...")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from corpus.models import CorpusDocument
from kernel.text import STOP_WORDS, tokenize

__all__ = ["DATASET_LABELS", "corpus_coverage", "coverage_from_labels", "title_topics"]

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
    return {"kind": "title_words", "fields": title_topics(titles, limit=topic_words), "more": 0, "documents": documents}


def title_topics(titles: Iterable[str], *, limit: int = 10) -> list[str]:
    """The topics most titles share, as the titles write them: two-word phrases found in two or more titles
    ("urban heat", "mRNA vaccines"), then single words found in two or more titles and in none of those
    phrases; most titles first. Words are matched case-blind and shown in their commonest spelling, so an
    annotator reads "mRNA", not a lower-cased key."""
    phrases: Counter[tuple[str, ...]] = Counter()
    spelling: dict[tuple[str, ...], Counter[str]] = {}
    for title in titles:
        seen: set[tuple[str, ...]] = set()
        words = tokenize(title, lowercase=False)
        keep = [w if _topical(w) else None for w in words]
        for n, word in enumerate(keep):
            if word is None:
                continue
            grams: list[tuple[str, ...]] = [(word,)]
            if n + 1 < len(keep) and keep[n + 1] is not None:
                grams.append((word, str(keep[n + 1])))
            if n == 0 and word[:1].isupper() and word[1:].islower():
                grams = [(word.lower(), *gram[1:]) for gram in grams]  # a title's capital, not the word's
            for gram in grams:
                key = tuple(w.casefold() for w in gram)
                spelling.setdefault(key, Counter())[" ".join(gram)] += 1
                seen.add(key)
        phrases.update(seen)

    def order(key: tuple[str, ...]) -> tuple[int, int, str]:
        # A phrase ranks with its commoner word ("mRNA vaccines" where "mRNA" is in seven titles).
        return (-max(phrases[(w,)] for w in key), -phrases[key], " ".join(key))

    pairs = sorted((k for k in phrases if len(k) == 2 and phrases[k] >= 2), key=order)
    chosen: list[tuple[str, ...]] = []
    for pair in pairs:  # a pair that shares a word with a more common one adds little ("heat island", "urban heat")
        if not any(set(pair) & set(c) for c in chosen):
            chosen.append(pair)
    in_pairs = {w for pair in chosen for w in pair}
    singles: list[tuple[str, ...]] = sorted(
        (k for k in phrases if len(k) == 1 and phrases[k] >= 2 and k[0] not in in_pairs), key=order
    )
    topics = sorted(chosen + singles, key=order)[:limit]
    return [spelling[k].most_common(1)[0][0] for k in topics]


def _topical(word: str) -> bool:
    lower = word.casefold()
    return len(lower) >= 4 and lower not in STOP_WORDS and lower not in _GENERIC_TITLE_WORDS and not lower.isdigit()


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
