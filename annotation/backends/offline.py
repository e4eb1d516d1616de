"""Offline backends that do real work without a model server or internet.

`DemoCorpusRetrieval` ranks a JSONL corpus with Okapi BM25; `ExtractiveSummariser` writes a
grounded, cited summary by selecting sentences from the retrieved abstracts, with two distinct
selection strategies (the two "models" of the 2x2 design) and a persona-aware scoring term (the
personalised condition). Plain Python, no Django, deterministic for the same input.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernel.backends import BackendError, Document, Generation, GenerationRequest

DEFAULT_CORPUS_PATH = Path(__file__).resolve().parent.parent / "data" / "demo_corpus.jsonl"

# --------------------------------------------------------------------------------------------
# Text normalisation shared by retrieval and summarisation
# --------------------------------------------------------------------------------------------

# A deliberately small list: function words only, so that content words such as "care" or
# "model" (which carry persona signal) are never dropped.
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
    yet however thus therefore hence e g i.e eg ie et al vs
    want like know tell please give find show interested question questions
    """.split()
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")

# Suffixes removed after plural folding, first match wins; the stem must keep >= 4 characters.
_SUFFIXES: tuple[str, ...] = ("ational", "ation", "ated", "ate", "ness", "ance", "ence", "ant", "ing", "ed", "ly")


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


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens, stop words removed, lightly stemmed."""
    return [stem(t) for t in _TOKEN_RE.findall(text.lower()) if t not in STOP_WORDS and len(t) > 1]


# Abbreviations after which a full stop does not end a sentence.
_ABBREVIATIONS: frozenset[str] = frozenset(
    {"e.g", "i.e", "al", "vs", "fig", "figs", "eq", "eqs", "approx", "cf", "dr", "prof", "no", "ca", "resp"}
)
_BOUNDARY_RE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")


def split_sentences(text: str) -> list[str]:
    """Split an abstract into sentences; every returned sentence is an exact substring of `text`.

    A boundary is terminal punctuation followed by whitespace and an upper-case letter, digit,
    quote or bracket, except after a known abbreviation ("e.g.", "et al.") or a single capital
    (an initial such as "J.").
    """
    text = text.strip()
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY_RE.finditer(text):
        candidate = text[start : match.start()].rstrip()
        last_word = candidate.rsplit(None, 1)[-1].rstrip(".!?").lower() if candidate else ""
        if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
            continue
        # Keep a closing quote/bracket that follows the full stop with its sentence.
        end = match.start() + len(match.group(0).rstrip())
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


# --------------------------------------------------------------------------------------------
# Retrieval: Okapi BM25 over a JSONL corpus
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CorpusIndex:
    documents: tuple[Document, ...]
    term_freqs: tuple[Counter[str], ...]
    doc_lengths: tuple[int, ...]
    avg_doc_length: float
    doc_freq: Mapping[str, int]
    postings: Mapping[str, tuple[int, ...]]


_INDEX_CACHE: dict[tuple[str, float], _CorpusIndex] = {}
_INDEX_LOCK = threading.Lock()


def _coerce_record(record: Mapping[str, Any], *, source: str, line_no: int) -> Document:
    external_id = record.get("id", record.get("external_id", record.get("paper_id")))
    title = record.get("title")
    abstract = record.get("abstract")
    if isinstance(abstract, list):  # SciTLDR-style sentence lists
        abstract = " ".join(str(s).strip() for s in abstract)
    if not external_id or not isinstance(title, str) or not isinstance(abstract, str):
        raise BackendError(
            f"Corpus {source} line {line_no}: every record needs a non-empty 'id', a 'title' and an 'abstract'.",
            transient=False,
        )
    authors = record.get("authors") or ()
    if isinstance(authors, str):
        authors = tuple(a.strip() for a in authors.split(",") if a.strip())
    year = record.get("year")
    return Document(
        external_id=str(external_id),
        title=title.strip(),
        abstract=abstract.strip(),
        url=str(record.get("url") or ""),
        year=int(year) if isinstance(year, int | str) and str(year).isdigit() else None,
        venue=str(record.get("venue") or ""),
        authors=tuple(str(a) for a in authors),
    )


def _build_index(path: Path) -> _CorpusIndex:
    documents: list[Document] = []
    seen: set[str] = set()
    try:
        with path.open(encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise BackendError(
                        f"Corpus {path} line {line_no} is not valid JSON: {exc.msg}.", transient=False
                    ) from exc
                if not isinstance(record, dict):
                    raise BackendError(f"Corpus {path} line {line_no} is not a JSON object.", transient=False)
                document = _coerce_record(record, source=str(path), line_no=line_no)
                if document.external_id in seen:
                    raise BackendError(
                        f"Corpus {path} line {line_no}: duplicate id {document.external_id!r}.", transient=False
                    )
                seen.add(document.external_id)
                documents.append(document)
    except OSError as exc:
        raise BackendError(f"Cannot read corpus {path}: {exc.strerror or exc}.", transient=False) from exc
    if not documents:
        raise BackendError(f"Corpus {path} holds no documents.", transient=False)

    term_freqs = tuple(Counter(tokenize(f"{d.title} {d.abstract}")) for d in documents)
    doc_lengths = tuple(sum(tf.values()) for tf in term_freqs)
    postings: dict[str, list[int]] = {}
    for index, tf in enumerate(term_freqs):
        for term in tf:
            postings.setdefault(term, []).append(index)
    return _CorpusIndex(
        documents=tuple(documents),
        term_freqs=term_freqs,
        doc_lengths=doc_lengths,
        avg_doc_length=(sum(doc_lengths) / len(doc_lengths)) or 1.0,
        doc_freq={term: len(ids) for term, ids in postings.items()},
        postings={term: tuple(ids) for term, ids in postings.items()},
    )


def load_corpus_index(path: str | Path) -> _CorpusIndex:
    """Load and index a corpus once per process (re-read only if the file changes)."""
    resolved = Path(path).expanduser().resolve()
    try:
        mtime = resolved.stat().st_mtime
    except OSError as exc:
        raise BackendError(
            f"Corpus file {resolved} not found or unreadable: {exc.strerror or exc}.", transient=False
        ) from exc
    key = (str(resolved), mtime)
    with _INDEX_LOCK:
        index = _INDEX_CACHE.get(key)
        if index is None:
            index = _build_index(resolved)
            for stale in [k for k in _INDEX_CACHE if k[0] == key[0]]:
                del _INDEX_CACHE[stale]
            _INDEX_CACHE[key] = index
    return index


_SUPPORTED_FILTERS = ("year_min", "year_max", "venue")


class DemoCorpusRetrieval:
    """Okapi BM25 over title + abstract of a JSONL corpus (default: the bundled demo corpus).

    Parameters: k1 = 1.2 (term-frequency saturation) and b = 0.75 (length normalisation), the
    usual defaults; idf = ln(1 + (N - df + 0.5) / (df + 0.5)), which stays positive for terms in
    more than half of the documents. Repeated query terms count once.

    Only documents sharing at least one query term are returned, so fewer than k may come back.
    When no document shares a single query term (a typo, or a word the corpus never uses), we
    fall back to the best partial match: each query term is expanded to the corpus terms that
    share its beginning (at least 4 characters, and all but at most one character of the shorter
    term, e.g. "vaccinology" -> "vaccin"), and BM25 runs on those. If that also finds nothing, the first k documents in corpus order are
    returned with score 0.0 so that a study never starts with an empty context.

    Ties are broken by corpus order, so results are deterministic. Filters: `year_min`,
    `year_max` (inclusive) and `venue` (case-insensitive exact match); other keys are an error.
    """

    def __init__(self, path: str | Path | None = None, *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise BackendError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}.", transient=False)
        self.path = Path(path) if path is not None else DEFAULT_CORPUS_PATH
        self.k1 = k1
        self.b = b

    @property
    def index(self) -> _CorpusIndex:
        return load_corpus_index(self.path)

    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]:
        if k < 1:
            raise BackendError(f"k must be at least 1, got {k}.", transient=False)
        index = self.index
        allowed = self._allowed(index, filters)
        terms = list(dict.fromkeys(tokenize(query)))
        scores = self._bm25(index, [t for t in terms if t in index.doc_freq], allowed)
        if not scores:
            scores = self._bm25(index, self._expand_partial(index, terms), allowed)
        if not scores:
            candidates = [i for i in range(len(index.documents)) if allowed is None or i in allowed]
            scores = dict.fromkeys(candidates[:k], 0.0)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [replace(index.documents[i], score=round(score, 6)) for i, score in ranked]

    def _bm25(self, index: _CorpusIndex, terms: Iterable[str], allowed: set[int] | None) -> dict[int, float]:
        n_docs = len(index.documents)
        scores: dict[int, float] = {}
        for term in terms:
            df = index.doc_freq.get(term, 0)
            if df == 0:
                continue
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            for i in index.postings[term]:
                if allowed is not None and i not in allowed:
                    continue
                tf = index.term_freqs[i][term]
                norm = self.k1 * (1.0 - self.b + self.b * index.doc_lengths[i] / index.avg_doc_length)
                scores[i] = scores.get(i, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        return scores

    @staticmethod
    def _expand_partial(index: _CorpusIndex, terms: Sequence[str]) -> list[str]:
        """Corpus terms sharing a prefix with a query term (>= 4 characters, at most one short of the shorter)."""
        expanded: list[str] = []
        for term in terms:
            if len(term) < 4:
                continue
            for candidate in sorted(index.doc_freq):
                shared = len(os.path.commonprefix([term, candidate]))
                if shared >= 4 and shared >= min(len(term), len(candidate)) - 1:
                    expanded.append(candidate)
        return list(dict.fromkeys(expanded))

    @staticmethod
    def _allowed(index: _CorpusIndex, filters: Mapping[str, Any] | None) -> set[int] | None:
        if not filters:
            return None
        unknown = sorted(set(filters) - set(_SUPPORTED_FILTERS))
        if unknown:
            raise BackendError(
                f"Unsupported filter(s) {', '.join(unknown)} for the demo corpus; use {', '.join(_SUPPORTED_FILTERS)}.",
                transient=False,
            )
        try:
            year_min = int(filters["year_min"]) if filters.get("year_min") is not None else None
            year_max = int(filters["year_max"]) if filters.get("year_max") is not None else None
        except (TypeError, ValueError) as exc:
            raise BackendError("Filters year_min and year_max must be whole years.", transient=False) from exc
        venue = filters.get("venue")
        allowed: set[int] = set()
        for i, doc in enumerate(index.documents):
            if year_min is not None and (doc.year is None or doc.year < year_min):
                continue
            if year_max is not None and (doc.year is None or doc.year > year_max):
                continue
            if venue is not None and doc.venue.casefold() != str(venue).casefold():
                continue
            allowed.add(i)
        return allowed


# --------------------------------------------------------------------------------------------
# Generation: extractive, query-focused, persona-aware summaries with citations
# --------------------------------------------------------------------------------------------

STRATEGY_CENTROID = "extractive-centroid"
STRATEGY_MMR = "extractive-mmr"
STRATEGIES = (STRATEGY_CENTROID, STRATEGY_MMR)

# Role cues: if any trigger occurs in the persona, its cue words join the persona vector.
# They name what that kind of reader looks for in an abstract, not the topic.
ROLE_LEXICON: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "clinician": (
        tuple(
            "nurse nursing clinician clinical doctor physician midwife pharmacist paramedic gp "
            "therapist ward hospital".split()
        ),
        tuple(
            "patient patients care clinical practice staff ward wards nurses hospital implications bedside "
            "workload safety guidance managers shifts units clinicians".split()
        ),
    ),
    "researcher": (
        tuple("researcher research scientist phd postdoc academic lecturer professor analyst".split()),
        tuple(
            "method methods model models dataset statistically baseline baselines significant randomised "
            "randomized cohort regression confidence interval sample trial evaluation benchmark estimate "
            "adjusted controlled ablation participants".split()
        ),
    ),
    "student": (
        tuple("student undergraduate learner pupil novice beginner freshman layperson newcomer".split()),
        tuple(
            "introduce introduces overview basics basic means refers simple simply called known understand "
            "example everyday background idea".split()
        ),
    ),
    "teacher": (
        tuple("teacher teaching educator instructor tutor school headteacher classroom".split()),
        tuple(
            "classroom classrooms pupils teachers lesson lessons school schools children instruction reading "
            "minutes weekly staff practical implications".split()
        ),
    ),
    "policymaker": (
        tuple(
            "policy policymaker manager administrator official planner government council commissioner director".split()
        ),
        tuple(
            "cost costs policy policies implementation programme program budget scale decision planners "
            "investment guidelines regional national municipal savings".split()
        ),
    ),
    "engineer": (
        tuple("engineer developer programmer industry startup product deploy software".split()),
        tuple(
            "deploy deployment system implementation latency compute code hardware open-source production "
            "cost practical real-world robot pipeline tool released".split()
        ),
    ),
    "farmer": (
        tuple("farmer grower agronomist extension agriculture agricultural smallholder".split()),
        tuple(
            "farmers farm farms yield yields crop crops planting irrigation seed harvest income advice season "
            "fields".split()
        ),
    ),
    "journalist": (
        tuple("journalist reporter writer communicator editor".split()),
        tuple("public people findings means everyday impact risk simple communities".split()),
    ),
}

_PLAIN_EXPERTISE = ("novice", "beginner", "none", "no prior", "layperson", "lay", "introductory", "little", "new to")


def _expertise_is_plain(expertise: str) -> bool:
    text = expertise.lower()
    return any(re.search(rf"\b{re.escape(cue)}\b", text) for cue in _PLAIN_EXPERTISE)


@dataclass(frozen=True)
class PersonaProfile:
    """The persona as the summariser uses it: weighted stemmed terms, matched roles, plain-language flag."""

    terms: Mapping[str, float]
    roles: tuple[str, ...]
    plain: bool

    @classmethod
    def from_mapping(cls, persona: Mapping[str, str] | None) -> PersonaProfile | None:
        if not persona:
            return None
        # "not given" is the platform's placeholder for an unanswered question, not a preference.
        values = {
            str(key).lower(): str(value or "")
            for key, value in persona.items()
            if str(value or "").strip().lower() not in {"not given", "n/a", "-"}
        }
        text = " ".join(values.values())
        raw_words = set(_TOKEN_RE.findall(text.lower()))
        stems = set(tokenize(text))
        roles = tuple(
            role
            for role, (triggers, _cues) in ROLE_LEXICON.items()
            if any(t in raw_words or stem(t) in stems for t in triggers)
        )
        weights: dict[str, float] = {}
        # Profile words are what this reader literally cares about; role cues generalise them.
        for token in tokenize(text):
            weights[token] = weights.get(token, 0.0) + 1.0
        for role in roles:
            for cue in ROLE_LEXICON[role][1]:
                for token in tokenize(cue):
                    weights[token] = weights.get(token, 0.0) + 0.75
        plain = _expertise_is_plain(values.get("expertise", ""))
        if not weights and not plain:
            return None
        return cls(terms=dict(weights), roles=roles, plain=plain)


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
    words = _TOKEN_RE.findall(sentence.text.lower())
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
    persona_weight: float = 0.3
    plain_weight: float = 0.25
    redundancy_threshold: float = 0.5
    mmr_lambda: float = 0.6
    same_source_penalty: float = 0.5

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> _Settings:
        defaults = cls()
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            if name in settings:
                raw = settings[name]
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

    With `request.persona` (the personalised condition) a persona vector built from the profile
    and a role-cue lexicon is mixed into every sentence score, and a novice/beginner expertise
    adds a preference for short, plain sentences. Every output sentence is copied verbatim from
    one abstract and cites it as [n], n being the abstract's 1-based position in
    `request.documents`. Sentences appear by document rank, then by position in the abstract.
    """

    def generate(self, request: GenerationRequest) -> Generation:
        started = time.perf_counter()
        if request.model not in STRATEGIES:
            raise BackendError(
                f"Unknown extractive model {request.model!r}; choose one of {', '.join(STRATEGIES)}.",
                transient=False,
            )
        settings = _Settings.from_mapping(request.settings or {})
        sentences, idf = self._sentences(request.documents)
        if not sentences:
            raise BackendError("No abstract text to summarise: the retrieved documents are empty.", transient=False)
        persona = PersonaProfile.from_mapping(request.persona)

        query_vec = self._vectorise(Counter(tokenize(request.query)), idf)
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
        # No tokenizer offline: "tokens" are whitespace-separated words.
        prompt_words = len(request.prompt.split())
        raw = {
            "backend": "offline-extractive",
            "strategy": request.model,
            "persona_applied": persona is not None,
            "persona_roles": list(persona.roles) if persona else [],
            "persona_plain": bool(persona and persona.plain),
            "candidate_sentences": len(sentences),
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
        usage = {
            "prompt_tokens": prompt_words,
            "completion_tokens": n_words,
            "total_tokens": prompt_words + n_words,
            "source_words": sum(len(d.abstract.split()) for d in request.documents),
            "input_sentences": len(sentences),
            "selected_sentences": len(chosen),
        }
        return Generation(
            text=text, raw_response=raw, usage=usage, latency_s=time.perf_counter() - started, finish_reason="stop"
        )

    # -- helpers ------------------------------------------------------------------------------

    def _sentences(self, documents: Sequence[Document]) -> tuple[list[_Sentence], dict[str, float]]:
        raw: list[tuple[int, int, str, Counter[str]]] = []
        for rank, document in enumerate(documents, start=1):
            for position, sentence in enumerate(split_sentences(document.abstract)):
                counts = Counter(tokenize(sentence))
                if counts:
                    raw.append((rank, position, sentence, counts))
        df: Counter[str] = Counter()
        for *_rest, counts in raw:
            df.update(counts.keys())
        n = len(raw)
        # Smoothed idf over the sentence pool: words in every sentence still weigh a little.
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        sentences = [
            _Sentence(rank, position, text, len(text.split()), self._vectorise(counts, idf))
            for rank, position, text, counts in raw
        ]
        return sentences, idf

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


def _cite(sentence: str, rank: int) -> str:
    """Put the citation before the closing full stop ("... fell by 12% [3].") when there is one."""
    match = re.search(r"([.!?])([\"')\]]?)$", sentence)
    if match and not match.group(2):
        return f"{sentence[:-1]} [{rank}]{match.group(1)}"
    return f"{sentence} [{rank}]"


def uncite(summary_sentence: str) -> tuple[str, int]:
    """Invert `_cite`: the verbatim source sentence and its citation number."""
    match = re.fullmatch(r"(?s)(.*?) \[(\d+)\]([.!?]?)", summary_sentence.strip())
    if not match:
        raise ValueError(f"Not a cited summary sentence: {summary_sentence!r}")
    return match.group(1) + match.group(3), int(match.group(2))


def split_cited(summary: str) -> list[str]:
    """Split a summary from this backend into its cited sentences."""
    return [part.strip() for part in re.findall(r".*? \[\d+\][.!?]?(?=\s|$)", summary.strip()) if part.strip()]
