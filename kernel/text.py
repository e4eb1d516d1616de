"""The one tokeniser, sentence splitter, stop-word list and stemmer of the platform.

The default token is a maximal run of Unicode letters or digits, lower-cased
("Don't stop-gap 2.5x" -> don, t, stop, gap, 2, 5x). Metrics use these tokens as they
are; retrieval and the extractive summariser analyse text into :func:`index_terms`
(tokens -> stop words and one-character tokens dropped -> :func:`stem`). Metrics that
wrap a library (rouge-score, sacrebleu) keep that library's own tokeniser so their
numbers match the published implementations; docs/metrics.md lists which metric uses which.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel.backends import Document

__all__ = [
    "COVERAGE_MIN",
    "MANY_SENTENCES_COVERAGE_MIN",
    "SOURCES_JUDGED",
    "WEIGHTED_COVERAGE_MIN",
    "CorpusTermStats",
    "STOP_WORDS",
    "TOKEN_PATTERN",
    "WORD_MAX_CHARS",
    "content_words",
    "count_words",
    "cut_words",
    "fold_whitespace",
    "index_terms",
    "join_sentences",
    "ngram_counts",
    "ngrams",
    "question_coverage",
    "sources_miss_question",
    "sentence_spans",
    "split_cjk",
    "split_sentences",
    "stem",
    "tokenize",
    "weighted_question_coverage",
]

TOKEN_PATTERN = r"[^\W_]+"  # noqa: S105 - a regular expression, not a secret
_COMPILED: dict[str, re.Pattern[str]] = {}

# Function words and the boilerplate of a question ("please tell me ..."). Deliberately small, so
# that content words such as "care" or "model" (which carry persona signal) are never dropped.
# Every tokeniser output that is in this set is dropped; SQLite's FTS5 has no list of its own.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    may might must shall us via per within without across among amongst upon whether whose
    yet however thus therefore hence e g eg ie et al vs
    want like know tell please give find show interested question questions
    """.split()
)

# Suffixes removed after plural folding, first match wins; the stem must keep >= 4 characters.
_SUFFIXES: tuple[str, ...] = ("ational", "ation", "ated", "ate", "ness", "ance", "ence", "ant", "ing", "ed", "ly")

# Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "al", "fig", "figs",
        "eq", "eqs", "ref", "refs", "sec", "no", "vol", "pp", "approx", "inc", "ltd", "co", "corp",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
        "gen", "gov", "sen", "rep", "col", "lt", "capt", "sgt", "e.g", "i.e", "cf", "u.s", "u.k",
    }
)  # fmt: skip
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace (group 1);
# or a full-width sentence end of Chinese and Japanese (。！？ and the half-width ｡), optional closing
# quotes/brackets, optional whitespace (group 2): those scripts put no space between sentences.
_BOUNDARY = re.compile(
    r"([.!?\u2026]+[\"'\u201d\u2019)\]]*)\s+"
    r"|([\u3002\uff01\uff1f\uff61]+[\"'\u201d\u2019)\]\u300d\u300f\uff09\u3011\u3015\u3009\u300b]*)\s*"
)
# Han ideographs and kana: scripts written without spaces between words, where each character counts as a word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
# The longest run of characters without a space that counts as one word. A longer run (a URL, a base64 blob, a
# DNA sequence, words glued together) counts as one word per WORD_MAX_CHARS characters or part of them, so a
# word budget also bounds characters. Ordinary words stay whole: the demo corpus's longest is 25 characters
# ("difference-in-differences"); of SciTLDR's 416k abstract tokens, 121 exceed it, URLs, LaTeX and glued text.
WORD_MAX_CHARS = 25
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]{{1,{WORD_MAX_CHARS}}}")
_CJK_OR_REST = re.compile(rf"[{_CJK}]|[^{_CJK}]+")
_PARAGRAPH = re.compile(r"\n\s*\n")


def _pattern(pattern: str) -> re.Pattern[str]:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern)
    return compiled


