"""The six reference-free factuality metrics of seed 003, as each paper defines its rule over model outputs.

BARTScore, MiniCheck, SummaC-Conv, SummaC-ZS, AlignScore and UniEval run on Hugging Face transformers
(the ``embeddings`` extra) with weights from METRICS_WEIGHTS_DIR or the offline Hugging Face cache
(`scoring.core.hf_models`). Each function scores many (summary, source) pairs at once: every model call
of a batch of rows goes through the model in batches of METRICS_BATCH_SIZE.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernel.text import split_sentences
from scoring.core.hf_models import (
    ClassifierModel,
    ResolvedWeights,
    Seq2SeqModel,
    WeightsMissing,
    load_classifier,
    load_seq2seq,
    pack_sentences,
    resolve_weights,
    weights_dir,
)

__all__ = [
    "BY_NAME",
    "FACTUALITY_METRICS",
    "ConvHead",
    "FactualityMetric",
    "alignscore",
    "bartscore",
    "load_conv_head",
    "minicheck",
    "summac_conv",
    "summac_zs",
    "transformers_unavailable_reason",
    "unieval",
    "weights_manifest",
]

UNIEVAL_QUESTION = "question: Is this claim consistent with the document? </s> claim: {claim} </s> document: {document}"
CONV_HEAD_FILE = "summac_conv_head.json"


def _sentences(text: str, what: str) -> list[str]:
    sentences = split_sentences(text)
    if not sentences:
        raise ValueError(f"the {what} has no sentences")
    return sentences


class _Pairs:
    """Distinct (left, right) text pairs of a batch, each sent to the model once."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, str], int] = {}
        self.left: list[str] = []
        self.right: list[str] = []

    def add(self, left: str, right: str) -> int:
        key = (left, right)
        if key not in self.index:
            self.index[key] = len(self.left)
            self.left.append(left)
            self.right.append(right)
        return self.index[key]


def _max_then_mean(grid: Sequence[Sequence[float]]) -> float:
    """Mean over summary sentences of the max over chunks (the sentence-level aggregation of seed 003,
    SummaC, AlignScore and MiniCheck)."""
    return float(np.mean([max(row) for row in grid]))


# -- SummaC (Laban et al., TACL 2022) ---------------------------------------------------


def _nli_grid(
    summaries: Sequence[str], sources: Sequence[str], model: ClassifierModel
) -> tuple[list[list[list[int]]], np.ndarray]:
    """For each row, grid[j][i] = index of the NLI pair (source sentence i premise, summary sentence j hypothesis)."""
    pairs = _Pairs()
    grids: list[list[list[int]]] = []
    for summary, source in zip(summaries, sources, strict=True):
        doc = _sentences(source, "source")
        grids.append([[pairs.add(d, s) for d in doc] for s in _sentences(summary, "summary")])
    return grids, model.probabilities(pairs.left, pairs.right)


def summac_zs(summaries: Sequence[str], sources: Sequence[str], *, model: ClassifierModel) -> list[float]:
    """SummaC-ZS at sentence granularity (Laban et al. 2022, section 3.2): the NLI pair matrix has one cell per
    (source sentence, summary sentence), each P(entailment) - P(contradiction); a summary sentence scores the
    max over source sentences, the summary the mean over its sentences. Range -1..1."""
    entail = model.label_index("entail", "support")
    contradict = model.label_index("contradict", "refute")
    grids, probs = _nli_grid(summaries, sources, model)
    cell = probs[:, entail] - probs[:, contradict]
    return [_max_then_mean([[float(cell[i]) for i in row] for row in grid]) for grid in grids]


@dataclass(frozen=True)
class ConvHead:
    """SummaC-Conv's learned layer: histogram bin edges over P(entailment) and the linear weights on the bins."""

    bin_edges: tuple[float, ...]
    weight: tuple[float, ...]
    bias: float

    def __post_init__(self) -> None:
        if len(self.bin_edges) < 2 or len(self.weight) != len(self.bin_edges) - 1:
            raise ValueError("a SummaC-Conv head needs n+1 increasing bin edges and n weights")


