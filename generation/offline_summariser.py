"""Offline generation: extractive, query-focused, persona-aware summaries with citations.

`ExtractiveSummariser` writes a grounded, cited summary by selecting sentences from the retrieved
abstracts, with two distinct selection strategies (the two "models" of the 2x2 design) and a
persona-aware scoring term (the personalised condition). Plain Python, no Django, deterministic
for the same input.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from generation.persona_lexicon import PersonaTerms
from kernel.backends import BackendError, Document, Generation, GenerationRequest
from kernel.text import count_words, cut_words, index_terms, split_cjk, split_sentences, tokenize

__all__ = ["STRATEGIES", "STRATEGY_CENTROID", "STRATEGY_MMR", "ExtractiveSummariser", "split_cited", "uncite"]

STRATEGY_CENTROID = "extractive-centroid"
STRATEGY_MMR = "extractive-mmr"
STRATEGIES = (STRATEGY_CENTROID, STRATEGY_MMR)


@dataclass(frozen=True)
class _Sentence:
    doc_rank: int  # 1-based rank in request.documents
    position: int  # 0-based index within its abstract
    text: str
    n_words: int
    vector: Mapping[str, float]  # L2-normalised tf-idf


def _normalise(vector: Mapping[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(v * v for v in vector.values()))
    return {t: v / norm for t, v in vector.items()} if norm else {}


def _cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(t, 0.0) for t, v in a.items())


def _max_scaled(values: Sequence[float]) -> list[float]:
    top = max(values, default=0.0)
    return [v / top for v in values] if top > 0 else [0.0 for _ in values]


def _plainness(sentence: _Sentence) -> float:
    """Short sentences with few numbers, brackets and long words read as plainer."""
    # Chinese and Japanese words are counted a character each, as for the length budget: a token of theirs is
    # a whole clause, which would read as one long word and make every such sentence equally "not plain".
    words = [word for token in tokenize(sentence.text) for word in split_cjk(token)]
    if not words:
        return 0.0
    long_share = sum(len(w) >= 10 for w in words) / len(words)
    numeric_share = sum(any(c.isdigit() for c in w) for w in words) / len(words)
    brackets = sentence.text.count("(") + sentence.text.count("%") + sentence.text.count("=")
    length_term = 1.0 / (1.0 + max(0, sentence.n_words - 12) / 12.0)
    return max(0.0, length_term - 1.5 * long_share - 1.5 * numeric_share - 0.1 * brackets)


@dataclass(frozen=True)
class _Settings:
    min_sentences: int = 3
    max_sentences: int = 5
    min_words: int = 80
    max_words: int = 130
    persona_weight: float = 0.4
    plain_weight: float = 0.25
    redundancy_threshold: float = 0.5
    mmr_lambda: float = 0.6
    same_source_penalty: float = 0.5
    on_topic_only: bool = True

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> _Settings:
        defaults = cls()
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name in settings:
                raw = settings[name]
                if isinstance(getattr(defaults, name), bool):
                    if not isinstance(raw, bool):
                        raise BackendError(f"Setting {name}={raw!r} is not true or false.", transient=False)
                    values[name] = raw
                    continue
                try:
                    values[name] = type(getattr(defaults, name))(raw)
                except (TypeError, ValueError) as exc:
                    raise BackendError(f"Setting {name}={raw!r} is not a number.", transient=False) from exc
        chosen = cls(**{**defaults.__dict__, **values})
        if not 1 <= chosen.min_sentences <= chosen.max_sentences or chosen.max_words < chosen.min_words:
            raise BackendError("Summary length settings are inconsistent (need 1 <= min <= max).", transient=False)
        return chosen


class ExtractiveSummariser:
    """Query-focused extractive summariser; `request.model` selects the strategy.

    - "extractive-centroid": greedy selection by query relevance plus centroid salience (how
      typical a sentence is of the retrieved set), skipping near-duplicates.
    - "extractive-mmr": maximal marginal relevance, trading query relevance plus a position prior
      (abstracts open with the context a reader needs) against redundancy with what is already
      chosen, where a second sentence from an already cited abstract counts as partly redundant.

    Only sentences sharing a content word with the question are candidates (setting
    `on_topic_only`, default true; `raw_response["on_topic"]` says how many did, and when none
    does the whole pool is used and the note says so).

    With `request.persona` (the personalised condition) a persona vector built from the profile
    and a role-cue lexicon is mixed into every sentence score, and a novice/beginner expertise
    adds a preference for short, plain sentences. Every output sentence is copied verbatim from
    one abstract and cites it as [n], n being the abstract's 1-based position in
    `request.documents`; one longer than `max_words` is cut to its first `max_words` words and
    an ellipsis, so the summary never exceeds `max_words` (words as `kernel.text.count_words` counts them:
    a Han ideograph or kana is one, a run of more than 25 characters without a space one per 25, so the
    budget bounds characters too). Sentences appear by document rank, then by position in the abstract.
    """

    def generate(self, request: GenerationRequest) -> Generation:
        started = time.perf_counter()
        if request.model not in STRATEGIES:
            raise BackendError(
                f"Unknown extractive model {request.model!r}; choose one of {', '.join(STRATEGIES)}.",
                transient=False,
            )
        settings = _Settings.from_mapping(request.settings or {})
        sentences, idf = self._sentences(request.documents, max_words=settings.max_words)
        if not sentences:
            raise BackendError("No abstract text to summarise: the retrieved documents are empty.", transient=False)
        persona = PersonaTerms.from_mapping(request.persona)

        query_vec = self._vectorise(Counter(index_terms(request.query)), idf)
        sentences, topic_note = self._on_topic(sentences, query_vec, settings)
        persona_vec = self._vectorise(Counter(persona.terms), idf) if persona else {}
        relevance = _max_scaled([_cosine(query_vec, s.vector) for s in sentences])
        persona_sim = _max_scaled([_cosine(persona_vec, s.vector) for s in sentences])
        plain = _max_scaled([_plainness(s) for s in sentences]) if persona and persona.plain else [0.0] * len(sentences)
        n_docs = max(s.doc_rank for s in sentences)
        rank_prior = [1.0 - (s.doc_rank - 1) / max(1, n_docs) for s in sentences]

        if request.model == STRATEGY_CENTROID:
            centroid: Counter[str] = Counter()
            for s in sentences:
                centroid.update(s.vector)
            salience = _max_scaled([_cosine(_normalise(centroid), s.vector) for s in sentences])
            base = [0.45 * r + 0.45 * c + 0.10 * p for r, c, p in zip(relevance, salience, rank_prior, strict=True)]
        else:
            position_prior = [1.0 / (1.0 + 0.5 * s.position) for s in sentences]
            base = [0.6 * r + 0.3 * p + 0.1 * d for r, p, d in zip(relevance, position_prior, rank_prior, strict=True)]

        scores = list(base)
        if persona is not None:
            w = settings.persona_weight
            scores = [
                (1.0 - w) * b + w * p + settings.plain_weight * pl
                for b, p, pl in zip(base, persona_sim, plain, strict=True)
            ]

        if request.model == STRATEGY_CENTROID:
            chosen = self._select_greedy(sentences, scores, settings)
        else:
            chosen = self._select_mmr(sentences, scores, settings)

        selection_order = [f"{sentences[i].doc_rank}:{sentences[i].position}" for i in chosen]
        chosen.sort(key=lambda i: (sentences[i].doc_rank, sentences[i].position))
        text = " ".join(_cite(sentences[i].text, sentences[i].doc_rank) for i in chosen)
        n_words = sum(sentences[i].n_words for i in chosen)
        raw = {
            "backend": "offline-extractive",
            "strategy": request.model,
            "persona_applied": persona is not None,
            "persona_roles": list(persona.roles) if persona else [],
            "persona_plain": bool(persona and persona.plain),
            "candidate_sentences": len(sentences),
            "on_topic": topic_note,
            "selection_order": selection_order,
            "selected": [
                {
                    "doc": sentences[i].doc_rank,
                    "sentence": sentences[i].position,
                    "id": f"{sentences[i].doc_rank}:{sentences[i].position}",
                    "score": round(scores[i], 6),
                    "relevance": round(relevance[i], 6),
                    "persona": round(persona_sim[i], 6),
                }
                for i in chosen
            ],
        }
        usage = extractive_usage(
            request, completion_words=n_words, input_sentences=len(sentences), selected=len(chosen)
        )
        return Generation(
            text=text, raw_response=raw, usage=usage, latency_s=time.perf_counter() - started, finish_reason="stop"
        )

    # -- helpers ------------------------------------------------------------------------------

    def _sentences(self, documents: Sequence[Document], *, max_words: int) -> tuple[list[_Sentence], dict[str, float]]:
        raw: list[tuple[int, int, str, Counter[str]]] = []
        for rank, document in enumerate(documents, start=1):
            # Exact substrings (fold=False): a summary sentence is copied verbatim and cited. A sentence longer
            # than the whole summary (an abstract with no sentence breaks: a pasted table, a run-on) would be
            # the summary on its own however long: it competes as its first max_words words and an ellipsis.
            for position, whole in enumerate(split_sentences(document.abstract, fold=False)):
                sentence = cut_words(whole, max_words)
                counts = Counter(index_terms(sentence))
                if counts:
                    raw.append((rank, position, sentence, counts))
        df: Counter[str] = Counter()
        for *_rest, counts in raw:
            df.update(counts.keys())
        n = len(raw)
        # Smoothed idf over the sentence pool: words in every sentence still weigh a little.
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        sentences = [
            _Sentence(rank, position, text, min(count_words(text), max_words), self._vectorise(counts, idf))
            for rank, position, text, counts in raw
        ]
        return sentences, idf

    @staticmethod
    def _on_topic(
        sentences: list[_Sentence], query_vec: Mapping[str, float], settings: _Settings
    ) -> tuple[list[_Sentence], str]:
        """Keep to the sentences sharing a content word with the question; say what was done.

        A sentence that shares no word with the question rarely answers it (a question on sepsis
        answered with a sentence on harvests), so only sentences with some query relevance are
        candidates, even when that makes the summary shorter than `min_sentences`. When no
        sentence shares a word, the whole pool is used and the note says so.
        """
        if not settings.on_topic_only:
            return sentences, "all sentences considered (on_topic_only is off)"
        kept = [s for s in sentences if any(t in query_vec for t in s.vector)]
        if not kept:
            return sentences, "no sentence shares a word with the question: summarising the sources as a whole"
        if len(kept) < settings.min_sentences:
            return kept, f"only {len(kept)} sentence(s) share a word with the question: a shorter summary"
        return kept, f"{len(kept)} of {len(sentences)} sentences share a word with the question"

    @staticmethod
    def _vectorise(counts: Mapping[str, float], idf: Mapping[str, float]) -> dict[str, float]:
        # Terms outside the pool cannot match any sentence, so they are dropped rather than weighted.
        return _normalise({t: c * idf[t] for t, c in counts.items() if t in idf})

    @staticmethod
    def _fits(total: int, extra: int, count: int, settings: _Settings) -> bool:
        return total + extra <= settings.max_words or count < 1

    @staticmethod
    def _done(total: int, count: int, settings: _Settings) -> bool:
        return count >= settings.max_sentences or (count >= settings.min_sentences and total >= settings.min_words)

    def _select_greedy(self, sentences: Sequence[_Sentence], scores: Sequence[float], settings: _Settings) -> list[int]:
        order = sorted(range(len(sentences)), key=lambda i: (-scores[i], sentences[i].doc_rank, sentences[i].position))
        chosen: list[int] = []
        total = 0
        for redundancy in (settings.redundancy_threshold, 1.01):  # second pass only if too few survive
            for i in order:
                if self._done(total, len(chosen), settings):
                    return chosen
                if i in chosen or not self._fits(total, sentences[i].n_words, len(chosen), settings):
                    continue
                if any(_cosine(sentences[i].vector, sentences[j].vector) > redundancy for j in chosen):
                    continue
                chosen.append(i)
                total += sentences[i].n_words
        return chosen

    def _select_mmr(self, sentences: Sequence[_Sentence], scores: Sequence[float], settings: _Settings) -> list[int]:
        lam = settings.mmr_lambda
        chosen: list[int] = []
        total = 0
        remaining = set(range(len(sentences)))

        def redundancy(i: int) -> float:
            # Similarity to the summary so far; a second sentence from an already cited abstract
            # counts as partly redundant too, so MMR spreads its citations over more sources.
            return max(
                (
                    max(
                        _cosine(sentences[i].vector, sentences[j].vector),
                        settings.same_source_penalty if sentences[i].doc_rank == sentences[j].doc_rank else 0.0,
                    )
                    for j in chosen
                ),
                default=0.0,
            )

        while remaining and not self._done(total, len(chosen), settings):
            fitting = [i for i in remaining if self._fits(total, sentences[i].n_words, len(chosen), settings)]
            if not fitting:
                break
            best = max(
                fitting,
                key=lambda i: (
                    lam * scores[i] - (1 - lam) * redundancy(i),
                    -sentences[i].doc_rank,
                    -sentences[i].position,
                ),
            )
            chosen.append(best)
            remaining.discard(best)
            total += sentences[best].n_words
        return chosen


def extractive_usage(
    request: GenerationRequest, *, completion_words: int, input_sentences: int, selected: int
) -> dict[str, int]:
    """The usage record of an offline extractive summary. No tokenizer offline: "tokens" are words
    (`kernel.text.count_words`: whitespace-separated, each Han ideograph or kana one word, a run of more than
    25 characters without a space one word per 25 characters)."""
    prompt_words = count_words(request.prompt)
    return {
        "prompt_tokens": prompt_words,
        "completion_tokens": completion_words,
        "total_tokens": prompt_words + completion_words,
        "source_words": sum(count_words(d.abstract) for d in request.documents),
        "input_sentences": input_sentences,
        "selected_sentences": selected,
    }


# Sentence ends a citation goes before: Latin and the full-width ones of Chinese and Japanese (。！？).
_STOPS = ".!?\u3002\uff01\uff1f"


def _cite(sentence: str, rank: int) -> str:
    """Put the citation before the closing full stop ("... fell by 12% [3].", "...下降了 [3]。") when there is
    one; after the ellipsis of a sentence cut to the length budget ("... the first words… [3]")."""
    match = re.search(rf"([{_STOPS}])([\"')\]]?)$", sentence)
    if match and not match.group(2):
        return f"{sentence[:-1]} [{rank}]{match.group(1)}"
    return f"{sentence} [{rank}]"


def uncite(summary_sentence: str) -> tuple[str, int]:
    """Invert `_cite`: the verbatim source sentence (or, for a sentence cut to the length budget, its opening
    words and the ellipsis) and its citation number."""
    match = re.fullmatch(rf"(?s)(.*?) \[(\d+)\]([{_STOPS}]?)", summary_sentence.strip())
    if not match:
        raise ValueError(f"Not a cited summary sentence: {summary_sentence!r}")
    return match.group(1) + match.group(3), int(match.group(2))


def split_cited(summary: str) -> list[str]:
    """Split a summary from this backend into its cited sentences."""
    return [part.strip() for part in re.findall(rf".*? \[\d+\][{_STOPS}]?(?=\s|$)", summary.strip()) if part.strip()]
