"""The metric registry: every named output, its family, inputs and the implementation that computes it.

An implementation (a :class:`MetricGroup`) may compute several outputs at once
(``rouge`` gives rouge1/rouge2/rougeL, abstractiveness gives ten), but every output
has its own :class:`MetricSpec` and is requested by its own name.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kernel.text import tokenize
from modelserver import map_concurrently
from scoring.core import abstractiveness as abstr
from scoring.core import datastats as ds
from scoring.core import lexical
from scoring.core.embeddings import (
    bertscore,
    embeddings_unavailable_reason,
    load_model,
    sentence_cosine,
)
from scoring.core.factuality import FACTUALITY_METRICS, FactualityMetric, transformers_unavailable_reason
from scoring.core.judges import (
    NO_JUDGE_REASON,
    PERSONA_RUBRIC_METRICS,
    PROMPT_VERSIONS,
    RUBRIC_METRICS,
    RUBRICS,
    JudgeError,
    JudgeRunner,
    rubric_needs,
)
from scoring.core.lcs import LcsSource
from scoring.core.source_free import blanc_help, summaqa, supert

__all__ = ["FAMILIES", "INPUTS", "MetricGroup", "MetricSpec", "RowOutcome", "ScoringContext", "groups", "specs_by_name"]

Family = Literal["lexical", "datastats", "abstractiveness", "embedding", "source_free", "factuality", "llm_judge"]
FAMILIES: tuple[str, ...] = (
    "lexical",
    "datastats",
    "abstractiveness",
    "embedding",
    "source_free",
    "factuality",
    "llm_judge",
)
INPUTS: frozenset[str] = frozenset({"source", "reference", "query", "persona"})


@dataclass(frozen=True)
class MetricSpec:
    """What a metric is: its name, family, required inputs besides the summary, direction and version.

    ``higher_is_better`` is the side a metric votes for in a pairwise comparison (for descriptive
    statistics such as AR and its risk band: the larger value, i.e. more abstraction, not better quality).
    ``varies_by_side`` is False for a metric of the inputs two candidates of one query share (RA depends
    only on the reference and the source): it cannot tell the two sides of a match apart, so agreement
    statistics leave it out.
    """

    name: str
    family: str
    needs: frozenset[str]
    higher_is_better: bool
    version: str
    description: str
    varies_by_side: bool = True


@dataclass
class RowOutcome:
    """Values computed for one row, and a readable reason for each requested output that failed."""

    values: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class ScoringContext:
    """What a scoring run is configured with beyond the rows."""

    judge: JudgeRunner | None = None
    embedding_model: str | None = None
    #: called before each row of a row-wise metric and each batch of a batched one: a caller's chance to
    #: pause between units of work (the platform's research work yields to annotator work there)
    pause: Callable[[], None] | None = None


Row = Mapping[str, str]


class MetricGroup:
    """One implementation and the outputs it computes."""

    key: str = ""
    specs: tuple[MetricSpec, ...] = ()
    #: compute() calls ctx.pause before each row (else score_rows calls it before each batch)
    pauses_per_row: bool = False
    #: its work is a model server's, not this host's CPU: it never pauses for the host's annotator work (the
    #: model server's lanes make it give way there, modelserver.limits)
    pauses: bool = True
    #: runs with no network once its optional dependencies import
    offline: bool = True
    #: needs the optional embeddings extra
    uses_embeddings: bool = False

    def unavailable_reason(self, ctx: ScoringContext) -> str | None:
        """Why none of this group's outputs can be computed in this run, or None."""
        if self.uses_embeddings:
            return embeddings_unavailable_reason()
        return None

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        raise NotImplementedError


def _error_text(exc: BaseException) -> str:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, ValueError | JudgeError | RuntimeError):
        return message
    return f"{type(exc).__name__}: {message}"


class RowwiseGroup(MetricGroup):
    """Outputs computed one row at a time by a plain function returning {output: value}."""

    pauses_per_row = True

    def __init__(self, key: str, specs: Sequence[MetricSpec], function: Callable[[Row, frozenset[str]], RowOutcome]):
        self.key = key
        self.specs = tuple(specs)
        self._function = function

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        outcomes: list[RowOutcome] = []
        for row in rows:
            if ctx.pause is not None:
                ctx.pause()
            try:
                outcomes.append(self._function(row, wanted))
            except Exception as exc:  # one bad row must not stop the others
                outcomes.append(RowOutcome(errors=dict.fromkeys(wanted, _error_text(exc))))
        return outcomes


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _spec(
    name: str,
    family: Family,
    needs: Sequence[str],
    version: str,
    description: str,
    *,
    higher: bool = True,
    varies_by_side: bool = True,
) -> MetricSpec:
    return MetricSpec(
        name=name,
        family=family,
        needs=frozenset(needs),
        higher_is_better=higher,
        version=version,
        description=description,
        varies_by_side=varies_by_side,
    )


