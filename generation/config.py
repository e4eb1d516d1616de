"""The typed configuration of the external services generation calls: the model servers and OpenAlex.

Plain frozen dataclasses, so the backends that take them import no Django. They are built from Django
settings in one place, `generation.settings`; every value's default is in config/settings/base.py alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def base_urls(value: Any) -> tuple[str, ...]:
    """One model server or its replicas: a URL, a comma-separated string of them, or a list."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    return tuple(u for u in (str(item).strip() for item in items) if u)


@dataclass(frozen=True)
class ModelServerConfig:
    """The deployment's OpenAI-compatible model servers (settings LLM_* and MODEL_SERVER_*; docs/backends.md).

    A study system's backend settings override the per-call values (base URL, key, sampling, time out,
    concurrency); the process-wide ones (limit, cache, reply cap) are applied once per process by
    `generation.settings.configure_model_servers`. The API key is held here only, never stored with a run.
    """

    base_urls: tuple[str, ...]  # LLM_BASE_URLS, else LLM_BASE_URL: one server or its replicas
    api_key: str = field(repr=False)  # LLM_API_KEY ("EMPTY" for servers that need none: the OpenAI client wants one)
    temperature: float
    max_tokens: int
    seed: int | None
    timeout: float
    concurrency: int
    cache_dir: Path | None  # LLM_CACHE_DIR, the "dir" cache's folder
    # The hosts a study system's own base_url may name (MODEL_SERVER_ALLOWED_HOSTS).
    allowed_hosts: tuple[str, ...]
    # The soft time limit of one generation attempt (GENERATION_SOFT_TIME_LIMIT_S): in-process retries must fit.
    attempt_time_limit_s: float
    # Process-wide: the shared concurrency limit (a Redis URL, "" for one per process), the cache policy
    # ("dir", "cache" in a Django cache, "off") and the cap on one reply's bytes.
    limit_url: str
    lease_s: float
    research_share: float  # the share of each server's slots judges and stress-test rewrites may hold
    cache: str
    cache_alias: str
    cache_ttl: int | None
    max_response_bytes: int


@dataclass(frozen=True)
class JudgeConfig:
    """The deployment's LLM judge for scoring runs (settings JUDGE_BASE_URL, JUDGE_MODEL, JUDGE_NAME,
    JUDGE_API_KEY; docs/metrics.md). A run records the model, server and name, never the key."""

    base_url: str
    model: str
    name: str
    api_key: str = field(repr=False)

    @property
    def configured(self) -> bool:
        """Whether there is a judge to ask: a server and a model."""
        return bool(self.base_url and self.model)


@dataclass(frozen=True)
class OpenAlexConfig:
    """How to call OpenAlex's /works endpoint (settings OPENALEX_*; docs/backends.md, "OpenAlex")."""

    base_url: str
    mailto: str
    api_key: str = field(repr=False)
    timeout: float
    # In-process retries of 429, 5xx and dropped connections, on top of the retrieval task's own attempts.
    max_retries: int
    backoff_s: float
    cache_ttl: int  # seconds an answer is kept (0: not cached)
    cache_alias: str
    max_response_bytes: int
