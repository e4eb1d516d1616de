"""The disk cache of completions, keyed by the sha256 of everything that determines one."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from modelserver.config import ChatConfig, ChatResult

__all__ = ["DiskCache", "KeyValueCache", "ResultCache", "cache_key"]

# The client's logger, so that a cache warning reads as the client's (as it did before the split).
logger = logging.getLogger("modelserver.client")


def cache_key(config: ChatConfig, messages: list[dict[str, str]]) -> str:
    """The sha256 of everything that determines a completion."""
    payload = {
        # Replicas of one model give one answer, so they share entries; a single server keys as before.
        "base_url": ",".join(sorted(u.rstrip("/") for u in config.base_urls))
        if config.base_urls
        else config.base_url.rstrip("/"),
        "model": config.model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResultCache(Protocol):
    def read(self, key: str) -> ChatResult | None: ...

    def write(self, key: str, result: ChatResult) -> None: ...


def _result(data: Any) -> ChatResult:
    return ChatResult(
        text=str(data["text"]),
        raw=dict(data["raw"]),
        usage=dict(data["usage"]),
        latency_s=float(data["latency_s"]),
        finish_reason=data["finish_reason"],
        model=str(data["model"]),
        cached=True,
    )


class KeyValueStore(Protocol):
    """What KeyValueCache needs of a store: Django's cache API (`caches["default"]`) has exactly this."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any, timeout: Any = ...) -> Any: ...


class KeyValueCache:
    """Completions in a key-value store that every worker on every host can reach (Redis, the database).

    Values are JSON strings, so any store that keeps strings will do; `timeout` is the store's entry
    lifetime in seconds (None: keep until evicted).
    """

    def __init__(self, store: KeyValueStore, *, prefix: str = "llm:", timeout: int | None = None) -> None:
        self.store = store
        self.prefix = prefix
        self.timeout = timeout

    def read(self, key: str) -> ChatResult | None:
        try:
            blob = self.store.get(self.prefix + key)
            if blob is None:
                return None
            return _result(json.loads(blob))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring unreadable LLM cache entry %s: %s", key, exc)
            return None

    def write(self, key: str, result: ChatResult) -> None:
        data = asdict(result)
        data.pop("cached", None)
        self.store.set(self.prefix + key, json.dumps(data, ensure_ascii=False), self.timeout)


class DiskCache:
    """One JSON file per completion in `directory`; written atomically, unreadable entries ignored."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def read(self, key: str) -> ChatResult | None:
        path = self.path(key)
        try:
            return _result(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring unreadable LLM cache entry %s: %s", path, exc)
            return None

    def write(self, key: str, result: ChatResult) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = asdict(result)
        data.pop("cached", None)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


_default_cache: ResultCache | None = None
_default_mode = "dir"


def configure_cache(mode: str, cache: ResultCache | None = None) -> None:
    """This process's cache policy: "dir" (each client's own folder, as given), "shared" (`cache`) or "off"."""
    global _default_cache, _default_mode
    if mode not in {"dir", "shared", "off"}:
        raise ValueError(f"unknown LLM cache mode {mode!r}; use dir, shared or off")
    if mode == "shared" and cache is None:
        raise ValueError("the shared LLM cache needs a store")
    _default_mode, _default_cache = mode, cache


def cache_for(cache_dir: Path | None) -> ResultCache | None:
    """The cache a client uses under this process's policy, given the folder its caller asked for."""
    if _default_mode == "off":
        return None
    if _default_mode == "shared":
        return _default_cache
    return DiskCache(cache_dir) if cache_dir is not None else None