# -- lexical ----------------------------------------------------------------------------


def _rouge_row(row: Row, wanted: frozenset[str]) -> RowOutcome:
    return RowOutcome(values=lexical.rouge(row["summary"], row["reference"]))


def _single(
    name: str, function: Callable[[str, str], float], other: str
) -> Callable[[Row, frozenset[str]], RowOutcome]:
    def run(row: Row, wanted: frozenset[str]) -> RowOutcome:
        return RowOutcome(values={name: function(row["summary"], row[other])})

    return run


# -- datastats / abstractiveness --------------------------------------------------------


def _datastats_row(row: Row, wanted: frozenset[str]) -> RowOutcome:
    return RowOutcome(values=ds.datastats(row["summary"], row["source"]).as_metrics())


@functools.lru_cache(maxsize=64)
def _tokens(text: str) -> tuple[str, ...]:
    # Sources repeat across the systems summarising one document; tokenise each once.
    return tuple(tokenize(text))


@functools.lru_cache(maxsize=64)
def _lcs_source(text: str) -> LcsSource:
    # Likewise one LcsSource per source text: from its third text on, the LCS costs only that text's tokens.
    return LcsSource(_tokens(text))


def _abstractiveness_undefined(
    suffix: str, source: Sequence[str], reference: Sequence[str], summary: Sequence[str]
) -> str | None:
    if not source:
        return "the source has no tokens"
    minimum = 2 if suffix == "2" else 1
    unit = "bigram" if suffix == "2" else ("unigram" if suffix == "1" else "LCS")
    for label, tokens in (("reference", reference), ("summary", summary)):
        if len(tokens) < minimum:
            return f"{unit} overlap is undefined: the {label} has {len(tokens)} token{'s' if len(tokens) != 1 else ''}"
    return None


def _abstractiveness_row(row: Row, wanted: frozenset[str]) -> RowOutcome:
    source, reference, summary = _tokens(row["source"]), _tokens(row["reference"]), tokenize(row["summary"])
    outcome = RowOutcome()
    for suffix in abstr.GRANULARITIES:
        names = [f"ra_{suffix}", f"sa_{suffix}", f"ar_{suffix}"] + (["ar_risk"] if suffix == "2" else [])
        if not wanted.intersection(names):
            continue
        problem = _abstractiveness_undefined(suffix, source, reference, summary)
        if problem is not None:
            outcome.errors.update(dict.fromkeys(names, problem))
            continue
        lcs_source = _lcs_source(row["source"]) if suffix == "lcs" else None
        scores = abstr.granularity_scores(suffix, source, reference, summary, lcs_source=lcs_source)
        outcome.values.update({f"ra_{suffix}": scores.ra, f"sa_{suffix}": scores.sa, f"ar_{suffix}": scores.ar})
        if suffix == "2":
            outcome.values["ar_risk"] = float(abstr.risk_code(scores.ar))
    return outcome


# -- embeddings and source-free ---------------------------------------------------------


class _BatchGroup(MetricGroup):
    """Outputs computed for a whole batch at once (model inference)."""

    def __init__(
        self,
        key: str,
        specs: Sequence[MetricSpec],
        function: Callable[[Sequence[Row], ScoringContext], list[dict[str, float]]],
        *,
        offline: bool = True,
        uses_embeddings: bool = True,
    ) -> None:
        self.key = key
        self.specs = tuple(specs)
        self.offline = offline
        self.uses_embeddings = uses_embeddings
        self._function = function

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        try:
            values = self._function(rows, ctx)
        except Exception as exc:
            if len(rows) == 1:
                return [RowOutcome(errors=dict.fromkeys(wanted, _error_text(exc)))]
            # Find which rows fail rather than failing the batch.
            return [outcome for row in rows for outcome in self.compute([row], wanted, ctx)]
        return [RowOutcome(values=v) for v in values]


def _bertscore_batch(rows: Sequence[Row], ctx: ScoringContext) -> list[dict[str, float]]:
    model = load_model(ctx.embedding_model)
    results = bertscore([r["summary"] for r in rows], [r["reference"] for r in rows], model=model)
    return [{"bertscore_p": s.precision, "bertscore_r": s.recall, "bertscore_f1": s.f1} for s in results]


