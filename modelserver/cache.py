"""The disk cache of completions, keyed by the sha256 of everything that determines one."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from modelserver.config import ChatConfig, ChatResult

__all__ = ["DiskCache", "cache_key"]

# The client's logger, so that a cache warning reads as the client's (as it did before the split).
logger = logging.getLogger("modelserver.client")


def cache_key(config: ChatConfig, messages: list[dict[str, str]]) -> str:
    """The sha256 of everything that determines a completion."""
    payload = {
        "base_url": config.base_url.rstrip("/"),
        "model": config.model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class DiskCache:
    """One JSON file per completion in `directory`; written atomically, unreadable entries ignored."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def read(self, key: str) -> ChatResult | None:
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return ChatResult(
                text=str(data["text"]),
                raw=dict(data["raw"]),
                usage=dict(data["usage"]),
                latency_s=float(data["latency_s"]),
                finish_reason=data["finish_reason"],
                model=str(data["model"]),
                cached=True,
            )
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
