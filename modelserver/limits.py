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
    "DEFAULT_RESEARCH_SHARE",
    "LimitTimeout",
    "Limiter",
    "LocalLimiter",
    "RedisLeaseLimiter",
    "configure_limiter",
    "default_limiter",
    "map_concurrently",
    "research_limit",
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
    """Hands out one slot on one of a model's replicas; `acquire` yields the index of the replica taken.

    Two lanes share a server's slots. An "annotator" call (a summary someone waits for) may take any free slot.
    A "research" call (a judge, a stress-test rewrite) takes at most `research_limit(limit)` of a replica's
    slots, and none while an annotator's call is waiting for one of its replicas: research gives way, so a
    scoring run at full speed leaves annotators at least `limit - research_limit(limit)` slots and the next
    free one.

    A server has one size: the `limit` its annotator calls declare (the deployment's LLM_CONCURRENCY, or a study
    system's `concurrency`). A research call measures the server by that declared limit when there is one, not
    by its own client's `concurrency`: a judge built with the default of 4 on a server of 64 slots would
    otherwise find "4 in flight" whenever four summaries were being written, and wait for good while the
    server had 60 slots to spare (the field test, issue 30: 0 of 107 candidates judged in 8 minutes)."""

    def acquire(
        self, base_urls: Sequence[str], limit: int, *, timeout: float, lane: str = "annotator"
    ) -> AbstractContextManager[int]: ...

    def mark_slow(self, base_url: str, seconds: float) -> None:
        """Note that a call timed out: `base_url` names the server, or a request on it (`ChatClient` marks
        "<server>#<request>"). For `seconds`, callers can learn so (`slow_for`) and fail at once instead of waiting
        out the same time-out again on a server that hangs."""

    def slow_for(self, base_url: str) -> float:
        """Seconds left of the mark; 0 when there is none."""


# The share of a server's slots research calls may hold at once (MODEL_SERVER_RESEARCH_SHARE).
DEFAULT_RESEARCH_SHARE = 0.5


def research_limit(limit: int, share: float) -> int:
    """Research calls' slots per replica: the share of `limit`, rounded down, at least 1 (a study scored on a
    server of one slot still progresses while no annotator waits)."""
    return max(1, int(max(1, limit) * share))


def _check_lane(lane: str) -> bool:
    if lane not in ("annotator", "research"):
        raise ValueError(f"unknown model-server lane {lane!r}: 'annotator' or 'research'")
    return lane == "research"


class LimitTimeout(Exception):
    """No slot came free on any replica within the wait."""


def _server_key(base_url: str) -> str:
    return base_url.rstrip("/")


class LocalLimiter:
    """Per-process limit per server, least-in-flight across replicas (the embedded default), with the lanes
    of `Limiter`."""

    def __init__(self, *, research_share: float = DEFAULT_RESEARCH_SHARE) -> None:
        self.research_share = research_share
        self._in_flight: dict[str, int] = {}
        self._research: dict[str, int] = {}
        self._waiting: dict[str, int] = {}  # annotator calls waiting for a slot, per replica
        self._declared: dict[str, int] = {}  # the limit annotator calls last declared, per replica
        self._slow_until: dict[str, float] = {}
        self._cond = threading.Condition()

    def mark_slow(self, base_url: str, seconds: float) -> None:
        with self._cond:
            self._slow_until[_server_key(base_url)] = time.monotonic() + seconds

    def slow_for(self, base_url: str) -> float:
        with self._cond:
            return max(0.0, self._slow_until.get(_server_key(base_url), 0.0) - time.monotonic())

    def in_flight(self, base_url: str) -> int:
        with self._cond:
            return self._in_flight.get(_server_key(base_url), 0)

    @contextmanager
    def acquire(
        self, base_urls: Sequence[str], limit: int, *, timeout: float, lane: str = "annotator"
    ) -> Iterator[int]:
        research = _check_lane(lane)
        keys = [_server_key(u) for u in base_urls]
        deadline = time.monotonic() + timeout
        waiting = False
        with self._cond:
            if not research:
                for k in keys:
                    self._declared[k] = max(1, limit)
            try:
                while True:
                    yielding = research and any(self._waiting.get(k, 0) for k in keys)
                    counts = [self._in_flight.get(k, 0) for k in keys]
                    sizes = [self._declared.get(k, max(1, limit)) if research else max(1, limit) for k in keys]
                    open_ = [
                        i
                        for i in range(len(keys))
                        if counts[i] < sizes[i]
                        and not (
                            research and self._research.get(keys[i], 0) >= research_limit(sizes[i], self.research_share)
                        )
                    ]
                    if open_ and not yielding:
                        best = min(open_, key=lambda i: counts[i])
                        self._in_flight[keys[best]] = counts[best] + 1
                        if research:
                            self._research[keys[best]] = self._research.get(keys[best], 0) + 1
                        break
                    if not research and not waiting:
                        waiting = True
                        for k in keys:
                            self._waiting[k] = self._waiting.get(k, 0) + 1
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LimitTimeout(f"no free slot on {', '.join(keys)} within {timeout:g}s")
                    self._cond.wait(left)
            finally:
                if waiting:
                    for k in keys:
                        self._waiting[k] -= 1
                    self._cond.notify_all()
        try:
            yield best
        finally:
            with self._cond:
                self._in_flight[keys[best]] -= 1
                if research:
                    self._research[keys[best]] -= 1
                self._cond.notify_all()