def tokenize(text: str, *, lowercase: bool = True, pattern: str = TOKEN_PATTERN) -> list[str]:
    """Split ``text`` into word tokens.

    Default: lower-case alphanumeric tokens (maximal runs of Unicode letters and
    digits; punctuation and underscores separate tokens). ``lowercase=False``
    keeps case; ``pattern`` is any regular expression whose matches are tokens.
    """
    if lowercase:
        text = text.lower()
    return _pattern(pattern).findall(text)


def content_words(text: str, *, min_length: int = 1, pattern: str = TOKEN_PATTERN) -> list[str]:
    """:func:`tokenize` (lower-cased) without :data:`STOP_WORDS` and tokens shorter than ``min_length``."""
    return [t for t in tokenize(text, pattern=pattern) if t not in STOP_WORDS and len(t) >= min_length]


def stem(word: str) -> str:
    """Light suffix stripping (not Porter): fold plurals, then one derivational/inflectional suffix.

    It only has to map the forms that occur together in abstracts and queries onto one key
    (nurse/nurses/nursing, vaccine/vaccination, evaluate/evaluated/evaluation), and it must be
    deterministic and cheap; over-stemming a rare word is harmless for ranking.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


# Retrieved sources whose best-ranked abstract holds under this share of the question's content words do not
# cover the question (annotation.services.query: the annotator is told). A question outside the corpus still
# matches a common word or two ("early", "treatment"), so BM25 scores alone cannot tell. The rule for a question
# of one sentence when the corpus's term statistics are not known (OpenAlex, the database's full-text search);
# bench/relevance.py measures it: 2% of SciTLDR's TLDRs asked as questions flagged, every short off-topic one.
COVERAGE_MIN = 0.4
# With the corpus's document frequencies (CorpusTermStats), a question of one sentence must have at least this
# idf-weighted share of its words in the best-ranked abstract; a longer one, in its best sentence, at least
# MANY_SENTENCES_COVERAGE_MIN in the top SOURCES_JUDGED abstracts together (its framing pulls other abstracts up).
# bench/relevance.py --full: on topic, 0.9% of 1,237 SciTLDR TLDRs flagged and 0.6% of the same inside 700-1,000
# characters of framing, none of the demo corpus's topics short or long (issue 33's question among them); off
# topic, 67-91% of short questions caught and 9-42% of long ones.
WEIGHTED_COVERAGE_MIN = 0.3
MANY_SENTENCES_COVERAGE_MIN = 0.325
SOURCES_JUDGED = 3
# Terms in more than this share of the corpus's documents say nothing about a topic ("result", "model" in
# machine learning abstracts): left out of the weighted coverage.
UBIQUITOUS_SHARE = 0.5
# A sentence of the question is judged on its own when it has at least this many weighted terms.
SENTENCE_TERMS_MIN = 3


@dataclass(frozen=True)
class CorpusTermStats:
    """How many of a retrieval corpus's ``n_documents`` hold each term (an :func:`index_terms` stem)."""

    n_documents: int
    document_frequency: Callable[[str], int]

    def idf(self, term: str) -> float:
        """BM25's idf, ln(1 + (N - df + 0.5) / (df + 0.5)): highest for a term the corpus never uses."""
        df = self.document_frequency(term)
        return math.log(1 + (self.n_documents - df + 0.5) / (df + 0.5))

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CorpusTermStats:
        """Counted from the documents' texts (title and abstract), one pass."""
        counts: Counter[str] = Counter()
        n = 0
        for text in texts:
            counts.update(set(index_terms(text)))
            n += 1
        return cls(n_documents=n, document_frequency=lambda term: counts.get(term, 0))


def question_coverage(question: str, text: str) -> float | None:
    """The share of the question's distinct content words (three letters or more, compared by :func:`stem`)
    that occur in ``text``; None when the question has no such word."""
    asked = {stem(word) for word in content_words(question, min_length=3)}
    if not asked:
        return None
    found = {stem(word) for word in content_words(text, min_length=3)}
    return len(asked & found) / len(asked)


