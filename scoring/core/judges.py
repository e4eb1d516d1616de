"""LLM-as-judge metrics over any OpenAI-compatible server (via :mod:`modelserver`).

* G-Eval-style 1-5 rubrics: relevance, consistency, fluency, coherence, informativeness,
  overall; and persona-conditioned variants that judge for one person's information need.
* The annotator-style pairwise judge: "which summary better satisfies this person's
  information need?" answered A, B or Neither, as the human annotators are asked.
* FActScore: atomic facts extracted from the summary, each checked against the source.
* Persona Precision (share of the summary's facts that serve the persona's query) and
  Persona Recall (share of the persona's information needs the summary covers).

Replies are parsed strictly: the whole reply must be one of the allowed answers (a
reply "irrelevant" is never read as "relevant"); anything else is an error with the
reply quoted, never a guess. Every prompt carries its prompt version in the system
message, so the client's input-hash cache is keyed by prompt version too. Token usage
is added up per call and per runner.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from modelserver import ChatClient, ChatConfig, ChatResult, LLMError, chat_messages

__all__ = [
    "PERSONA_RUBRIC_METRICS",
    "RUBRICS",
    "RUBRIC_METRICS",
    "FactScoreResult",
    "JudgeColumn",
    "JudgeError",
    "JudgeIdentity",
    "JudgeOutcome",
    "JudgeRunner",
    "JudgeUsage",
    "NuggetResult",
    "PairwiseVerdict",
    "judge_column",
    "judge_config_from_env",
    "parse_judge_column",
    "parse_choice",
    "parse_list",
    "parse_rating",
    "NO_JUDGE_REASON",
    "PAIRWISE_METRICS",
]

NO_JUDGE_REASON = (
    "no LLM judge configured: pass judge=ChatConfig(base_url=..., model=...) "
    "or set JUDGE_BASE_URL and JUDGE_MODEL (and JUDGE_API_KEY if the server needs one)"
)

RUBRICS: dict[str, str] = {
    "relevance": (
        "Relevance: the summary selects the important content of the source (and, when an information "
        "need is given, the content that answers it) and leaves out what does not matter."
    ),
    "consistency": (
        "Consistency: every statement in the summary is supported by the source; the summary adds no "
        "facts, numbers, names or conclusions the source does not state."
    ),
    "fluency": (
        "Fluency: each sentence is grammatical, well formed and easy to read, with no fragments, "
        "repetitions or formatting problems."
    ),
    "coherence": (
        "Coherence: the summary as a whole is well structured and well organised; sentences follow "
        "each other logically and build a clear body of information."
    ),
    "informativeness": (
        "Informativeness: the summary tells the reader a lot of useful, specific information in few "
        "words, rather than generic or vague statements."
    ),
    "overall": (
        "Overall quality: taking relevance, consistency with the source, fluency, coherence and "
        "informativeness together, how good is this summary?"
    ),
}
# Rubrics that judge the summary against its source need the source; fluency and coherence do not.
_RUBRIC_NEEDS_SOURCE = {"relevance", "consistency", "informativeness", "overall"}
RUBRIC_METRICS = {f"geval_{name}": name for name in RUBRICS}
PERSONA_RUBRIC_METRICS = {f"persona_{name}": name for name in RUBRICS}

# Prompt versions: bump one when its wording changes, so cached answers are not reused.
PROMPT_VERSIONS: dict[str, str] = {
    "rubric": "rubric/1",
    "persona_rubric": "persona-rubric/1",
    "pairwise": "pairwise/1",
    "facts": "atomic-facts/1",
    "support": "fact-support/1",
    "persona_relevance": "persona-fact-relevance/1",
    "needs": "persona-needs/1",
    "coverage": "need-coverage/1",
}


# The pairwise judge's votes per match: in the order the annotator saw (A = the match's left side), with
# A and B swapped (translated back to left/right), and combined (both orders agree, else neither).
PAIRWISE_METRICS: tuple[str, ...] = ("pairwise", "pairwise_first", "pairwise_swapped")


@dataclass(frozen=True)
class JudgeIdentity:
    """Which judge produced a score: the model and its server, part of every judge score's identity.

    ``server`` is a configured name, or the base URL's host and port; never credentials (a base URL
    with a user or password in it is refused) and never the API key.
    """

    model: str
    server: str

    def __post_init__(self) -> None:
        if not self.model.strip() or not self.server.strip():
            raise ValueError("a judge needs a model name and a server")
        if any(c in self.model + self.server for c in "\n\r\t"):
            raise ValueError("judge model and server names must be one line")

    @property
    def label(self) -> str:
        return f"{self.model}@{self.server}"

    @classmethod
    def of(cls, *, model: str, base_url: str, name: str | None = None) -> JudgeIdentity:
        return cls(model=model.strip(), server=(name or "").strip() or server_label(base_url))


def server_label(base_url: str) -> str:
    """The host[:port] of a server's base URL (what a judge's identity records when it has no name)."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"judge base URL must be an http(s) URL, not {base_url!r}")
    if parts.username or parts.password:
        raise ValueError("put the judge's credentials in JUDGE_API_KEY, not in its base URL")
    return parts.hostname + (f":{parts.port}" if parts.port else "")