def load_conv_head(path: Path) -> ConvHead:
    """Read a head file ({"bin_edges": [...], "weight": [...], "bias": b}); docs/metrics.md shows how to make
    it from SummaC's released summac_conv_vitc_sent_perc_e.bin."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return ConvHead(
        bin_edges=tuple(float(x) for x in data["bin_edges"]),
        weight=tuple(float(x) for x in data["weight"]),
        bias=float(data["bias"]),
    )


def summac_conv(
    summaries: Sequence[str], sources: Sequence[str], *, model: ClassifierModel, head: ConvHead
) -> list[float]:
    """SummaC-Conv (Laban et al. 2022, section 3.3): for each summary sentence, the P(entailment) of its
    column of the NLI pair matrix is binned into a histogram (share of source sentences per bin); the learned
    convolution (one linear layer over the bins) maps it to the sentence score; the summary score is the mean."""
    entail = model.label_index("entail", "support")
    grids, probs = _nli_grid(summaries, sources, model)
    edges = np.asarray(head.bin_edges, dtype=np.float64)
    weight = np.asarray(head.weight, dtype=np.float64)
    out: list[float] = []
    for grid in grids:
        sentence_scores = []
        for row in grid:
            column = np.clip(probs[row, entail], edges[0], edges[-1])
            counts, _ = np.histogram(column, bins=edges)
            sentence_scores.append(float(weight @ (counts / len(row)) + head.bias))
        out.append(float(np.mean(sentence_scores)))
    return out


# -- MiniCheck (Tang et al., EMNLP 2024) -------------------------------------------------


def _chunks_by_words(source: str, words: int) -> list[str]:
    sentences = _sentences(source, "source")
    return pack_sentences(sentences, [len(s.split()) for s in sentences], words)


def _chunks_by_tokens(source: str, model: ClassifierModel | Seq2SeqModel, budget: int) -> list[str]:
    sentences = _sentences(source, "source")
    return pack_sentences(sentences, model.token_count(sentences), max(budget, 1))


def minicheck(
    summaries: Sequence[str],
    sources: Sequence[str],
    *,
    model: ClassifierModel | Seq2SeqModel,
    chunk_words: int = 400,
) -> list[float]:
    """MiniCheck (Tang et al. 2024, section 3): the document is split into chunks of about ``chunk_words``
    words at sentence boundaries; a claim scores the max over chunks of P(supported | chunk, claim); claims are
    the summary's sentences and the summary scores their mean (seed 003's aggregation). P(supported) is the
    classifier's "supported" label (RoBERTa/DeBERTa checkpoints), or for the Flan-T5 checkpoint the softmax of
    the first decoder step over the answer tokens "0" and "1" given "premise: <chunk> hypothesis: <claim>"."""
    pairs = _Pairs()
    grids: list[list[list[int]]] = []
    for summary, source in zip(summaries, sources, strict=True):
        chunks = _chunks_by_words(source, chunk_words)
        grids.append([[pairs.add(c, claim) for c in chunks] for claim in _sentences(summary, "summary")])
    if isinstance(model, Seq2SeqModel):
        ids = [model.first_token_id("0"), model.first_token_id("1")]
        prompts = [f"premise: {c} hypothesis: {h}" for c, h in zip(pairs.left, pairs.right, strict=True)]
        raw = model.first_step_probabilities(prompts, ids)
        supported = raw[:, 1] / np.maximum(raw.sum(axis=1), 1e-30)
    else:
        probs = model.probabilities(pairs.left, pairs.right)
        supported = probs[:, model.label_index("support", default=1)]
    return [_max_then_mean([[float(supported[i]) for i in row] for row in grid]) for grid in grids]


# -- AlignScore (Zha et al., ACL 2023) --------------------------------------------------


def alignscore(
    summaries: Sequence[str], sources: Sequence[str], *, model: ClassifierModel, chunk_tokens: int = 350
) -> list[float]:
    """AlignScore (Zha et al. 2023, section 3.3): the context is split into chunks of about ``chunk_tokens``
    tokens at sentence boundaries and the claim into sentences; each claim sentence scores the max over chunks
    of the 3-way head's P(aligned); the score is the mean over claim sentences."""
    aligned = model.label_index("align", "entail", default=0)
    pairs = _Pairs()
    grids: list[list[list[int]]] = []
    for summary, source in zip(summaries, sources, strict=True):
        chunks = _chunks_by_tokens(source, model, min(chunk_tokens, model.max_length - 8))
        grids.append([[pairs.add(c, claim) for c in chunks] for claim in _sentences(summary, "summary")])
    probs = model.probabilities(pairs.left, pairs.right)
    return [_max_then_mean([[float(probs[i, aligned]) for i in row] for row in grid]) for grid in grids]


# -- BARTScore (Yuan et al., NeurIPS 2021) ----------------------------------------------