def _cosine_batch(rows: Sequence[Row], ctx: ScoringContext) -> list[dict[str, float]]:
    model = load_model(ctx.embedding_model)
    values = sentence_cosine([r["summary"] for r in rows], [r["reference"] for r in rows], model=model)
    return [{"embedding_cosine": v} for v in values]


def _supert_batch(rows: Sequence[Row], ctx: ScoringContext) -> list[dict[str, float]]:
    model = load_model(ctx.embedding_model)
    return [{"supert": v} for v in supert([r["summary"] for r in rows], [r["source"] for r in rows], model=model)]


class _TransformersGroup(MetricGroup):
    """Metrics on Hugging Face weights that are not shipped here; fail per run with the loader's reason."""

    pauses_per_row = True

    def __init__(self, key: str, specs: Sequence[MetricSpec], function: Callable[[Row], dict[str, float]]) -> None:
        self.key = key
        self.specs = tuple(specs)
        self.offline = False
        self._function = function

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        outcomes: list[RowOutcome] = []
        for row in rows:
            if ctx.pause is not None:
                ctx.pause()
            try:
                outcomes.append(RowOutcome(values=self._function(row)))
            except Exception as exc:
                outcomes.append(RowOutcome(errors=dict.fromkeys(wanted, _error_text(exc))))
        return outcomes


def _blanc_row(row: Row) -> dict[str, float]:
    return {"blanc_help": blanc_help(row["summary"], row["source"]).score}


def _summaqa_row(row: Row) -> dict[str, float]:
    result = summaqa(row["summary"], row["source"])
    return {"summaqa_f1": result.f1, "summaqa_prob": result.probability}


# -- factuality (seed 003) --------------------------------------------------------------


class _FactualityGroup(MetricGroup):
    """One of seed 003's factuality metrics on local transformers weights; a whole batch of rows at once."""

    offline = False  # runs where its weights are; `--metrics offline` does not assume they are here
    uses_embeddings = True

    def __init__(self, metric: FactualityMetric) -> None:
        self.key = f"factuality:{metric.name}"
        self.metric = metric
        self.specs = (
            _spec(
                metric.name,
                "factuality",
                ["source"],
                f"{metric.label} ({metric.paper}), {metric.model_id}, transformers {_version('transformers')}",
                f"{metric.description} Needs local weights (METRICS_WEIGHTS_DIR; docs/metrics.md).",
            ),
        )

    def unavailable_reason(self, ctx: ScoringContext) -> str | None:
        return transformers_unavailable_reason() or self.metric.unavailable_reason()

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        try:
            values = self.metric.score([r["summary"] for r in rows], [r["source"] for r in rows])
        except Exception as exc:
            if len(rows) == 1:
                return [RowOutcome(errors=dict.fromkeys(wanted, _error_text(exc)))]
            # One row without sentences must not cost the batch its scores: find it row by row.
            return [outcome for row in rows for outcome in self.compute([row], wanted, ctx)]
        return [RowOutcome(values={self.metric.name: v}) for v in values]


# -- LLM judges -------------------------------------------------------------------------


class _JudgeGroup(MetricGroup):
    """One LLM-judge metric; rows are judged concurrently up to the server's concurrency limit."""

    offline = False
    pauses = False

    def __init__(self, spec: MetricSpec) -> None:
        self.key = f"judge:{spec.name}"
        self.specs = (spec,)

    def unavailable_reason(self, ctx: ScoringContext) -> str | None:
        return NO_JUDGE_REASON if ctx.judge is None else None

    def compute(self, rows: Sequence[Row], wanted: frozenset[str], ctx: ScoringContext) -> list[RowOutcome]:
        judge = ctx.judge
        assert judge is not None
        name = self.specs[0].name

        def one(row: Row) -> RowOutcome:
            try:
                return RowOutcome(values={name: judge.score(name, row)})
            except Exception as exc:
                return RowOutcome(errors={name: _error_text(exc)})

        return map_concurrently(one, rows, concurrency=judge.concurrency)