# KEYS: for each of the n replicas its lease set (member: lease token, score: expiry in ms), then each one's set of
# research leases, then each one's set of waiting annotator calls (member: token, score: when the mark lapses),
# then each one's declared size (the limit its annotator calls last gave, kept DECLARED_S).
# ARGV: limit, lease in ms, token, lane, research limit, n, waiting mark in ms, research share, declared in ms.
# An annotator call declares its limit as the replica's size; a research call measures each replica by its
# declared size when there is one (the share of it, rounded down, at least 1, as `research_limit`), else by its
# own limit. Drops what expired, then takes a slot on the replica with the fewest holders below its size
# (research: below its research limit too, and only if no annotator call waits for any of these replicas).
# Returns the 0-based replica index; -1 when every replica is full (an annotator call then marks itself waiting
# on each replica); -2 when research gives way.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local research = ARGV[4] == 'research'
local rlimit = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local mark = tonumber(ARGV[7])
local share = tonumber(ARGV[8])
local declared_ms = tonumber(ARGV[9])
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[n + i], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[2 * n + i], '-inf', now)
  if not research then redis.call('SET', KEYS[3 * n + i], limit, 'PX', declared_ms) end
end
if research then
  for i = 1, n do
    if redis.call('ZCARD', KEYS[2 * n + i]) > 0 then return -2 end
  end
end
local best, best_n = -1, nil
for i = 1, n do
  local size, rsize = limit, rlimit
  if research then
    local declared = tonumber(redis.call('GET', KEYS[3 * n + i]))
    if declared then size, rsize = declared, math.max(1, math.floor(declared * share)) end
  end
  local count = redis.call('ZCARD', KEYS[i])
  if count < size and (best_n == nil or count < best_n)
      and (not research or redis.call('ZCARD', KEYS[n + i]) < rsize) then
    best, best_n = i, count
  end
end
if best < 0 then
  if not research then
    for i = 1, n do
      redis.call('ZADD', KEYS[2 * n + i], now + mark, ARGV[3])
      redis.call('PEXPIRE', KEYS[2 * n + i], mark * 2)
    end
  end
  return -1
end
redis.call('ZADD', KEYS[best], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[best], lease * 2)
if research then
  redis.call('ZADD', KEYS[n + best], now + lease, ARGV[3])
  redis.call('PEXPIRE', KEYS[n + best], lease * 2)
else
  for i = 1, n do redis.call('ZREM', KEYS[2 * n + i], ARGV[3]) end