def bartscore(summaries: Sequence[str], sources: Sequence[str], *, model: Seq2SeqModel) -> list[float]:
    """BARTScore, faithfulness direction s -> h (Yuan et al. 2021, section 3): the mean log-likelihood of the
    summary's tokens given the source, (1/m) sum_t log p(y_t | y_<t, x). The paper truncates the source to the
    model's window; a longer source is cut into windows at sentence boundaries and the best window counts."""
    pairs = _Pairs()
    owners: list[list[int]] = []
    for summary, source in zip(summaries, sources, strict=True):
        if not summary.strip():
            raise ValueError("the summary is empty")
        chunks = _chunks_by_tokens(source, model, model.max_length - 2)
        owners.append([pairs.add(c, summary) for c in chunks])
    values = model.mean_log_likelihood(pairs.left, pairs.right)
    return [max(values[i] for i in row) for row in owners]


# -- UniEval (Zhong et al., EMNLP 2022) -------------------------------------------------


def unieval(summaries: Sequence[str], sources: Sequence[str], *, model: Seq2SeqModel) -> list[float]:
    """UniEval consistency (Zhong et al. 2022, section 3.1): a Boolean question "Is this claim consistent with
    the document?" per summary sentence; the sentence score is P("Yes") / (P("Yes") + P("No")) at the first
    decoder step; the summary score is the mean over sentences. The paper truncates the document; a longer one
    is cut into windows at sentence boundaries and the best window counts."""
    yes, no = model.first_token_id("Yes"), model.first_token_id("No")
    prompts = _Pairs()
    grids: list[list[list[int]]] = []
    for summary, source in zip(summaries, sources, strict=True):
        claims = _sentences(summary, "summary")
        overhead = max(model.token_count([UNIEVAL_QUESTION.format(claim=c, document="") for c in claims]))
        chunks = _chunks_by_tokens(source, model, model.max_length - overhead - 2)
        grids.append(
            [[prompts.add(UNIEVAL_QUESTION.format(claim=claim, document=c), "") for c in chunks] for claim in claims]
        )
    raw = model.first_step_probabilities(prompts.left, [yes, no])
    score = raw[:, 0] / np.maximum(raw.sum(axis=1), 1e-30)
    return [_max_then_mean([[float(score[i]) for i in row] for row in grid]) for grid in grids]


# -- the six as registry metrics ---------------------------------------------------------


@dataclass(frozen=True)
class FactualityMetric:
    """One metric: its output name, label, the hub model that reproduces the paper, and how to score."""

    name: str
    label: str
    model_id: str
    paper: str
    description: str
    run: Callable[[Sequence[str], Sequence[str]], list[float]]

    def weights(self) -> ResolvedWeights:
        """Where this metric's model loads from, or WeightsMissing naming the setting and the hub id."""
        return _resolve(self.name)

    def unavailable_reason(self) -> str | None:
        try:
            self.weights()
            if self.name == "summac_conv":
                _conv_head()
        except WeightsMissing as exc:
            return str(exc)
        return None

    def score(self, summaries: Sequence[str], sources: Sequence[str]) -> list[float]:
        return self.run(summaries, sources)


_MODELS = {
    # name: (label, hub model id, folder under METRICS_WEIGHTS_DIR); SummaC-ZS and -Conv share one NLI model
    "bartscore": ("BARTScore", "facebook/bart-large-cnn", "bartscore"),
    "minicheck": ("MiniCheck", "lytang/MiniCheck-Flan-T5-Large", "minicheck"),
    "summac_conv": ("SummaC-Conv", "tals/albert-xlarge-vitaminc-mnli", "summac"),
    "summac_zs": ("SummaC-ZS", "tals/albert-xlarge-vitaminc-mnli", "summac"),
    "alignscore": ("AlignScore", "yzha/AlignScore", "alignscore"),
    "unieval": ("UniEval", "MingZhong/unieval-fact", "unieval"),
}


def _resolve(name: str) -> ResolvedWeights:
    label, model_id, folder = _MODELS[name]
    return resolve_weights(name, label, model_id, folder=folder)


def _nli() -> ClassifierModel:
    return load_classifier(_resolve("summac_zs"))


def _conv_head() -> ConvHead:
    base = weights_dir()
    candidates = [base / "summac_conv" / CONV_HEAD_FILE, base / CONV_HEAD_FILE] if base is not None else []
    for path in candidates:
        if path.is_file():
            return load_conv_head(path)
    raise WeightsMissing(
        f"SummaC-Conv (summac_conv) needs its learned convolution layer as {CONV_HEAD_FILE} in "
        f"METRICS_WEIGHTS_DIR/summac_conv/ (METRICS_WEIGHTS_DIR is {base or 'not set'}), beside the NLI model "
        f"{SUMMAC_NLI}. The layer comes from SummaC's release (summac_conv_vitc_sent_perc_e.bin in "
        "https://github.com/tingofurro/summac); docs/metrics.md ('Factuality metrics') converts it offline."
    )