def _judge_specs() -> list[MetricSpec]:
    rubric_kinds = (
        (
            RUBRIC_METRICS,
            False,
            "rubric",
            "G-Eval-style 1-5 rating of {dimension} by an LLM judge (uses the query when present). {rubric}",
        ),
        (
            PERSONA_RUBRIC_METRICS,
            True,
            "persona_rubric",
            "Persona-conditioned 1-5 rating of {dimension}, judged for the reader's profile and query.",
        ),
    )
    specs: list[MetricSpec] = [
        _spec(
            name,
            "llm_judge",
            sorted(rubric_needs(dimension, persona=persona)),
            f"prompt {PROMPT_VERSIONS[prompt]}",
            description.format(dimension=dimension, rubric=RUBRICS[dimension]),
        )
        for metrics, persona, prompt, description in rubric_kinds
        for name, dimension in metrics.items()
    ]
    fact_judges = (
        (
            "factscore",
            ["source"],
            ("facts", "support"),
            "FActScore: share of the summary's atomic facts (extracted by the judge) that the source supports.",
        ),
        (
            "persona_precision",
            ["persona", "query"],
            ("facts", "persona_relevance"),
            "Persona Precision: share of the summary's atomic facts judged relevant to the persona's query.",
        ),
        (
            "persona_recall",
            ["persona", "query"],
            ("needs", "coverage"),
            "Persona Recall: share of the persona's information nuggets (listed by the judge, from the source "
            "when given) that the summary covers.",
        ),
    )
    for name, needs, (first, second), description in fact_judges:
        specs.append(
            _spec(
                name,
                "llm_judge",
                needs,
                f"prompts {PROMPT_VERSIONS[first]}+{PROMPT_VERSIONS[second]}",
                description,
            )
        )
    return specs


# -- the registry -----------------------------------------------------------------------


