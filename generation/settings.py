"""The Django side of generation: its service configurations built from Django settings, and the model-server
settings applied to a process. The only module of generation/ that reads Django settings; the defaults are in
config/settings/base.py alone."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.cache import caches

from generation.config import JudgeConfig, ModelServerConfig, OpenAlexConfig, base_urls
from generation.openalex import OpenAlexRetrieval
from modelserver.cache import KeyValueCache, configure_cache
from modelserver.client import configure_max_response_bytes
from modelserver.limits import configure_limiter


def model_servers_from_settings() -> ModelServerConfig:
    """The deployment's model servers as Django settings say now (a test's settings override included)."""
    return ModelServerConfig(
        base_urls=base_urls(settings.LLM_BASE_URLS or settings.LLM_BASE_URL),
        api_key=str(settings.LLM_API_KEY or "EMPTY"),
        temperature=float(settings.LLM_TEMPERATURE),
        max_tokens=int(settings.LLM_MAX_TOKENS),
        seed=None if settings.LLM_SEED is None else int(settings.LLM_SEED),
        timeout=float(settings.LLM_TIMEOUT),
        concurrency=int(settings.LLM_CONCURRENCY),
        cache_dir=Path(settings.LLM_CACHE_DIR) if settings.LLM_CACHE_DIR else None,
        allowed_hosts=tuple(settings.MODEL_SERVER_ALLOWED_HOSTS),
        attempt_time_limit_s=float(settings.GENERATION_SOFT_TIME_LIMIT_S),
        limit_url=str(settings.MODEL_SERVER_LIMIT_URL or ""),
        lease_s=float(settings.MODEL_SERVER_LEASE_S),
        research_share=float(settings.MODEL_SERVER_RESEARCH_SHARE),
        cache=str(settings.LLM_CACHE),
        cache_alias=str(settings.LLM_CACHE_ALIAS),
        cache_ttl=settings.LLM_CACHE_TTL,
        max_response_bytes=int(settings.MODEL_SERVER_MAX_RESPONSE_BYTES),
    )


def judge_from_settings() -> JudgeConfig:
    """The deployment's LLM judge, as Django settings say now (empty fields: none configured)."""
    return JudgeConfig(
        base_url=str(settings.JUDGE_BASE_URL).strip(),
        model=str(settings.JUDGE_MODEL).strip(),
        name=str(settings.JUDGE_NAME).strip(),
        api_key=str(settings.JUDGE_API_KEY),
    )


def openalex_from_settings() -> OpenAlexConfig:
    """How to call OpenAlex, as Django settings say now."""
    return OpenAlexConfig(
        base_url=str(settings.OPENALEX_BASE_URL),
        mailto=str(settings.OPENALEX_MAILTO),
        api_key=str(settings.OPENALEX_API_KEY),
        timeout=float(settings.OPENALEX_TIMEOUT),
        max_retries=int(settings.OPENALEX_MAX_RETRIES),
        backoff_s=float(settings.OPENALEX_BACKOFF_S),
        cache_ttl=int(settings.OPENALEX_CACHE_TTL),
        cache_alias=str(settings.OPENALEX_CACHE_ALIAS),
        max_response_bytes=int(settings.OPENALEX_MAX_RESPONSE_BYTES),
    )


def openalex_retrieval() -> OpenAlexRetrieval:
    """The OpenAlex client as the deployment configures it, answers cached in Django's OPENALEX_CACHE_ALIAS."""
    config = openalex_from_settings()
    return OpenAlexRetrieval(config, cache=caches[config.cache_alias])


def corpus_root() -> Path:
    """The folder a study's corpus_path must lie under (CORPUS_ROOT), resolved."""
    return Path(settings.CORPUS_ROOT).resolve()


_configured = False


def configure_model_servers() -> None:
    """Apply the model-server settings to this process once: the shared limit (MODEL_SERVER_LIMIT_URL,
    a Redis URL), the cache policy (LLM_CACHE: dir, cache or off) and the cap on a reply's size
    (MODEL_SERVER_MAX_RESPONSE_BYTES; docs/backends.md). Judges and stress-test rewrites in this process use
    them too."""
    global _configured
    if _configured:
        return
    config = model_servers_from_settings()
    configure_limiter(config.limit_url or None, lease_s=config.lease_s, research_share=config.research_share)
    configure_max_response_bytes(config.max_response_bytes)
    if config.cache == "cache":
        configure_cache("shared", KeyValueCache(caches[config.cache_alias], timeout=config.cache_ttl))
    else:
        configure_cache(config.cache)
    _configured = True