def metric_prompt_version(metric: str) -> str:
    """The prompt version(s) a judge metric's value depends on (``rubric/1``, ``atomic-facts/1+fact-support/1``)."""
    if metric in RUBRIC_METRICS:
        return PROMPT_VERSIONS["rubric"]
    if metric in PERSONA_RUBRIC_METRICS:
        return PROMPT_VERSIONS["persona_rubric"]
    if metric in PAIRWISE_METRICS:
        return PROMPT_VERSIONS["pairwise"]
    pairs = {
        "factscore": ("facts", "support"),
        "persona_precision": ("facts", "persona_relevance"),
        "persona_recall": ("needs", "coverage"),
    }
    if metric in pairs:
        return "+".join(PROMPT_VERSIONS[p] for p in pairs[metric])
    raise ValueError(f"{metric!r} is not a judge metric")


JUDGE_COLUMN_PREFIX = "judge:"


@dataclass(frozen=True)
class JudgeColumn:
    metric: str
    judge: str
    prompt_version: str


def judge_column(metric: str, judge: JudgeIdentity | str, prompt_version: str | None = None) -> str:
    """The comparison-table name of a judge's metric: ``judge:<model>@<server>:<prompt version>:<metric>``."""
    label = judge.label if isinstance(judge, JudgeIdentity) else judge
    return f"{JUDGE_COLUMN_PREFIX}{label}:{prompt_version or metric_prompt_version(metric)}:{metric}"


def parse_judge_column(column: str) -> JudgeColumn | None:
    """The parts of a :func:`judge_column` name, or None for a plain metric name."""
    if not column.startswith(JUDGE_COLUMN_PREFIX):
        return None
    rest, _, metric = column[len(JUDGE_COLUMN_PREFIX) :].rpartition(":")
    label, _, prompt = rest.rpartition(":")
    if not metric or not prompt or "@" not in label:
        return None
    return JudgeColumn(metric=metric, judge=label, prompt_version=prompt)


class JudgeError(Exception):
    """A judge could not produce a value; ``str()`` is the readable reason."""


# -- strict parsing ---------------------------------------------------------------------

_WRAPPERS = "\"'`*_ \t\r\n"


def _clean(reply: str) -> str:
    """The reply without surrounding whitespace, quotes, markdown emphasis and one final period."""
    text = reply.strip().strip(_WRAPPERS)
    if text.endswith("."):
        text = text[:-1].strip(_WRAPPERS)
    return text


def _quote(reply: str) -> str:
    short = " ".join(reply.split())
    return repr(short if len(short) <= 120 else short[:117] + "...")


_RATING = re.compile(r"(?:(?:score|rating)\s*[:=]?\s*)?([0-9]+)(?:\s*/\s*5)?", re.IGNORECASE)


def parse_rating(reply: str, *, low: int = 1, high: int = 5) -> int:
    """An integer rating in [low, high] when that is the whole reply ("4", "4/5", "Score: 4").

    Anything else ("4 or 5", "about 4", "four", "6") raises JudgeError.
    """
    match = _RATING.fullmatch(_clean(reply))
    if match is None:
        raise JudgeError(f"unparseable rating reply {_quote(reply)}: expected a single integer {low}-{high}")
    value = int(match.group(1))
    if not low <= value <= high:
        raise JudgeError(f"rating {value} outside {low}-{high} in reply {_quote(reply)}")
    return value


