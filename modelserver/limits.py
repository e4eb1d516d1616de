"""How many calls a model server gets at once: per process or across hosts (a lease semaphore in Redis), and fan-out."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeVar

__all__ = [
    "LimitTimeout",
    "Limiter",
    "LocalLimiter",
    "RedisLeaseLimiter",
    "configure_limiter",
    "default_limiter",
    "map_concurrently",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def map_concurrently(
    call: Callable[[T], R],
    items: Sequence[T],
    *,
    concurrency: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[R]:
    """`call` on every item, up to `concurrency` at a time; results in the order of `items`.

    With one worker (or one item) the calls run in this thread. `on_done(done, total)` is
    called after each result, in order.
    """
    workers = max(1, min(concurrency, len(items)))
    results: list[R] = []
    if workers == 1:
        for item in items:
            results.append(call(item))
            if on_done is not None:
                on_done(len(results), len(items))
        return results
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(call, items):
            results.append(result)
            if on_done is not None:
                on_done(len(results), len(items))
    return results


# -- limits across processes and hosts ------------------------------------------------------


class Limiter(Protocol):
    """Hands out one slot on one of a model's replicas; `acquire` yields the index of the replica taken."""

    def acquire(self, base_urls: Sequence[str], limit: int, *, timeout: float) -> AbstractContextManager[int]: ...


class LimitTimeout(Exception):
    """No slot came free on any replica within the wait."""


def _server_key(base_url: str) -> str:
    return base_url.rstrip("/")


class LocalLimiter:
    """Per-process limit per server, least-in-flight across replicas (the embedded default)."""

    def __init__(self) -> None:
        self._in_flight: dict[str, int] = {}
        self._cond = threading.Condition()

    def in_flight(self, base_url: str) -> int:
        with self._cond:
            return self._in_flight.get(_server_key(base_url), 0)

    @contextmanager
    def acquire(self, base_urls: Sequence[str], limit: int, *, timeout: float) -> Iterator[int]:
        keys = [_server_key(u) for u in base_urls]
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                counts = [self._in_flight.get(k, 0) for k in keys]
                best = min(range(len(keys)), key=lambda i: counts[i])
                if counts[best] < max(1, limit):
                    self._in_flight[keys[best]] = counts[best] + 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LimitTimeout(f"no free slot on {', '.join(keys)} within {timeout:g}s")
                self._cond.wait(left)
        try:
            yield best
        finally:
            with self._cond:
                self._in_flight[keys[best]] -= 1
                self._cond.notify_all()


# KEYS: one sorted set per replica (member: lease token, score: expiry in ms).
# ARGV: limit, lease in ms, token. Drops expired leases, then takes a slot on the replica with the fewest
# holders if it is below the limit. Returns the 0-based replica index, or -1 when every replica is full.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local best, best_n = -1, limit
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local n = redis.call('ZCARD', key)
  if n < best_n then best, best_n = i, n end
end
if best < 0 then return -1 end
redis.call('ZADD', KEYS[best], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[best], tonumber(ARGV[2]) * 2)
return best - 1
"""

# KEYS: the replica's set. ARGV: lease in ms, token. Pushes the lease's expiry on if it is still held.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
  return 1
end
return 0
"""