def weighted_question_coverage(question: str, texts: Iterable[str], corpus: CorpusTermStats) -> float | None:
    """The best idf-weighted share, over the question's sentences, of a sentence's content words (three letters
    or more, by :func:`stem`, less those in over UBIQUITOUS_SHARE of the corpus) found in any of ``texts``.

    A long question is mostly framing ("I am preparing a review for my team ..."), which no abstract covers
    and which is spread over sentences of its own: the sentence that asks is judged, not the whole. A word the
    corpus never uses weighs most, so a question on another subject stays uncovered. Sentences with under
    SENTENCE_TERMS_MIN such words are judged only when the question has one sentence. None when no sentence
    has a word to judge."""
    found = {stem(word) for text in texts for word in content_words(text, min_length=3)}
    limit = UBIQUITOUS_SHARE * corpus.n_documents
    sentences = split_sentences(question) or [question]
    best: float | None = None
    for sentence in sentences:
        terms = {stem(word) for word in content_words(sentence, min_length=3)}
        weights = {t: corpus.idf(t) for t in terms if corpus.document_frequency(t) <= limit}
        if not weights or (len(weights) < SENTENCE_TERMS_MIN and len(sentences) > 1):
            continue
        share = sum(w for t, w in weights.items() if t in found) / sum(weights.values())
        best = share if best is None else max(best, share)
    return best


def sources_miss_question(
    question: str, documents: Sequence[Document], *, corpus: CorpusTermStats | None = None
) -> bool:
    """True when retrieved sources (best first) do not answer the question: they match nothing of it (every
    score 0: the offline corpus's fallback), or, with the corpus's term statistics, the question's idf-weighted
    words are too little covered (:func:`weighted_question_coverage`): for a question of one sentence, under
    WEIGHTED_COVERAGE_MIN by the best-ranked abstract; for a longer one, its best sentence under
    MANY_SENTENCES_COVERAGE_MIN by the top SOURCES_JUDGED abstracts. Without them, a question of one sentence is
    flagged when the best-ranked abstract holds under COVERAGE_MIN of its content words, and a longer one is not
    judged (that rule flags every long question). A title without an abstract (some OpenAlex records) says too
    little to judge by: not flagged."""
    if not documents:
        return False
    if all(doc.score == 0 for doc in documents):
        return True
    top = documents[0]
    if not top.abstract:
        return False
    one_sentence = len(split_sentences(question)) <= 1
    if corpus is not None and corpus.n_documents > 0:
        judged = documents[:1] if one_sentence else documents[:SOURCES_JUDGED]
        weighted = weighted_question_coverage(question, [f"{doc.title} {doc.abstract}" for doc in judged], corpus)
        return weighted is not None and weighted < (
            WEIGHTED_COVERAGE_MIN if one_sentence else MANY_SENTENCES_COVERAGE_MIN
        )
    if not one_sentence:
        return False
    coverage = question_coverage(question, f"{top.title} {top.abstract}")
    return coverage is not None and coverage < COVERAGE_MIN


def index_terms(text: str) -> list[str]:
    """The retrieval analyser: content words of two or more characters, stemmed, in text order.

    Used for BM25 over the demo corpus, the summariser's sentence vectors and the persona terms,
    so that a query, an abstract and a persona meet on the same keys.
    """
    return [stem(t) for t in content_words(text, min_length=2)]