@functools.cache
def groups() -> tuple[MetricGroup, ...]:
    """All metric implementations, in display order."""
    rouge_v = f"rouge-score {_version('rouge-score')}, Porter stemmer, Unicode tokens"
    sacre_v = f"sacrebleu {_version('sacrebleu')}"
    meteor_v = f"nltk {_version('nltk')} meteor_score, {lexical.METEOR_VARIANT}"
    meteor_note = (
        "with WordNet synonyms"
        if lexical.wordnet_available()
        else "exact and Porter-stem matches only: WordNet is not installed here and cannot be downloaded, "
        "so the synonym stage is off and scores can be lower than full METEOR"
    )
    core_v = "satisfy-core 1"
    out: list[MetricGroup] = [
        RowwiseGroup(
            "rouge",
            [
                _spec("rouge1", "lexical", ["reference"], rouge_v, "ROUGE-1 F1: unigram overlap with the reference."),
                _spec("rouge2", "lexical", ["reference"], rouge_v, "ROUGE-2 F1: bigram overlap with the reference."),
                _spec(
                    "rougeL",
                    "lexical",
                    ["reference"],
                    rouge_v,
                    "ROUGE-L F1: longest common subsequence with the reference.",
                ),
            ],
            _rouge_row,
        ),
        RowwiseGroup(
            "bleu",
            [
                _spec(
                    "bleu",
                    "lexical",
                    ["reference"],
                    f"{sacre_v}, sentence BLEU, 13a, exp smoothing, effective order",
                    "Sentence-level BLEU against the reference, 0-1 scale.",
                )
            ],
            _single("bleu", lexical.bleu, "reference"),
        ),
        RowwiseGroup(
            "chrf",
            [
                _spec(
                    "chrf",
                    "lexical",
                    ["reference"],
                    f"{sacre_v}, chrF (n=6, beta=2)",
                    "Sentence-level chrF (character n-gram F-score) against the reference, 0-1 scale.",
                )
            ],
            _single("chrf", lexical.chrf, "reference"),
        ),
        RowwiseGroup(
            "meteor",
            [_spec("meteor", "lexical", ["reference"], meteor_v, f"METEOR against the reference, {meteor_note}.")],
            _single("meteor", lexical.meteor, "reference"),
        ),
        RowwiseGroup(
            "datastats",
            [
                _spec(
                    "coverage",
                    "datastats",
                    ["source"],
                    core_v,
                    "Extractive fragment coverage: share of summary tokens inside fragments copied from the source.",
                ),
                _spec(
                    "density",
                    "datastats",
                    ["source"],
                    core_v,
                    "Extractive fragment density: mean squared fragment length per summary token.",
                ),
                _spec("compression", "datastats", ["source"], core_v, "Source tokens per summary token."),
                *(
                    _spec(
                        f"novel_{n}gram",
                        "datastats",
                        ["source"],
                        core_v,
                        f"Share of distinct summary {n}-grams that do not occur in the source.",
                    )
                    for n in (1, 2, 3)
                ),
                _spec("summary_length", "datastats", ["source"], core_v, "Summary length in tokens."),
            ],
            _datastats_row,
        ),
        RowwiseGroup(
            "abstractiveness",
            [
                *(
                    spec
                    for suffix, unit in (("1", "unigram"), ("2", "bigram"), ("lcs", "LCS"))
                    for spec in (
                        _spec(
                            f"ra_{suffix}",
                            "abstractiveness",
                            ["source", "reference"],
                            core_v,
                            f"Reference Abstraction at {unit} level: HM(R, O) (1 - c_R)^3. Depends only on the "
                            "reference and the source, which both sides of a match share.",
                            varies_by_side=False,
                        ),
                        _spec(
                            f"sa_{suffix}",
                            "abstractiveness",
                            ["source", "reference"],
                            core_v,
                            f"Summary Abstraction at {unit} level: HM(S, O) (1 - c_S)^3.",
                        ),
                        _spec(
                            f"ar_{suffix}",
                            "abstractiveness",
                            ["source", "reference"],
                            core_v,
                            f"Abstraction Ratio at {unit} level: (1 - c_S)^3 / ((1 - c_R)^3 + 1e-8).",
                        ),
                    )
                ),
                _spec(
                    "ar_risk",
                    "abstractiveness",
                    ["source", "reference"],
                    core_v,
                    "Hallucination risk band on bigram AR as an ordinal code: 0 extractive (AR < 0.8), "
                    "1 balanced (0.8-1.2), 2 moderate (1.2-2.0], 3 high (> 2.0). Votes like ar_2, of which it "
                    "is a step function: for the more abstractive side.",
                ),
            ],
            _abstractiveness_row,
        ),
        _BatchGroup(
            "bertscore",
            [
                _spec(
                    f"bertscore_{suffix}",
                    "embedding",
                    ["reference"],
                    "greedy token matching, last layer, no idf; model all-MiniLM-L6-v2 unless configured",
                    f"BERTScore-style {what} of contextual token embeddings against the reference.",
                )
                for suffix, what in (("p", "precision"), ("r", "recall"), ("f1", "F1"))
            ],
            _bertscore_batch,
        ),
        _BatchGroup(
            "embedding_cosine",
            [
                _spec(
                    "embedding_cosine",
                    "embedding",
                    ["reference"],
                    "mean-pooled sentence embedding; model all-MiniLM-L6-v2 unless configured",
                    "Cosine similarity of summary and reference sentence embeddings.",
                )
            ],
            _cosine_batch,
        ),
        _BatchGroup(
            "supert",
            [
                _spec(
                    "supert",
                    "source_free",
                    ["source"],
                    "pseudo-reference = 10 most central source sentences; greedy token F1; all-MiniLM-L6-v2",
                    "SUPERT-style: similarity of the summary to a pseudo-reference of salient source sentences.",
                )
            ],
            _supert_batch,
        ),
        _TransformersGroup(
            "blanc",
            [
                _spec(
                    "blanc_help",
                    "source_free",
                    ["source"],
                    "BLANC-help, bert-base-uncased, gap 6, min token length 4",
                    "BLANC-help: gain in masked-word accuracy on the source when the summary is read first. "
                    "Needs bert-base-uncased weights, which are not shipped here.",
                )
            ],
            _blanc_row,
        ),
        _TransformersGroup(
            "summaqa",
            [
                _spec(
                    "summaqa_f1",
                    "source_free",
                    ["source"],
                    "SummaQA, bert-large-uncased-whole-word-masking-finetuned-squad + spaCy en_core_web_sm",
                    "SummaQA answer F1 on entity cloze questions from the source, answered from the summary. "
                    "Needs QA and NER weights, which are not shipped here.",
                ),
                _spec(
                    "summaqa_prob",
                    "source_free",
                    ["source"],
                    "SummaQA, bert-large-uncased-whole-word-masking-finetuned-squad + spaCy en_core_web_sm",
                    "SummaQA mean answer confidence on entity cloze questions from the source.",
                ),
            ],
            _summaqa_row,
        ),
        *(_FactualityGroup(metric) for metric in FACTUALITY_METRICS),
        *(_JudgeGroup(spec) for spec in _judge_specs()),
    ]
    return tuple(out)


@functools.cache
def specs_by_name() -> dict[str, tuple[MetricSpec, MetricGroup]]:
    """Every output name with its spec and implementation."""
    table: dict[str, tuple[MetricSpec, MetricGroup]] = {}
    for group in groups():
        for spec in group.specs:
            if spec.name in table:
                raise RuntimeError(f"metric name {spec.name!r} registered twice")
            table[spec.name] = (spec, group)
    return table
