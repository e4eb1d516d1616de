"""A small, robust client for any OpenAI-compatible chat-completions server.

Used by generation backends and LLM judges alike: vLLM, Ollama, llama.cpp's server and
hosted APIs all speak this protocol. Transient faults (timeouts, 429, 5xx, dropped
connections, truncated bodies) are retried with exponential backoff and jitter;
configuration faults (400/401/403/404) fail at once with a reason a researcher can act
on. Results can be cached on disk by input hash. Plain Python: no Django.

Inside a Celery task the task owns the retries: annotation's generation backend sets
`max_retries=0`, so one attempt of the task is one call (docs/backends.md, "Retries").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

import openai

from kernel.reply_deadline import reply_deadline
from kernel.response_cap import ResponseTooLarge, response_cap
from kernel.storable import storable_json
from modelserver import observe
from modelserver.cache import ResultCache, cache_for, cache_key
from modelserver.config import ChatConfig, ChatResult, LLMError
from modelserver.limits import Limiter, LimitTimeout, default_limiter
from modelserver.replies import answer_text, message_text

__all__ = [
    "BACKOFF_CAP_S",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ChatClient",
    "configure_max_response_bytes",
    "configure_max_response_bytes_from_env",
    "preload",
    "tls_context",
]

logger = logging.getLogger(__name__)

# JSON escapes of what PostgreSQL cannot store: NUL, and the surrogates (a pair is checked again once decoded).
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")

# Statuses a retry can fix: request timeout, conflict/lock, too early, rate limit, server side.
_TRANSIENT_STATUSES = frozenset({408, 409, 425, 429})
BACKOFF_CAP_S = 20.0
# When each model server (a replica's base URL) last answered a call of this process (time.monotonic()): what
# tells a server that hangs from one that is busy, or slow on one request (`LLMError.server_answering`).
_last_answer: dict[str, float] = {}


def _answered_while_waiting(urls: list[str], asked_at: float) -> bool:
    """Whether one of `urls` answered a call of this process in the second half of a wait that began at
    `asked_at`: an answer from before a hang began (in the first half) does not make a hung server look alive."""
    since = asked_at + (time.monotonic() - asked_at) / 2
    return any(_last_answer.get(url.rstrip("/"), -math.inf) > since for url in urls)


# A chat completion is a few KiB (a long one with logprobs some hundreds): 8 MiB is far above any real reply
# and far below what would trouble a worker (docs/backends.md, "Response size caps").
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
_max_response_bytes = DEFAULT_MAX_RESPONSE_BYTES


def configure_max_response_bytes(limit: int) -> None:
    """Set this process's cap on a model server's reply, for the clients made from now on (Django:
    MODEL_SERVER_MAX_RESPONSE_BYTES, applied by `configure_model_servers`)."""
    global _max_response_bytes
    if limit < 1:
        raise ValueError(f"the model servers' response cap must be at least 1 byte, not {limit}")
    _max_response_bytes = limit


def configure_max_response_bytes_from_env(environ: Mapping[str, str] | None = None) -> None:
    """The cap a command line without Django (python -m scoring.cli, the stress tests) takes from
    MODEL_SERVER_MAX_RESPONSE_BYTES, the variable the platform's settings read: applied when it is set, left
    as it is otherwise. ValueError naming the variable when it is not a whole number of bytes, at least 1."""
    raw = (os.environ if environ is None else environ).get("MODEL_SERVER_MAX_RESPONSE_BYTES", "").strip()
    if not raw:
        return
    limit = int(raw) if raw.isdigit() else 0
    if limit < 1:
        raise ValueError(f"MODEL_SERVER_MAX_RESPONSE_BYTES must be a whole number of bytes, at least 1, not {raw!r}")
    configure_max_response_bytes(limit)


_HINTS: Mapping[int, str] = {
    400: "the server rejected the request (check the model's context length, max_tokens and parameters)",
    401: "check the API key",
    403: "the API key is not allowed to use this model or endpoint",
    404: "check the model name and the base URL (it usually ends in /v1)",
    405: "check the base URL (it usually ends in /v1)",
    413: "the prompt is too large for this server",
    422: "the server could not process the request parameters",
}


def _status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "HTTP error"


def _server_message(body: object, text: str) -> str:
    """The error message the server sent, in OpenAI's {"error": {"message": ...}} shape or as text."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail")
            if msg:
                return str(msg)[:300]
        elif isinstance(err, str):
            return err[:300]
    return text.strip()[:300]


