"""Local Hugging Face weights for the factuality metrics: where they are, how they load, batched inference.

Weights come from one folder (``METRICS_WEIGHTS_DIR``, passed in by :func:`configure`) or from the
offline Hugging Face cache; every load is ``local_files_only=True`` with the hub offline and never
``trust_remote_code``. A metric whose weights are on neither raises :class:`WeightsMissing`, whose
text names the metric, the setting, the hub model id and how to fetch it on another machine.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.core.embeddings import parse_device, resolve_device

__all__ = [
    "WEIGHTS_SETTING",
    "ClassifierModel",
    "Seq2SeqModel",
    "WeightsMissing",
    "configure",
    "current_batch_size",
    "current_device",
    "load_classifier",
    "load_seq2seq",
    "pack_sentences",
    "resolve_weights",
    "weights_dir",
]

FloatArray = npt.NDArray[np.float64]
WEIGHTS_SETTING = "METRICS_WEIGHTS_DIR"
_settings: dict[str, Any] = {"weights_dir": None, "device": "auto", "batch_size": 16}
_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


class WeightsMissing(RuntimeError):
    """A metric's weights are not on this machine; ``str()`` says what to do."""


def configure(*, weights_dir: str | Path | None = None, device: str = "auto", batch_size: int = 16) -> None:
    """This process's weights folder, device (auto | cpu | mps | cuda | cuda:N) and batch size (pairs per
    forward pass). The Django edge passes METRICS_WEIGHTS_DIR, METRICS_DEVICE and METRICS_BATCH_SIZE."""
    if batch_size < 1:
        raise ValueError(f"metrics batch size must be at least 1, not {batch_size}")
    _settings.update(
        weights_dir=str(weights_dir) if weights_dir else None, device=parse_device(device), batch_size=int(batch_size)
    )


def weights_dir() -> Path | None:
    """The configured weights folder; without one, the environment's METRICS_WEIGHTS_DIR (the plain CLIs)."""
    configured = _settings["weights_dir"] or os.environ.get(WEIGHTS_SETTING)
    return Path(configured) if configured else None


def current_device() -> str:
    return resolve_device(str(_settings["device"]))


def current_batch_size() -> int:
    return int(_settings["batch_size"])


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _folder_name(model_id: str) -> str:
    return model_id.replace("/", "__")