def parse_choice(reply: str, options: Mapping[str, str]) -> str:
    """The option whose spelling (case-insensitive) is the whole reply, optionally after "Answer:".

    ``options`` maps accepted spellings to the canonical value, e.g. {"relevant": "relevant",
    "irrelevant": "irrelevant", "not relevant": "irrelevant"}. A reply that merely contains an
    option ("irrelevant" contains "relevant") does not match it.
    """
    text = _clean(reply)
    text = re.sub(r"^(?:answer|verdict|label|choice)\s*:\s*", "", text, flags=re.IGNORECASE).strip(_WRAPPERS)
    text = text[:-1].rstrip() if text.endswith(".") else text
    lowered = " ".join(text.lower().split())
    for spelling, canonical in options.items():
        if lowered == spelling.lower():
            return canonical
    allowed = " / ".join(sorted({*options.values()}))
    raise JudgeError(f"unparseable reply {_quote(reply)}: expected exactly one of {allowed}")


_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*\S)\s*$")


def parse_list(reply: str) -> list[str]:
    """Items of a bulleted or numbered list; ``NONE`` means an empty list.

    Every non-empty line must be a list item: prose around the list is an error.
    """
    if _clean(reply).upper() == "NONE":
        return []
    items: list[str] = []
    for line in reply.splitlines():
        if not line.strip():
            continue
        match = _BULLET.match(line)
        if match is None:
            raise JudgeError(f"unparseable list reply: line {_quote(line)} is not a '- ' item")
        items.append(match.group(1))
    if not items:
        raise JudgeError(f"unparseable list reply {_quote(reply)}: expected '- ' items or NONE")
    return items


_SUPPORT = {
    "supported": "supported",
    "not supported": "not supported",
    "unsupported": "not supported",
}
_RELEVANCE = {"relevant": "relevant", "irrelevant": "irrelevant", "not relevant": "irrelevant"}
_COVERAGE = {"covered": "covered", "not covered": "not covered", "uncovered": "not covered"}
_PAIRWISE = {"a": "A", "summary a": "A", "b": "B", "summary b": "B", "neither": "Neither"}


# -- results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeUsage:
    """Calls and tokens spent (cached answers count as calls and add no tokens)."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        return JudgeUsage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class JudgeOutcome:
    """One rubric judgement: the rating (or None with a reason), the raw replies and what it cost."""

    metric: str
    value: float | None
    reason: str | None
    replies: tuple[str, ...]
    usage: JudgeUsage
    prompt_version: str
    model: str


@dataclass(frozen=True)
class PairwiseVerdict:
    """The annotator-style choice between two summaries.

    With ``both_orders`` the pair is also asked with A and B swapped; ``choice`` is then
    the agreed answer, or "Neither" when the two orders disagree (``consistent`` False).
    """

    choice: Literal["A", "B", "Neither"]
    consistent: bool
    replies: tuple[str, ...]
    usage: JudgeUsage
    prompt_version: str
    model: str
    first: Literal["A", "B", "Neither"] = "Neither"
    """The answer in the order given (A = summary_a)."""
    swapped: Literal["A", "B", "Neither"] | None = None
    """The answer with A and B swapped, translated back to the order given (None without both_orders)."""


@dataclass(frozen=True)
class FactScoreResult:
    """FActScore: the share of the summary's atomic facts that the source supports."""

    score: float
    facts: tuple[str, ...]
    supported: tuple[bool, ...]
    usage: JudgeUsage


@dataclass(frozen=True)
class NuggetResult:
    """Persona Precision or Recall: nuggets and whether each was judged a hit."""

    score: float
    nuggets: tuple[str, ...]
    hits: tuple[bool, ...]
    usage: JudgeUsage


def judge_config_from_env(environ: Mapping[str, str] | None = None) -> ChatConfig | None:
    """A ChatConfig from JUDGE_BASE_URL, JUDGE_MODEL and JUDGE_API_KEY, or None when unset."""
    env = os.environ if environ is None else environ
    base_url, model = env.get("JUDGE_BASE_URL", "").strip(), env.get("JUDGE_MODEL", "").strip()
    if not base_url or not model:
        return None
    return ChatConfig(base_url=base_url, model=model, api_key=env.get("JUDGE_API_KEY", "") or "EMPTY")