class _ReplicaDown(Exception):
    def __init__(self, index: int, error: LLMError) -> None:
        super().__init__(error.reason)
        self.index = index
        self.error = error


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's one TLS context for every model-server connection, with the SDK's defaults (certifi's CA
    bundle, or SSL_CERT_FILE / SSL_CERT_DIR). The SDK builds one for every client it creates, about 25 ms of
    CPU loading the bundle, even for an http:// server: once per model and replica in every worker process."""
    import httpx2  # the OpenAI SDK's HTTP client: loaded with the SDK, on a process's first model call

    return httpx2.create_ssl_context()


class _HttpClient(openai.DefaultHttpxClient):
    """The SDK's default HTTP client on the process's TLS context; closes its connections when dropped,
    as the client the SDK makes for itself does."""

    def __del__(self) -> None:
        if not self.is_closed:
            with contextlib.suppress(Exception):
                self.close()


def _http_client(timeout: float, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> openai.DefaultHttpxClient:
    import httpx2  # as above: with the SDK, not with this module

    # Every reply's body, answers and errors alike, is read through the cap (kernel/response_cap.py), and within
    # the call's time-out as a whole, not only per read (kernel/reply_deadline.py): the only bound on a trickled
    # reply in a threads-pool worker, where Celery enforces no soft time limit.
    stamp, check = reply_deadline(httpx2)
    hooks = {"request": [stamp], "response": [response_cap(httpx2, max_response_bytes), check]}
    return _HttpClient(verify=tls_context(), timeout=timeout, event_hooks=hooks)


def preload() -> None:
    """Load what a process's first client would: the SDK's HTTP stack (imported on first use) and the TLS
    context. A Celery worker calls it before its pool forks (config/celery.py), so that every pool process
    starts with them instead of loading them on the first generation it runs."""
    _http_client(timeout=1.0).close()


class ChatClient:
    """Calls one OpenAI-compatible model (one server or several replicas) with retries, a cache and a limit.

    `limiter` (default: this process's, `limits.configure_limiter`) bounds the calls in flight per replica
    and picks the replica with the fewest; `cache` (default: this process's policy applied to
    `cache_dir`, `cache.configure_cache`) answers repeated requests. A replica that refuses connections is
    skipped for `REPLICA_COOLDOWN_S` and the call moves to another replica at once. A reply larger than
    `max_response_bytes` (default: this process's, `configure_max_response_bytes`) fails the call for good.
    """

    REPLICA_COOLDOWN_S = 30.0

    def __init__(
        self,
        config: ChatConfig,
        cache_dir: Path | None = None,
        *,
        cache: ResultCache | None = None,
        limiter: Limiter | None = None,
        max_response_bytes: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.max_response_bytes = max_response_bytes if max_response_bytes is not None else _max_response_bytes
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._sleep = sleep
        self._replicas = list(config.replicas)
        self._clients = [
            openai.OpenAI(
                base_url=url,
                api_key=config.api_key or "EMPTY",
                timeout=config.timeout,
                max_retries=0,
                http_client=_http_client(config.timeout, self.max_response_bytes),
            )
            for url in self._replicas
        ]
        self._client = self._clients[0]
        self._cache = cache if cache is not None else cache_for(self.cache_dir)
        self._limiter = limiter if limiter is not None else default_limiter()
        self._down_until: dict[int, float] = {}
        # How long a time-out marks the request slow on its server, for every client sharing the limiter: one
        # time-out, so that the generation task's next attempt (within 5 s: annotation.tasks.backoff) finds it.
        self.slow_mark_s = config.timeout

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API -------------------------------------------------------------------

    def complete(
        self, messages: list[dict[str, str]], *, use_cache: bool = True, timeout: float | None = None
    ) -> ChatResult:
        """Return the model's reply to `messages`, from the cache when allowed and present.

        `timeout`: the most each request may take, a model-server slot waited for included (at most the
        configured time-out; the generation gives what remains of a summary's time with the server). None: the
        configured time-out for the slot, and again for the reply, as the research calls have it.

        Raises LLMError after the retries are spent (transient) or at once (permanent).
        """
        cache = self._cache
        key = cache_key(self.config, messages)
        if use_cache and cache is not None:
            hit = cache.read(key)
            if hit is not None:
                # Kept by a version that left a reasoning model's <think> block in the text.
                hit = dataclasses.replace(hit, text=answer_text(hit.text))
            if hit is not None and hit.text.strip():
                return hit

        attempts = max(0, self.config.max_retries) + 1
        last: LLMError | None = None
        for attempt in range(attempts):
            try:
                result = self._call_once(messages, key, timeout)
            except LLMError as exc:
                if not exc.transient:
                    raise
                last = exc
                if attempt + 1 >= attempts or (exc.timed_out and self.config.lane == "annotator"):
                    # A summary someone waits for gets one attempt at a time-out: the caller (the generation
                    # task) decides what next, and its next attempt learns the server is slow at once.
                    break
                delay = self._backoff(attempt, exc.retry_after)
                logger.warning(
                    "LLM call to %s failed (%s); retry %d/%d in %.2fs",
                    self.config.base_url,
                    exc.reason,
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                self._sleep(delay)
                continue
            # An empty reply is no answer: kept, it would be every retry's answer too (the task's, a
            # researcher's, a rerun's), so that retrying could never reach the model again.
            if cache is not None and result.text.strip():
                cache.write(key, result)
            return result
        assert last is not None
        # "asked N times", not "gave up after N attempts": a generation's own attempts wrap this reason in
        # "Gave up after 4 attempts; the last: ...", and one request said nothing worth a suffix.
        asked = attempt + 1
        raise LLMError(
            f"{last.reason} (asked {asked} times)" if asked > 1 else last.reason,
            transient=True,
            status=last.status,
            retry_after=last.retry_after,  # for a caller that retries later (the generation task)
            timed_out=last.timed_out,
            server_answering=last.server_answering,
        )

    # -- one HTTP call ------------------------------------------------------------------

    def _slow_key(self, replica: int, request: str) -> str:
        """The limiter's name for this request on one replica: a time-out marks the request, not the server, so a
        server that was slow once for one request does not fail the others (issue 30)."""
        return f"{self._replicas[replica].rstrip('/')}#{request[:32]}"

    def _call_once(self, messages: list[dict[str, str]], request: str, timeout: float | None = None) -> ChatResult:
        """One call; a replica that refuses the connection is marked down and the next one is tried."""
        tried: set[int] = set()
        while True:
            now = time.monotonic()
            live = [i for i in range(len(self._replicas)) if i not in tried and self._down_until.get(i, 0) <= now]
            if not live:
                live = [i for i in range(len(self._replicas)) if i not in tried]
            # Research calls wait out a request's slow mark; an annotator's summary is sent again at once by
            # the task's retry (failing it on the mark failed summaries a retry would have saved).
            research = self.config.lane == "research"
            answering = [i for i in live if not research or self._limiter.slow_for(self._slow_key(i, request)) <= 0]
            if not answering:
                raise self._slow_error(live, request)
            try:
                return self._call_replica(messages, answering, request, timeout)
            except _ReplicaDown as down:
                tried.add(down.index)
                self._down_until[down.index] = time.monotonic() + self.REPLICA_COOLDOWN_S
                if len(tried) >= len(self._replicas):
                    raise down.error from down.error.__cause__
                logger.warning("%s; trying another replica", down.error.reason)

    def _slow_error(self, replicas: list[int], request: str) -> LLMError:
        """This very request timed out a moment ago on every replica left (`Limiter.mark_slow`): the generation
        task's next attempt at the same summary. An annotator's summary fails now, with its way out (an
        administrator's or the annotator's retry), instead of waiting out another time-out on a server that hangs;
        research calls are told when to try again. Other requests to the server go on as usual."""
        where = ", ".join(self._replicas[i].rstrip("/") for i in replicas)
        left = max(self._limiter.slow_for(self._slow_key(i, request)) for i in replicas)
        reason = (
            f"{where} did not answer this request within {self.config.timeout:g}s a moment ago; not asked it again "
            f"for {left:.0f}s (retry once the server answers)"
        )
        research = self.config.lane == "research"
        return LLMError(reason, transient=research, retry_after=left if research else None, timed_out=True)

    def _call_replica(
        self, messages: list[dict[str, str]], candidates: list[int], request: str, timeout: float | None = None
    ) -> ChatResult:
        cfg = self.config
        limit = cfg.timeout if timeout is None else max(0.001, min(cfg.timeout, timeout))
        extra: dict[str, Any] = {}
        if cfg.seed is not None:
            extra["seed"] = cfg.seed
        urls = [self._replicas[i] for i in candidates]
        where = urls[0].rstrip("/")
        started = began = time.perf_counter()
        asked_at = time.monotonic()
        index = candidates[0]
        outcome = "error"
        try:
            with self._limiter.acquire(urls, cfg.concurrency, timeout=limit, lane=cfg.lane) as picked:
                index = candidates[picked]
                where = self._replicas[index].rstrip("/")
                started = time.perf_counter()
                observe.slot_taken(lane=cfg.lane, server=where)
                # Given a time-out, the slot's wait comes out of it; the reply is bounded as a whole, not only
                # per read (kernel/reply_deadline.py).
                left = None if timeout is None else max(0.001, limit - (started - began))
                try:
                    body_text = self._post(index, messages, extra, timeout=left)
                finally:
                    observe.slot_given_back(lane=cfg.lane, server=where)
            outcome = "ok"
        except LimitTimeout as exc:
            outcome = "no_slot"
            raise LLMError(
                f"{exc} (the model-server limit is {cfg.concurrency} per replica)",
                transient=True,
                server_answering=_answered_while_waiting(urls, asked_at),
            ) from exc
        except openai.APITimeoutError as exc:
            outcome = "timeout"
            self._limiter.mark_slow(self._slow_key(index, request), self.slow_mark_s)
            raise LLMError(
                f"timed out after {limit:.3g}s waiting for {where}",
                transient=True,
                timed_out=True,
                server_answering=_answered_while_waiting(urls, asked_at),
            ) from exc
        except openai.APIConnectionError as exc:
            outcome = "connection"
            cause = exc.__cause__ or exc
            error = LLMError(f"connection to {where} failed ({type(cause).__name__}: {cause})", transient=True)
            error.__cause__ = exc
            raise _ReplicaDown(index, error) from exc
        except openai.APIStatusError as exc:
            outcome = f"status_{exc.status_code}"
            raise self._status_error(exc, where) from exc
        except ResponseTooLarge as exc:
            outcome = "too_large"
            # The same request would draw the same reply: permanent, and the reason says which setting to raise.
            raise LLMError(
                f"the reply from {where} was {exc.larger_than} (the cap on a model "
                "server's reply: raise MODEL_SERVER_MAX_RESPONSE_BYTES if such replies are expected)",
                transient=False,
            ) from exc
        finally:
            observe.call_ended(lane=cfg.lane, server=where, seconds=time.perf_counter() - started, outcome=outcome)
        latency = time.perf_counter() - started
        _last_answer[where] = time.monotonic()
        return self._parse(body_text, latency, where)

    def _post(
        self, index: int, messages: list[dict[str, str]], extra: dict[str, Any], *, timeout: float | None = None
    ) -> str:
        cfg = self.config
        # The SDK's own request (headers, auth, timeout, its errors below) without its typed-parameter
        # transform, and the body as text, parsed once below: 20% less client CPU per call.
        body: str = self._clients[index].post(
            "/chat/completions",
            body={
                "model": cfg.model,
                "messages": messages,
                "temperature": cfg.temperature,
                "max_tokens": cfg.max_tokens,
                **extra,
            },
            cast_to=str,
            options={"timeout": timeout} if timeout is not None else {},
        )
        return body

    def _status_error(self, exc: openai.APIStatusError, where: str) -> LLMError:
        status = exc.status_code
        message = _server_message(exc.body, exc.response.text if exc.response is not None else "")
        transient = status in _TRANSIENT_STATUSES or status >= 500
        hint = _HINTS.get(status, "")
        if status == 404:
            hint = f"check the model name {self.config.model!r} and the base URL (it usually ends in /v1)"
        reason = f"{status} {_status_phrase(status)} from {where}"
        if hint:
            reason += f": {hint}"
        if message:
            reason += f" (server said: {message})"
        retry_after: float | None = None
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        return LLMError(reason, transient=transient, status=status, retry_after=retry_after)

    def _parse(self, body_text: str, latency: float, where: str) -> ChatResult:
        try:
            raw = json.loads(body_text)
        except json.JSONDecodeError as exc:
            # A cut-off body usually comes from a proxy or a restarting server: worth a retry.
            snippet = body_text[:80].replace("\n", " ")
            raise LLMError(
                f"malformed JSON from {where} ({exc.msg} at char {exc.pos}; body starts {snippet!r})",
                transient=True,
            ) from exc
        if not isinstance(raw, dict):
            raise LLMError(
                f"unexpected response from {where}: a JSON {type(raw).__name__}, not an object", transient=False
            )
        if _UNSTORABLE_ESCAPE.search(body_text):
            # A NUL or a lone surrogate (JSON's \u0000, \ud800) in a reply: no database column can hold it,
            # so storing the summary, the raw answer or a judge's quoted reply would fail the work (and the
            # cached reply would fail every retry). Dropped or replaced by U+FFFD here, once for every caller.
            raw = storable_json(raw)
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError(
                f"response from {where} has no choices: is this an OpenAI-compatible chat-completions endpoint?",
                transient=False,
            )
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise LLMError(f"response from {where} has a choice without a message", transient=False)
        # The answer only: a reasoning model's <think> block stays in `raw` for the audit, out of the summary
        # (or the judge's verdict); content sent as a list of parts is read by its text parts.
        text = answer_text(message_text(message.get("content")))
        usage = raw.get("usage")
        finish = choice.get("finish_reason")
        return ChatResult(
            text=text,
            raw=raw,
            usage=dict(usage) if isinstance(usage, dict) else {},
            latency_s=latency,
            finish_reason=str(finish) if finish is not None else None,
            model=str(raw.get("model") or self.config.model),
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(BACKOFF_CAP_S, self.config.backoff_s * (2.0**attempt))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None and 0 <= retry_after <= BACKOFF_CAP_S:
            delay = max(delay, retry_after)
        return delay