def _in_hf_cache(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache  # the optional embeddings extra
    except ImportError:
        return False
    found = try_to_load_from_cache(model_id, "config.json")
    return isinstance(found, str)


@dataclass(frozen=True)
class ResolvedWeights:
    """Where one metric's model loads from: a folder, or a model id found in the offline HF cache."""

    metric: str
    model_id: str
    location: str
    source: str  # "weights_dir" | "hf_cache"

    def to_dict(self) -> dict[str, str]:
        return {"metric": self.metric, "model_id": self.model_id, "location": self.location, "source": self.source}


def resolve_weights(
    metric: str, label: str, model_id: str, *, folder: str | None = None, required_file: str = "config.json"
) -> ResolvedWeights:
    """Find ``model_id``'s weights for ``metric``: METRICS_WEIGHTS_DIR/<folder, default the metric's name>,
    .../<org>__<name>, .../<org>/<name>, then the offline Hugging Face cache. Raises WeightsMissing naming
    the metric, the setting, the hub id and how to fetch it."""
    base = weights_dir()
    tried: list[str] = []
    if base is not None:
        for candidate in (base / (folder or metric), base / _folder_name(model_id), base / model_id):
            tried.append(str(candidate))
            if (candidate / required_file).is_file():
                return ResolvedWeights(metric, model_id, str(candidate), "weights_dir")
    if required_file == "config.json" and _in_hf_cache(model_id):
        return ResolvedWeights(metric, model_id, model_id, "hf_cache")
    where = (
        f"{WEIGHTS_SETTING} is {base} (looked in {', '.join(tried)})"
        if base is not None
        else f"{WEIGHTS_SETTING} is not set"
    )
    folder = f"{base if base is not None else '<METRICS_WEIGHTS_DIR>'}/{_folder_name(model_id)}"
    raise WeightsMissing(
        f"{label} ({metric}) needs the weights of {model_id}, which are not on this machine: {where}, and the "
        f"offline Hugging Face cache does not hold them. They come from the Hugging Face hub "
        f"(https://huggingface.co/{model_id}); on a machine with network run "
        f"`hf download {model_id} --local-dir {_folder_name(model_id)}`, copy that folder to "
        f"{folder} and set {WEIGHTS_SETTING} (docs/metrics.md, 'Factuality metrics')."
    )


def _load_once(key: str, loader: Callable[[], Any]) -> Any:
    with _LOCK:
        if key not in _LOADED:
            _offline()
            import transformers  # the optional embeddings extra (torch), seconds to import

            transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # logs are no terminal
            _LOADED[key] = loader()
        return _LOADED[key]


def _position_limit(config: Any, default: int) -> int:
    limit = default
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-style models reserve the first two positions for padding.
        reserved = 2 if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"} else 0
        limit = min(limit, positions - reserved)
    return limit


def pack_sentences(sentences: Sequence[str], lengths: Sequence[int], budget: int) -> list[str]:
    """Consecutive sentences joined into chunks of at most ``budget`` length units each (a longer
    sentence is a chunk of its own). Every sentence lands in exactly one chunk, in order."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for sentence, length in zip(sentences, lengths, strict=True):
        if current and used + length > budget:
            chunks.append(" ".join(current))
            current, used = [], 0
        current.append(sentence)
        used += length
    if current:
        chunks.append(" ".join(current))
    return chunks


def _batches(order: Sequence[int], size: int) -> list[list[int]]:
    return [list(order[i : i + size]) for i in range(0, len(order), size)]


class ClassifierModel:
    """A sequence-pair classifier (NLI, MiniCheck, AlignScore) with batched softmax probabilities."""

    def __init__(self, tokenizer: Any, model: Any, *, max_length: int, device: str, name: str) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.max_length = max_length
        self.device = device
        self.name = name

    def label_index(self, *names: str, default: int | None = None) -> int:
        """The output index whose label (config.id2label) contains one of ``names``, case-insensitively."""
        id2label = {int(k): str(v).lower() for k, v in (self.model.config.id2label or {}).items()}
        for wanted in names:
            for index, label in sorted(id2label.items()):
                if wanted in label:
                    return index
        if default is not None:
            return default
        raise ValueError(f"model {self.name} has no label like {' or '.join(names)} (labels: {id2label})")

    def token_count(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        ids = self.tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        return [len(x) for x in ids]

    def probabilities(
        self, premises: Sequence[str], hypotheses: Sequence[str], *, batch_size: int | None = None
    ) -> FloatArray:
        """softmax(logits) of each (premise, hypothesis) pair, one row per pair; a premise longer than the
        model's window is truncated (the hypothesis never is). Pairs run in batches sorted by length."""
        import torch  # the optional embeddings extra, seconds to import

        if len(premises) != len(hypotheses):
            raise ValueError("premises and hypotheses must have the same length")
        n_labels = int(self.model.config.num_labels)
        out = np.zeros((len(premises), n_labels), dtype=np.float64)
        if not premises:
            return out
        size = batch_size or current_batch_size()
        order = sorted(range(len(premises)), key=lambda i: len(premises[i]) + len(hypotheses[i]))
        with torch.inference_mode():
            for members in _batches(order, size):
                encoded = self.tokenizer(
                    [premises[i] for i in members],
                    [hypotheses[i] for i in members],
                    truncation="only_first",
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                encoded = {k: v.to(self.device) for k, v in encoded.items()}
                logits = self.model(**encoded).logits.float()
                probs = torch.softmax(logits, dim=-1).cpu().numpy().astype(np.float64)
                out[members] = probs
        return out


class Seq2SeqModel:
    """An encoder-decoder model (BART, T5) with batched target log-likelihoods and first-token probabilities."""

    def __init__(self, tokenizer: Any, model: Any, *, max_length: int, device: str, name: str) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.max_length = max_length
        self.device = device
        self.name = name

    def token_count(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        ids = self.tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        return [len(x) for x in ids]

    def first_token_id(self, word: str) -> int:
        ids = [i for i in self.tokenizer(word, add_special_tokens=False)["input_ids"]]
        if not ids:
            raise ValueError(f"the tokenizer of {self.name} has no token for {word!r}")
        return int(ids[0])

    def mean_log_likelihood(
        self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int | None = None
    ) -> list[float]:
        """(1/m) sum_t log p(y_t | y_<t, x) for each (source x, target y), y as the tokenizer encodes it
        (with its special tokens); the source is truncated to the model's window."""
        import torch  # the optional embeddings extra, seconds to import

        if len(sources) != len(targets):
            raise ValueError("sources and targets must have the same length")
        out = [0.0] * len(sources)
        size = batch_size or current_batch_size()
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]) + len(targets[i]))
        with torch.inference_mode():
            for members in _batches(order, size):
                src = self.tokenizer(
                    [sources[i] for i in members],
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                tgt = self.tokenizer(
                    [targets[i] for i in members],
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                labels = tgt["input_ids"].clone()
                mask = tgt["attention_mask"].bool()
                labels[~mask] = -100
                logits = self.model(
                    input_ids=src["input_ids"].to(self.device),
                    attention_mask=src["attention_mask"].to(self.device),
                    labels=labels.to(self.device),
                ).logits.float()
                logprobs = torch.log_softmax(logits, dim=-1).cpu()
                gathered = logprobs.gather(-1, tgt["input_ids"].unsqueeze(-1)).squeeze(-1)
                gathered = gathered * mask
                means = gathered.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
                for row, i in enumerate(members):
                    out[i] = float(means[row])
        return out

    def first_step_probabilities(
        self, inputs: Sequence[str], token_ids: Sequence[int], *, batch_size: int | None = None
    ) -> FloatArray:
        """softmax over the whole vocabulary at the first decoder step, read at ``token_ids``: one row per input."""
        import torch  # the optional embeddings extra, seconds to import

        out = np.zeros((len(inputs), len(token_ids)), dtype=np.float64)
        size = batch_size or current_batch_size()
        start = self.model.config.decoder_start_token_id
        if start is None:
            start = self.model.config.pad_token_id or 0
        order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
        wanted = torch.tensor(list(token_ids), dtype=torch.long)
        with torch.inference_mode():
            for members in _batches(order, size):
                enc = self.tokenizer(
                    [inputs[i] for i in members],
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                decoder = torch.full((len(members), 1), int(start), dtype=torch.long)
                logits = (
                    self.model(
                        input_ids=enc["input_ids"].to(self.device),
                        attention_mask=enc["attention_mask"].to(self.device),
                        decoder_input_ids=decoder.to(self.device),
                    )
                    .logits[:, 0, :]
                    .float()
                )
                probs = torch.softmax(logits, dim=-1).cpu()[:, wanted]
                out[members] = probs.numpy().astype(np.float64)
        return out


def _load_model(weights: ResolvedWeights, auto_class: str, default_max_length: int) -> tuple[Any, Any, int, str]:
    """A tokenizer and a model of `transformers.<auto_class>` from local files, on the configured device, with the
    input length both allow."""
    import transformers  # the optional embeddings extra (torch), seconds to import

    device = current_device()
    tokenizer = transformers.AutoTokenizer.from_pretrained(weights.location, local_files_only=True)
    model = getattr(transformers, auto_class).from_pretrained(weights.location, local_files_only=True)
    model.eval().to(device)
    limit = _position_limit(model.config, min(default_max_length, int(tokenizer.model_max_length or 10**9)))
    return tokenizer, model, limit, device


def load_classifier(weights: ResolvedWeights, *, default_max_length: int = 512) -> ClassifierModel:
    """A sequence-classification model and its tokenizer from local files, on the configured device."""

    def load() -> ClassifierModel:
        tokenizer, model, limit, device = _load_model(weights, "AutoModelForSequenceClassification", default_max_length)
        return ClassifierModel(tokenizer, model, max_length=limit, device=device, name=weights.model_id)

    loaded: ClassifierModel = _load_once(f"cls:{weights.location}@{current_device()}", load)
    return loaded


def load_seq2seq(weights: ResolvedWeights, *, default_max_length: int = 1024) -> Seq2SeqModel:
    """An encoder-decoder model and its tokenizer from local files, on the configured device."""

    def load() -> Seq2SeqModel:
        tokenizer, model, limit, device = _load_model(weights, "AutoModelForSeq2SeqLM", default_max_length)
        return Seq2SeqModel(tokenizer, model, max_length=limit, device=device, name=weights.model_id)

    loaded: Seq2SeqModel = _load_once(f"s2s:{weights.location}@{current_device()}", load)
    return loaded


def forget_loaded() -> None:
    """Drop every loaded model (tests that change the weights folder)."""
    with _LOCK:
        _LOADED.clear()