def _minicheck_model() -> ClassifierModel | Seq2SeqModel:
    weights = _resolve("minicheck")
    config = Path(weights.location) / "config.json"
    encoder_decoder = False
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        architectures = data.get("architectures") or []
        encoder_decoder = bool(data.get("is_encoder_decoder")) or any(
            "ConditionalGeneration" in a for a in architectures
        )
    else:  # a model id in the HF cache
        import transformers  # the optional embeddings extra (torch), seconds to import

        encoder_decoder = bool(
            transformers.AutoConfig.from_pretrained(weights.location, local_files_only=True).is_encoder_decoder
        )
    return load_seq2seq(weights, default_max_length=512) if encoder_decoder else load_classifier(weights)


SUMMAC_NLI = _MODELS["summac_zs"][1]

FACTUALITY_METRICS: tuple[FactualityMetric, ...] = (
    FactualityMetric(
        "bartscore",
        "BARTScore",
        _MODELS["bartscore"][1],
        "Yuan et al. 2021",
        "BARTScore s->h: mean log-likelihood of the summary's tokens given the source (<= 0; higher is better).",
        lambda s, d: bartscore(s, d, model=load_seq2seq(_resolve("bartscore"))),
    ),
    FactualityMetric(
        "minicheck",
        "MiniCheck",
        _MODELS["minicheck"][1],
        "Tang et al. 2024",
        "MiniCheck: P(supported) of each summary sentence, max over ~400-word source chunks, mean over sentences.",
        lambda s, d: minicheck(s, d, model=_minicheck_model()),
    ),
    FactualityMetric(
        "summac_conv",
        "SummaC-Conv",
        SUMMAC_NLI,
        "Laban et al. 2022",
        "SummaC-Conv: learned convolution over the histogram of P(entailment) of each summary sentence against "
        "every source sentence; mean over sentences.",
        lambda s, d: summac_conv(s, d, model=_nli(), head=_conv_head()),
    ),
    FactualityMetric(
        "summac_zs",
        "SummaC-ZS",
        SUMMAC_NLI,
        "Laban et al. 2022",
        "SummaC-ZS: P(entailment) - P(contradiction), max over source sentences, mean over summary sentences.",
        lambda s, d: summac_zs(s, d, model=_nli()),
    ),
    FactualityMetric(
        "alignscore",
        "AlignScore",
        _MODELS["alignscore"][1],
        "Zha et al. 2023",
        "AlignScore: P(aligned) of each summary sentence, max over ~350-token source chunks, mean over sentences.",
        lambda s, d: alignscore(s, d, model=load_classifier(_resolve("alignscore"))),
    ),
    FactualityMetric(
        "unieval",
        "UniEval",
        _MODELS["unieval"][1],
        "Zhong et al. 2022",
        "UniEval consistency: P(Yes)/(P(Yes)+P(No)) to 'Is this claim consistent with the document?' per summary "
        "sentence, mean over sentences.",
        lambda s, d: unieval(s, d, model=load_seq2seq(_resolve("unieval"))),
    ),
)

BY_NAME: dict[str, FactualityMetric] = {m.name: m for m in FACTUALITY_METRICS}


def transformers_unavailable_reason() -> str | None:
    """None when torch and transformers import; otherwise why not (the ``embeddings`` extra is missing)."""
    for module in ("torch", "transformers"):
        try:
            importlib.import_module(module)
        except Exception as exc:  # a missing or broken extra is reported, never raised
            return (
                "install the 'embeddings' extra (pip install 'satisfy[embeddings]') for torch and transformers "
                f"({module} failed to import: {type(exc).__name__}: {exc})"
            )
    return None


def weights_manifest(names: Sequence[str]) -> dict[str, dict[str, str]]:
    """For each named factuality metric: the hub model id and where its weights load from, or why they do not."""
    out: dict[str, dict[str, str]] = {}
    for name in names:
        metric = BY_NAME.get(name)
        if metric is None:
            continue
        try:
            out[name] = metric.weights().to_dict()
            if name == "summac_conv":
                base = weights_dir()
                out[name]["conv_head"] = str(base / "summac_conv" / CONV_HEAD_FILE) if base else ""
        except WeightsMissing as exc:
            out[name] = {"metric": name, "model_id": metric.model_id, "missing": str(exc)}
    return out
