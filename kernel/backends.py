"""The two backend interfaces of the platform and their shared value types.

A retrieval backend turns a query into ranked documents; a generation backend turns
a rendered prompt into a summary. Both are plain Python (no Django) so that they can
be used and tested on their own; errors carry a readable reason and say whether a
retry can help.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Document:
    """One retrieved paper, frozen with the query so that every candidate shares it."""

    external_id: str
    title: str
    abstract: str
    url: str = ""
    year: int | None = None
    venue: str = ""
    authors: tuple[str, ...] = ()
    score: float | None = None


@dataclass(frozen=True)
class GenerationRequest:
    """Everything a generation backend needs for one candidate summary."""

    query: str
    documents: Sequence[Document]
    prompt: str
    model: str
    persona: Mapping[str, str] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    spent_s: float = 0.0
    """Seconds this summary's earlier attempts waited on the model server: a model-server backend gives the
    summary its time-out once across attempts, so this attempt gets what remains (docs/backends.md)."""


@dataclass(frozen=True)
class Generation:
    """A finished generation with what researchers need to audit it."""

    text: str
    raw_response: Mapping[str, Any] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    finish_reason: str = ""


class BackendError(Exception):
    """A backend failed; `transient` says whether retrying may succeed, `retry_after` (seconds) when the
    service asked to be called again no sooner (a 429's Retry-After), `waited_s` how long the failed call
    waited on the service (what the summary's next attempt has less of: `GenerationRequest.spent_s`)."""

    def __init__(
        self, reason: str, *, transient: bool, retry_after: float | None = None, waited_s: float = 0.0
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.retry_after = retry_after
        self.waited_s = waited_s


class RetrievalBackend(Protocol):
    def search(self, query: str, *, k: int, filters: Mapping[str, Any] | None = None) -> list[Document]: ...


class GenerationBackend(Protocol):
    def generate(self, request: GenerationRequest) -> Generation: ...