class RedisLeaseLimiter:
    """A semaphore per model server shared by every process and host that reaches one Redis.

    Each holder is a lease (a token in the server's sorted set, scored by its expiry). A thread renews
    this process's leases every third of `lease_s`, so a request may run longer than one lease, and a
    process that dies stops renewing: its slots free themselves `lease_s` later. Waiting is a poll with
    jitter until `timeout`; Redis's clock decides expiry, so hosts need not agree on the time.
    """

    # While Redis cannot be reached, the wait between tries grows to this.
    UNREACHABLE_BACKOFF_MAX_S = 2.0

    def __init__(
        self, redis_url: str, *, lease_s: float = 30.0, prefix: str = "satisfy:modelserver", poll_s: float = 0.02
    ) -> None:
        import redis  # the redis client is only needed when a limit is shared

        self._redis = redis.Redis.from_url(redis_url)
        self.lease_ms = max(100, int(lease_s * 1000))
        self.prefix = prefix
        self.poll_s = poll_s
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._renew = self._redis.register_script(_RENEW)
        self._held: dict[str, str] = {}  # token -> key
        self._held_lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        # Redis restarting or out of reach (a restart empties the semaphore: its holders just lose their slots).
        self._connection_errors: tuple[type[Exception], ...] = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
        )

    def key(self, base_url: str) -> str:
        return f"{self.prefix}:{_server_key(base_url)}"

    def in_flight(self, base_url: str) -> int:
        """Live leases on one server (expired ones are not counted)."""
        now_s, now_us = self._redis.time()
        now_ms = now_s * 1000 + now_us // 1000
        return int(self._redis.zcount(self.key(base_url), f"({now_ms}", "+inf"))

    @contextmanager
    def acquire(self, base_urls: Sequence[str], limit: int, *, timeout: float) -> Iterator[int]:
        """A Redis that cannot be reached (restarting, failing over) is waited for like a full server: tried
        again with backoff until `timeout`, then LimitTimeout, which callers retry. Its release never
        raises: a slot not given back expires by itself `lease_s` later."""
        keys = [self.key(u) for u in base_urls]
        token = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        unreachable: Exception | None = None
        pause = self.poll_s
        while True:
            try:
                index = int(self._acquire(keys=keys, args=[max(1, limit), self.lease_ms, token]))
                unreachable, pause = None, self.poll_s
            except self._connection_errors as error:
                index, unreachable = -1, error
                pause = min(max(pause * 2, 0.1), self.UNREACHABLE_BACKOFF_MAX_S)
            if index >= 0:
                break
            if time.monotonic() >= deadline:
                servers = ", ".join(map(_server_key, base_urls))
                if unreachable is not None:
                    raise LimitTimeout(
                        f"the model-server limiter (Redis) could not be reached within {timeout:g}s "
                        f"({type(unreachable).__name__}: {unreachable})"
                    ) from unreachable
                raise LimitTimeout(f"no free slot on {servers} within {timeout:g}s")
            time.sleep(min(pause * (0.5 + random.random()), max(0.0, deadline - time.monotonic())))
        with self._held_lock:
            self._held[token] = keys[index]
            self._start_renewer()
        try:
            yield index
        finally:
            with self._held_lock:
                self._held.pop(token, None)
            try:
                self._redis.zrem(keys[index], token)
            except self._connection_errors as error:  # the work is done; the slot lapses on its own
                logger.warning("could not give back a model-server lease on %s: %s", keys[index], error)

    def _start_renewer(self) -> None:
        if self._renewer is None or not self._renewer.is_alive():
            self._renewer = threading.Thread(target=self._renew_loop, name="modelserver-lease-renewer", daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        while True:
            time.sleep(self.lease_ms / 3000)
            with self._held_lock:
                held = list(self._held.items())
            for token, key in held:
                try:
                    self._renew(keys=[key], args=[self.lease_ms, token])
                except Exception as exc:  # a Redis blip must not kill the renewer; the lease may lapse
                    logger.warning("could not renew model-server lease on %s: %s", key, exc)


_local = LocalLimiter()
_default: Limiter = _local
_configured = False
_default_lock = threading.Lock()


def configure_limiter(redis_url: str | None, *, lease_s: float = 30.0) -> Limiter:
    """Set this process's limiter: shared through Redis when `redis_url` is given, else per process."""
    global _default, _configured
    with _default_lock:
        _default = RedisLeaseLimiter(redis_url, lease_s=lease_s) if redis_url else _local
        _configured = True
        return _default


def default_limiter() -> Limiter:
    """The limiter set by `configure_limiter`; in a process that never called it, one from the environment's
    MODEL_SERVER_LIMIT_URL (a Redis URL; `local` or unset: per process)."""
    global _default
    with _default_lock:
        if _configured:
            return _default
        url = os.environ.get("MODEL_SERVER_LIMIT_URL", "").strip()
        if url in ("", "local"):
            return _local
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "MODEL_SERVER_LIMIT_URL must be a Redis URL (redis://, rediss:// or unix://) or 'local' (a limit "
                f"per process), not {url!r}"
            )
        if _default is _local:
            _default = RedisLeaseLimiter(url)
        return _default