def _ends_with_abbreviation(chunk: str) -> bool:
    words = chunk.rstrip().split()
    if not words:
        return False
    last = words[-1].rstrip(".!?\u2026\"'\u201d\u2019)]").lstrip("(\"'\u201c\u2018[").lower()
    if last in _ABBREVIATIONS:
        return True
    # Single initials ("J. K. Rowling") do not end sentences.
    return len(last) == 1 and last.isalpha()


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``; ``text[start:end]`` is exact.

    A rule-based splitter (no model data needed). It breaks at blank lines and after ``.``,
    ``!``, ``?`` or an ellipsis (with any closing quotes or brackets) followed by whitespace
    and a capital letter, digit, quote, bracket or dash. Common abbreviations (Dr., e.g.,
    et al.) and single initials do not end a sentence. Chinese and Japanese sentences end at
    ``。``, ``！`` or ``？`` (with any closing quotes or brackets), with or without a space after. Spans exclude the whitespace
    around a sentence; empty sentences are dropped.
    """
    spans: list[tuple[int, int]] = []
    paragraph_start = 0
    paragraphs = [*(m.span() for m in _PARAGRAPH.finditer(text)), (len(text), len(text))]
    for separator_start, separator_end in paragraphs:
        paragraph = text[paragraph_start:separator_start]
        start = 0
        cuts: list[tuple[int, int]] = []
        for match in _BOUNDARY.finditer(paragraph):
            if match.group(2) is not None:  # a full-width sentence end needs nothing after it
                cuts.append((start, match.end(2)))
                start = match.end()
                continue
            nxt = paragraph[match.end() : match.end() + 1]
            if not nxt or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'\u201c\u2018([-"):
                continue
            if match.group(1) == "." and _ends_with_abbreviation(paragraph[start : match.end(1)]):
                continue
            cuts.append((start, match.end(1)))
            start = match.end()
        cuts.append((start, len(paragraph)))
        for cut_start, cut_end in cuts:
            span = _stripped(text, paragraph_start + cut_start, paragraph_start + cut_end)
            if span[0] < span[1]:
                spans.append(span)
        paragraph_start = separator_end
    return spans


def fold_whitespace(text: str) -> str:
    """``text`` with every run of whitespace replaced by one space, and no space at either end."""
    return " ".join(text.split())


def count_words(text: str) -> int:
    """The number of words in ``text``: whitespace-separated words, each Han ideograph or kana counting as
    one (Chinese and Japanese put no spaces between words), and a run of more than :data:`WORD_MAX_CHARS`
    characters without a space counting as one word per ``WORD_MAX_CHARS`` characters or part of them
    (a 60-character URL is three words). Text without such characters or runs: ``len(text.split())``."""
    return sum(1 for _ in _WORD.finditer(text))


def split_cjk(token: str) -> list[str]:
    """``token`` with each Han ideograph or kana on its own, as :func:`count_words` counts them (a :func:`tokenize`
    token of Chinese is a whole clause: "夜班abc" -> 夜, 班, abc); a token without them is itself."""
    return _CJK_OR_REST.findall(token)


def cut_words(text: str, max_words: int, *, mark: str = "\u2026") -> str:
    """``text`` itself when it has at most ``max_words`` words (:func:`count_words`); otherwise its first
    ``max_words`` words, an exact prefix cut at a word boundary without the punctuation that ended it there
    (a comma, say), followed by ``mark`` (an ellipsis). Inside a run longer than :data:`WORD_MAX_CHARS`
    the cut falls after a whole ``WORD_MAX_CHARS``-character piece (never between a letter and its
    combining accent), so the result holds at most ``max_words * WORD_MAX_CHARS`` characters besides
    whitespace and the mark."""
    for count, match in enumerate(_WORD.finditer(text), start=1):
        if count == max_words:
            end = match.end()
            if not text[end:].strip():
                return text
            # A piece boundary inside a run may fall before a combining mark: cut before its base letter instead.
            while end > match.start() and unicodedata.category(text[end])[0] == "M":
                end -= 1
            return text[:end].rstrip(",;:\u3001\uff0c\uff1b\uff1a") + mark
    return text


def split_sentences(text: str, *, fold: bool = True) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans` for the rules).

    By default whitespace inside a sentence is folded (:func:`fold_whitespace`), which is what
    the metrics compare. ``fold=False`` returns exact substrings of ``text``, which is what the
    extractive summariser copies and cites verbatim.
    """
    sentences = [text[start:end] for start, end in sentence_spans(text)]
    return [fold_whitespace(s) for s in sentences] if fold else sentences


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """All contiguous n-grams of ``tokens`` in order (empty when there are fewer than n)."""
    if n <= 0:
        raise ValueError("n must be positive")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Multiset of the n-grams of ``tokens``."""
    return Counter(ngrams(tokens, n))


def join_sentences(sentences: Iterable[str]) -> str:
    """Join sentences with single spaces (the inverse of :func:`split_sentences` up to whitespace)."""
    return " ".join(s.strip() for s in sentences if s.strip())