def default_cache_dir() -> Path:
    """JUDGE_CACHE_DIR, else var/judge-cache in the repository (ignored by git)."""
    configured = os.environ.get("JUDGE_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "var" / "judge-cache"


# -- prompts ----------------------------------------------------------------------------


def _system(version: str, role: str) -> str:
    return f"[evaluation prompt {version}]\n{role}"


def _persona_block(persona: str, query: str) -> str:
    return f"The reader's profile:\n{persona.strip()}\n\nThe reader's information need (query):\n{query.strip()}\n\n"


def _rubric_messages(
    dimension: str, *, summary: str, source: str | None, query: str | None, persona: str | None
) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["persona_rubric" if persona is not None else "rubric"]
    role = "You are a careful evaluator of summaries. You rate one quality of a summary on a 1-5 scale."
    parts: list[str] = []
    if persona is not None:
        if not query:
            raise ValueError("a persona-conditioned rubric needs the query too")
        parts.append(_persona_block(persona, query))
        parts.append("Judge the summary from this reader's point of view: what matters is what they need.\n\n")
    elif query:
        parts.append(f"The information need the summary should answer:\n{query.strip()}\n\n")
    if source:
        parts.append(f"Source documents:\n{source.strip()}\n\n")
    parts.append(f"Summary:\n{summary.strip()}\n\n")
    parts.append(
        f"Evaluation criterion:\n{RUBRICS[dimension]}\n\n"
        "Rate the summary on this criterion from 1 (very poor) to 5 (excellent). "
        "Reply with the number only, for example: 3"
    )
    return version, chat_messages("".join(parts), system=_system(version, role))


def _pairwise_messages(
    *, query: str, persona: str, summary_a: str, summary_b: str, source: str | None
) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["pairwise"]
    role = "You take the place of a study participant who compares two summaries written for them."
    body = (
        _persona_block(persona, query)
        + (f"The papers the summaries were written from:\n{source.strip()}\n\n" if source else "")
        + f"Summary A:\n{summary_a.strip()}\n\nSummary B:\n{summary_b.strip()}\n\n"
        "Which summary better satisfies this person's information need? If neither summary meets "
        "the need, answer Neither. Reply with exactly one word: A, B or Neither."
    )
    return version, chat_messages(body, system=_system(version, role))


def _facts_messages(summary: str) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["facts"]
    role = "You break text into atomic facts: short, self-contained statements that each assert one thing."
    body = (
        f"Text:\n{summary.strip()}\n\n"
        "List every atomic fact the text states, one per line, each line starting with '- '. "
        "Resolve pronouns so that each fact stands on its own. Write nothing else. "
        "If the text states no facts, reply NONE."
    )
    return version, chat_messages(body, system=_system(version, role))


def _support_messages(fact: str, source: str) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["support"]
    role = "You check whether a statement is supported by a source text, using only that text."
    body = (
        f"Source:\n{source.strip()}\n\nStatement:\n{fact.strip()}\n\n"
        "Is the statement supported by the source? Reply with exactly 'Supported' or 'Not supported'."
    )
    return version, chat_messages(body, system=_system(version, role))


def _fact_relevance_messages(fact: str, *, persona: str, query: str) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["persona_relevance"]
    role = "You decide whether a piece of information serves a particular reader's information need."
    body = (
        _persona_block(persona, query) + f"Piece of information:\n{fact.strip()}\n\n"
        "Does this piece of information help this reader with their information need? "
        "Reply with exactly 'Relevant' or 'Irrelevant'."
    )
    return version, chat_messages(body, system=_system(version, role))


def _needs_messages(*, persona: str, query: str, source: str | None) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["needs"]
    role = "You list the pieces of information a particular reader needs from a summary."
    body = (
        _persona_block(persona, query)
        + (f"Available source documents:\n{source.strip()}\n\n" if source else "")
        + "List the distinct pieces of information (nuggets) an ideal summary must give this reader"
        + (", as far as the sources can provide them" if source else "")
        + ". One per line, each line starting with '- '. Write nothing else."
    )
    return version, chat_messages(body, system=_system(version, role))


def _coverage_messages(nugget: str, summary: str) -> tuple[str, list[dict[str, str]]]:
    version = PROMPT_VERSIONS["coverage"]
    role = "You check whether a summary conveys a given piece of information."
    body = (
        f"Summary:\n{summary.strip()}\n\nPiece of information:\n{nugget.strip()}\n\n"
        "Does the summary convey this piece of information? Reply with exactly 'Covered' or 'Not covered'."
    )
    return version, chat_messages(body, system=_system(version, role))


def _pair_choice(value: str) -> Literal["A", "B", "Neither"]:
    if value == "A":
        return "A"
    if value == "B":
        return "B"
    return "Neither"


# -- the runner -------------------------------------------------------------------------


def _usage_of(result: ChatResult) -> JudgeUsage:
    if getattr(result, "cached", False):
        return JudgeUsage(calls=1, cached_calls=1)
    usage = result.usage or {}

    def tokens(key: str) -> int:
        value = usage.get(key, 0)
        return int(value) if isinstance(value, int | float) else 0

    return JudgeUsage(calls=1, prompt_tokens=tokens("prompt_tokens"), completion_tokens=tokens("completion_tokens"))


@dataclass
class _Ledger:
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    replies: list[str] = field(default_factory=list)


class JudgeRunner:
    """Runs the judges against one model; keeps a running total of calls and tokens in ``usage``."""

    def __init__(
        self,
        config: ChatConfig,
        *,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        client: ChatClient | None = None,
    ) -> None:
        # Judges are research: they give way on the model server while an annotator's summary waits
        # (modelserver.limits, "lanes").
        self.config = replace(config, lane="research") if isinstance(config, ChatConfig) else config
        self.use_cache = use_cache
        self.client = client or ChatClient(
            self.config, cache_dir=cache_dir if cache_dir is not None else default_cache_dir()
        )
        self._lock = threading.Lock()
        self._usage = JudgeUsage()

    @property
    def usage(self) -> JudgeUsage:
        with self._lock:
            return self._usage

    @property
    def concurrency(self) -> int:
        return max(1, int(getattr(self.config, "concurrency", 4)))

    def _ask(self, messages: list[dict[str, str]], ledger: _Ledger) -> str:
        try:
            result = self.client.complete(messages, use_cache=self.use_cache)
        except LLMError as exc:
            raise JudgeError(f"judge call to {self.config.model} failed: {exc.reason}") from exc
        spent = _usage_of(result)
        ledger.usage = ledger.usage + spent
        ledger.replies.append(result.text)
        with self._lock:
            self._usage = self._usage + spent
        if result.truncated:
            raise JudgeError(f"judge reply was cut off at max_tokens={self.config.max_tokens}: {_quote(result.text)}")
        return result.text

    # rubrics

    def rubric(
        self,
        dimension: str,
        *,
        summary: str,
        source: str | None = None,
        query: str | None = None,
        persona: str | None = None,
    ) -> JudgeOutcome:
        """G-Eval-style 1-5 rating on one dimension; persona-conditioned when ``persona`` is given."""
        if dimension not in RUBRICS:
            raise ValueError(f"unknown rubric {dimension!r}; known: {', '.join(RUBRICS)}")
        if persona is not None and not query:
            raise ValueError("a persona-conditioned rubric needs the query too")
        metric = f"persona_{dimension}" if persona is not None else f"geval_{dimension}"
        version, messages = _rubric_messages(dimension, summary=summary, source=source, query=query, persona=persona)
        ledger = _Ledger()
        try:
            value: float | None = float(parse_rating(self._ask(messages, ledger)))
            reason = None
        except JudgeError as exc:
            value, reason = None, str(exc)
        return JudgeOutcome(
            metric=metric,
            value=value,
            reason=reason,
            replies=tuple(ledger.replies),
            usage=ledger.usage,
            prompt_version=version,
            model=self.config.model,
        )

    # pairwise

    def pairwise(
        self,
        *,
        query: str,
        persona: str,
        summary_a: str,
        summary_b: str,
        source: str | None = None,
        both_orders: bool = False,
    ) -> PairwiseVerdict:
        """Which summary better satisfies this person's information need: A, B or Neither.

        Raises JudgeError when a reply is not exactly one of those (or the call fails).
        """
        ledger = _Ledger()
        version, messages = _pairwise_messages(
            query=query, persona=persona, summary_a=summary_a, summary_b=summary_b, source=source
        )
        first = parse_choice(self._ask(messages, ledger), _PAIRWISE)
        choice, consistent = first, True
        unswapped: str | None = None
        if both_orders:
            _, swapped_messages = _pairwise_messages(
                query=query, persona=persona, summary_a=summary_b, summary_b=summary_a, source=source
            )
            swapped = parse_choice(self._ask(swapped_messages, ledger), _PAIRWISE)
            unswapped = {"A": "B", "B": "A", "Neither": "Neither"}[swapped]
            consistent = unswapped == first
            choice = first if consistent else "Neither"
        return PairwiseVerdict(
            choice=_pair_choice(choice),
            consistent=consistent,
            replies=tuple(ledger.replies),
            usage=ledger.usage,
            prompt_version=version,
            model=self.config.model,
            first=_pair_choice(first),
            swapped=_pair_choice(unswapped) if unswapped is not None else None,
        )

    # fact-based judges

    def atomic_facts(self, summary: str, ledger: _Ledger | None = None) -> list[str]:
        """The summary's atomic facts, as the judge lists them."""
        _, messages = _facts_messages(summary)
        return parse_list(self._ask(messages, ledger or _Ledger()))

    def factscore(self, *, summary: str, source: str) -> FactScoreResult:
        """FActScore against the source; JudgeError when the summary has no facts or a reply is unparseable."""
        ledger = _Ledger()
        facts = self.atomic_facts(summary, ledger)
        if not facts:
            raise JudgeError("the judge found no atomic facts in the summary, so FActScore is undefined")
        supported: list[bool] = []
        for fact in facts:
            _, messages = _support_messages(fact, source)
            supported.append(parse_choice(self._ask(messages, ledger), _SUPPORT) == "supported")
        return FactScoreResult(
            score=sum(supported) / len(facts), facts=tuple(facts), supported=tuple(supported), usage=ledger.usage
        )

    def persona_precision(self, *, summary: str, persona: str, query: str) -> NuggetResult:
        """Share of the summary's atomic facts judged relevant to this persona's query."""
        ledger = _Ledger()
        facts = self.atomic_facts(summary, ledger)
        if not facts:
            raise JudgeError("the judge found no atomic facts in the summary, so Persona Precision is undefined")
        hits: list[bool] = []
        for fact in facts:
            _, messages = _fact_relevance_messages(fact, persona=persona, query=query)
            hits.append(parse_choice(self._ask(messages, ledger), _RELEVANCE) == "relevant")
        return NuggetResult(score=sum(hits) / len(facts), nuggets=tuple(facts), hits=tuple(hits), usage=ledger.usage)

    def persona_recall(self, *, summary: str, persona: str, query: str, source: str | None = None) -> NuggetResult:
        """Share of the persona's information nuggets (listed by the judge) that the summary covers."""
        ledger = _Ledger()
        _, messages = _needs_messages(persona=persona, query=query, source=source)
        nuggets = parse_list(self._ask(messages, ledger))
        if not nuggets:
            raise JudgeError("the judge listed no information needs, so Persona Recall is undefined")
        hits: list[bool] = []
        for nugget in nuggets:
            _, coverage = _coverage_messages(nugget, summary)
            hits.append(parse_choice(self._ask(coverage, ledger), _COVERAGE) == "covered")
        return NuggetResult(
            score=sum(hits) / len(nuggets), nuggets=tuple(nuggets), hits=tuple(hits), usage=ledger.usage
        )

    # one entry point for the registry

    def score(self, metric: str, row: Mapping[str, str]) -> float:
        """The value of judge metric ``metric`` for one input row; JudgeError with the reason otherwise."""
        summary = row.get("summary", "")
        if metric in RUBRIC_METRICS:
            outcome = self.rubric(
                RUBRIC_METRICS[metric],
                summary=summary,
                source=row.get("source") or None,
                query=row.get("query") or None,
            )
        elif metric in PERSONA_RUBRIC_METRICS:
            outcome = self.rubric(
                PERSONA_RUBRIC_METRICS[metric],
                summary=summary,
                source=row.get("source") or None,
                query=row["query"],
                persona=row["persona"],
            )
        elif metric == "factscore":
            return self.factscore(summary=summary, source=row["source"]).score
        elif metric == "persona_precision":
            return self.persona_precision(summary=summary, persona=row["persona"], query=row["query"]).score
        elif metric == "persona_recall":
            return self.persona_recall(
                summary=summary, persona=row["persona"], query=row["query"], source=row.get("source") or None
            ).score
        else:
            raise ValueError(f"{metric!r} is not a judge metric")
        if outcome.value is None:
            raise JudgeError(outcome.reason or "the judge gave no value")
        return outcome.value


def rubric_needs(dimension: str, *, persona: bool) -> frozenset[str]:
    """Inputs a rubric metric requires (the query is used when present even without a persona)."""
    needs = {"source"} if dimension in _RUBRIC_NEEDS_SOURCE else set()
    if persona:
        needs |= {"persona", "query"}
    return frozenset(needs)


JUDGE_METRIC_NAMES: Sequence[str] = (
    *RUBRIC_METRICS,
    *PERSONA_RUBRIC_METRICS,
    "factscore",
    "persona_precision",
    "persona_recall",
)