end
return best - 1
"""

# KEYS: the replica's set, its research set. ARGV: lease in ms, token. Pushes the lease's expiry on (in both sets
# for a research lease) if it is still held.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
  if redis.call('ZSCORE', KEYS[2], ARGV[2]) then
    redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[1]), ARGV[2])
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[1]) * 2)
  end
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

    # How long an annotator call's "waiting" mark outlives its last try: research stays back this long after a
    # waiting call gave up or its process died.
    WAITING_MARK_S = 2.0

    # How long a server's size, as its annotator calls declare it, is remembered after the last of them: research
    # calls measure the server by it meanwhile (an hour: a study's idle night does not shrink the server).
    DECLARED_S = 3600.0

    def __init__(
        self,
        redis_url: str,
        *,
        lease_s: float = 30.0,
        prefix: str = "satisfy:modelserver",
        poll_s: float = 0.02,
        research_share: float = DEFAULT_RESEARCH_SHARE,
    ) -> None:
        import redis  # the redis client is only needed when a limit is shared

        self.research_share = research_share
        self._redis = redis.Redis.from_url(redis_url)
        self.lease_ms = max(100, int(lease_s * 1000))
        self.prefix = prefix
        self.poll_s = poll_s
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._renew = self._redis.register_script(_RENEW)
        self._held: dict[str, tuple[str, str]] = {}  # token -> (lease key, research key)
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

    def mark_slow(self, base_url: str, seconds: float) -> None:
        try:
            self._redis.set(f"{self.key(base_url)}:slow", "1", px=max(1, int(seconds * 1000)))
        except self._connection_errors as error:  # then each caller waits out its own time-out, as before
            logger.warning("could not mark %s slow in the limiter: %s", base_url, error)

    def slow_for(self, base_url: str) -> float:
        try:
            left = int(self._redis.pttl(f"{self.key(base_url)}:slow"))
        except self._connection_errors:
            return 0.0
        return left / 1000 if left > 0 else 0.0

    def research_key(self, base_url: str) -> str:
        return f"{self.key(base_url)}:research"

    def waiting_key(self, base_url: str) -> str:
        return f"{self.key(base_url)}:waiting"

    def size_key(self, base_url: str) -> str:
        return f"{self.key(base_url)}:size"

    def size(self, base_url: str) -> int | None:
        """The server's size as its annotator calls last declared it (None: none declared in DECLARED_S)."""
        value = self._redis.get(self.size_key(base_url))
        return int(value) if value is not None else None

    def waiting(self, base_url: str) -> int:
        """Annotator calls marked as waiting for a slot on one server."""
        now_s, now_us = self._redis.time()
        now_ms = now_s * 1000 + now_us // 1000
        return int(self._redis.zcount(self.waiting_key(base_url), f"({now_ms}", "+inf"))

    @contextmanager
    def acquire(
        self, base_urls: Sequence[str], limit: int, *, timeout: float, lane: str = "annotator"
    ) -> Iterator[int]:
        """A Redis that cannot be reached (restarting, failing over) is waited for like a full server: tried
        again with backoff until `timeout`, then LimitTimeout, which callers retry. Its release never
        raises: a slot not given back expires by itself `lease_s` later."""
        research = _check_lane(lane)
        leases = [self.key(u) for u in base_urls]
        keys = [
            *leases,
            *(self.research_key(u) for u in base_urls),
            *(self.waiting_key(u) for u in base_urls),
            *(self.size_key(u) for u in base_urls),
        ]
        args: list[str | int | float] = [
            max(1, limit),
            self.lease_ms,
            uuid.uuid4().hex,
            lane,
            research_limit(limit, self.research_share),
            len(base_urls),
            int(self.WAITING_MARK_S * 1000),
            self.research_share,
            int(self.DECLARED_S * 1000),
        ]
        token = str(args[2])
        deadline = time.monotonic() + timeout
        unreachable: Exception | None = None
        pause = self.poll_s
        gave_way = False
        try:
            while True:
                try:
                    index = int(self._acquire(keys=keys, args=args))
                    unreachable, pause = None, self.poll_s
                except self._connection_errors as error:
                    index, unreachable = -1, error
                    pause = min(max(pause * 2, 0.1), self.UNREACHABLE_BACKOFF_MAX_S)
                if index >= 0:
                    break
                gave_way = gave_way or index == -2
                if time.monotonic() >= deadline:
                    servers = ", ".join(map(_server_key, base_urls))
                    if unreachable is not None:
                        raise LimitTimeout(
                            f"the model-server limiter (Redis) could not be reached within {timeout:g}s "
                            f"({type(unreachable).__name__}: {unreachable})"
                        ) from unreachable
                    if gave_way:
                        raise LimitTimeout(f"no free slot on {servers} within {timeout:g}s (gave way to annotators)")
                    raise LimitTimeout(f"no free slot on {servers} within {timeout:g}s")
                time.sleep(min(pause * (0.5 + random.random()), max(0.0, deadline - time.monotonic())))
        except BaseException:
            if not research:  # no longer waiting: research may go on at once rather than after the mark lapses
                self._forget_waiting(keys[2 * len(base_urls) : 3 * len(base_urls)], token)
            raise
        held = (leases[index], keys[len(base_urls) + index] if research else "")
        with self._held_lock:
            self._held[token] = held
            self._start_renewer()
        try:
            yield index
        finally:
            with self._held_lock:
                self._held.pop(token, None)
            try:
                self._redis.zrem(held[0], token)
                if research:
                    self._redis.zrem(held[1], token)
            except self._connection_errors as error:  # the work is done; the slot lapses on its own
                logger.warning("could not give back a model-server lease on %s: %s", held[0], error)

    def _forget_waiting(self, keys: Sequence[str], token: str) -> None:
        try:
            for key in keys:
                self._redis.zrem(key, token)
        except self._connection_errors:  # the mark lapses on its own
            pass

    def _start_renewer(self) -> None:
        if self._renewer is None or not self._renewer.is_alive():
            self._renewer = threading.Thread(target=self._renew_loop, name="modelserver-lease-renewer", daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        while True:
            time.sleep(self.lease_ms / 3000)
            with self._held_lock:
                held = list(self._held.items())
            for token, (key, research_key) in held:
                try:
                    self._renew(keys=[key, research_key or f"{key}:research"], args=[self.lease_ms, token])
                except Exception as exc:  # a Redis blip must not kill the renewer; the lease may lapse
                    logger.warning("could not renew model-server lease on %s: %s", key, exc)


_local = LocalLimiter()
_default: Limiter = _local
_configured = False
_default_lock = threading.Lock()


def configure_limiter(
    redis_url: str | None, *, lease_s: float = 30.0, research_share: float = DEFAULT_RESEARCH_SHARE
) -> Limiter:
    """Set this process's limiter: shared through Redis when `redis_url` is given, else per process.
    `research_share`: the share of each server's slots judges and stress-test rewrites may hold (`Limiter`)."""
    global _default, _configured
    if not 0 < research_share <= 1:
        raise ValueError(f"the research share of a model server's slots must be in (0, 1], not {research_share!r}")
    with _default_lock:
        _local.research_share = research_share
        _default = RedisLeaseLimiter(redis_url, lease_s=lease_s, research_share=research_share) if redis_url else _local
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
