"""What a chat call is configured with, what it returns and how it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LANES", "ChatConfig", "ChatResult", "LLMError"]

LANES = ("annotator", "research")


@dataclass(frozen=True)
class ChatConfig:
    """Where and how to call one model; everything that changes the output is in the cache key."""

    base_url: str
    model: str
    api_key: str = "EMPTY"
    temperature: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    timeout: float = 60.0
    max_retries: int = 3
    concurrency: int = 4
    backoff_s: float = 0.5
    """First backoff delay in seconds; doubles on each retry, with jitter, capped at 20 s."""
    base_urls: tuple[str, ...] = ()
    """Replicas of the model (base_url is then the first); each gets up to `concurrency` calls at once."""
    lane: str = "annotator"
    """Whose call this is: "annotator" (a summary someone is waiting for) or "research" (judges, stress-test
    rewrites). Research calls take at most a share of a server's slots and none while an annotator's call waits
    for one (`limits`); not part of the cache key: the lane changes when a call runs, not its answer."""

    def __post_init__(self) -> None:
        if self.lane not in LANES:
            raise ValueError(f"unknown model-server lane {self.lane!r}: one of {', '.join(LANES)}")

    @property
    def replicas(self) -> tuple[str, ...]:
        return self.base_urls or (self.base_url,)


@dataclass(frozen=True)
class ChatResult:
    """One completion with what is needed to audit it."""

    text: str
    raw: dict[str, Any]
    usage: dict[str, Any]
    latency_s: float
    finish_reason: str | None
    model: str
    cached: bool = False

    @property
    def truncated(self) -> bool:
        """The reply stopped at max_tokens, so it may be cut off mid-answer."""
        return self.finish_reason == "length"


class LLMError(Exception):
    """A chat completion failed; `transient` says whether retrying later may help."""

    def __init__(
        self,
        reason: str,
        *,
        transient: bool,
        status: int | None = None,
        retry_after: float | None = None,
        timed_out: bool = False,
        server_answering: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.status = status
        self.retry_after = retry_after
        self.timed_out = timed_out
        """The server did not answer within the time-out (`ChatClient` then marks it slow)."""
        self.server_answering = server_answering
        """In the second half of this call's wait (for a slot, or for its reply), the server answered other calls of
        this process: it is busy, or slow on this one request, not hung (`ChatClient`; the generation then tries
        again)."""
