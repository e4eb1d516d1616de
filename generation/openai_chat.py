"""Generation through any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, hosted APIs).

A study system's `backend_settings` say where and how to call the model; anything missing falls
back to the deployment's `ModelServerConfig` (settings LLM_BASE_URL, LLM_API_KEY, ...; built by
generation.settings). The API key itself is never stored in the database: backend settings name the
environment variable that holds it (`api_key_env`). No Django: the configuration is passed in.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generation.config import ModelServerConfig, base_urls
from kernel.backends import BackendError, Generation, GenerationRequest
from modelserver import ChatClient, ChatConfig, LLMError, chat_messages
from modelserver.client import BACKOFF_CAP_S

# A summary whose earlier attempts left less than this share of its time-out is not sent again: so short a call
# would only time out (a server that just did not answer within the whole time-out is not answering now).
SPENT_FRACTION = 0.1

SETTING_KEYS = frozenset(
    {
        "base_url",
        "api_key_env",
        "temperature",
        "max_tokens",
        "seed",
        "timeout",
        "max_retries",
        "concurrency",
        "system_prompt",
        "use_cache",
    }
)
# How the call is made, not what the summary is: where the server is and how long to wait for it, how hard
# to press it, whether an earlier identical answer may be reused, and max_tokens, which only bounds the
# reply's length (a reply cut short fails or says so in its finish reason, stored with the candidate). These
# may change on a study whose summaries exist (studies/services/study.py); the others are its design.
OPERATIONAL_KEYS = frozenset(
    {"base_url", "api_key_env", "timeout", "max_retries", "concurrency", "use_cache", "max_tokens"}
)
# The operational numbers: their kind and inclusive bounds (timeout: above 0), checked when a study is saved:
# a bad value on a running study would otherwise fail every question asked until someone noticed.
_NUMBER_RANGES: dict[str, tuple[type, str, float, float]] = {
    "max_tokens": (int, "a whole number of at least 1", 1, math.inf),
    "timeout": (float, "a number of seconds above 0 (at most 86400)", math.ulp(0.0), 86400),
    "max_retries": (int, "a whole number from 0 to 10", 0, 10),
    "concurrency": (int, "a whole number from 1 to 1000", 1, 1000),
}


# An environment variable's name (POSIX: letters, digits and _, not starting with a digit).
_KEY_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def settings_problem(options: Mapping[str, Any], server: ModelServerConfig) -> str | None:
    """What is wrong with these backend settings' operational values, or None. A value is read as
    `config_for` reads it (so a stored value generation accepts is accepted here), then held to its range."""
    key_env = options.get("api_key_env")
    if key_env not in (None, "") and not (isinstance(key_env, str) and _KEY_ENV.fullmatch(key_env)):
        # A key pasted here would be stored with every summary's settings, exported, and shown in failure
        # reasons; the value is only ever the name of the variable that holds it.
        # The value is not repeated: it may be the key.
        return (
            "backend setting 'api_key_env' must name the environment variable that holds the API key (letters, "
            "digits and _, such as OPENAI_API_KEY), not hold the key itself"
        )
    for name, (kind, wanted, low, high) in _NUMBER_RANGES.items():
        value = options.get(name)
        if value is None:
            continue
        try:
            number = None if isinstance(value, bool) else kind(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or not math.isfinite(number) or not low <= number <= high:
            return f"backend setting {name!r} must be {wanted}, not {value!r}"
    # Generation refuses in-process retries that cannot fit one attempt's time limit (config_for): refused here
    # too, so that a longer timeout given to a running study does not fail every question it asks.
    given = options.get("timeout")
    timeout = float(server.timeout if given is None else given)
    config = ChatConfig(base_url="", model="", timeout=timeout, max_retries=int(options.get("max_retries") or 0))
    return _time_limit_problem(config, server.attempt_time_limit_s)


def _time_limit_problem(config: ChatConfig, limit: float) -> str | None:
    worst = worst_case_s(config)
    # One call longer than the limit is cut by the soft time limit and retried by the task; stacked
    # in-process retries that cannot all fit would only be cut short, so they are refused.
    if config.max_retries and worst >= limit:
        return (
            f"timeout {config.timeout:g} s x {config.max_retries + 1} call(s) plus backoff is {worst:g} s, over the "
            f"{limit:g} s time limit of one generation attempt: lower timeout or max_retries"
        )
    return None


# One client per configuration per process: connections are reused and the per-server
# concurrency limit is shared by every candidate this worker generates.
_clients: dict[tuple[ChatConfig, str], ChatClient] = {}
_clients_lock = threading.Lock()


def close_clients() -> None:
    """Close the cached clients' connections and forget the clients. Run at exit, before the interpreter
    tears its modules down: a client dropped during the teardown can no longer close its pooled sockets,
    which Python then reports as `ResourceWarning: unclosed socket` (seen at the end of test runs)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        with contextlib.suppress(Exception):
            client.close()


atexit.register(close_clients)


def _client_for(config: ChatConfig, cache_dir: Path | None) -> ChatClient:
    key = (config, str(cache_dir or ""))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = ChatClient(config, cache_dir)
            _clients[key] = client
        return client


def _number(options: Mapping[str, Any], name: str, default: Any, kind: type) -> Any:
    value = options.get(name, default)
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise BackendError(
            f"Generation setting {name!r} must be a {kind.__name__}, not {value!r}.", transient=False
        ) from None


def worst_case_s(config: ChatConfig) -> float:
    """The longest one generation attempt can wait on the client: every call timing out, every backoff at its cap."""
    backoffs = sum(min(BACKOFF_CAP_S, config.backoff_s * 2.0**attempt) for attempt in range(config.max_retries))
    return (config.max_retries + 1) * config.timeout + backoffs


class OpenAIChatGeneration:
    """GenerationBackend that sends the rendered prompt as one user message."""

    def __init__(self, options: Mapping[str, Any] | None, server: ModelServerConfig) -> None:
        self.options: dict[str, Any] = dict(options or {})
        self.server = server
        unknown = sorted(set(self.options) - SETTING_KEYS)
        if unknown:
            raise BackendError(
                f"Unknown generation setting(s) {', '.join(unknown)}; use {', '.join(sorted(SETTING_KEYS))}.",
                transient=False,
            )

    def config_for(self, model: str) -> ChatConfig:
        """The client configuration for `model`: backend settings first, then the deployment's."""
        o, server = self.options, self.server
        urls = base_urls(o["base_url"]) if o.get("base_url") else server.base_urls
        if not urls:
            raise BackendError(
                "No model server configured: set base_url in the system's backend settings or LLM_BASE_URL "
                "(e.g. http://127.0.0.1:8000/v1 for vLLM, http://127.0.0.1:11434/v1 for Ollama).",
                transient=False,
            )
        if not model:
            raise BackendError("The study system has no model name.", transient=False)
        key_env = str(o.get("api_key_env") or "")
        if key_env:
            # Read when the call is made, never stored: the study names its own variable, so settings cannot
            # list it in advance (docs/architecture.md, "Configuration").
            api_key = os.environ.get(key_env, "")
            if not api_key:
                raise BackendError(f"The environment variable {key_env} (the API key) is not set.", transient=False)
        else:
            api_key = server.api_key
        config = ChatConfig(
            base_url=urls[0],
            base_urls=urls if len(urls) > 1 else (),
            model=model,
            api_key=api_key,
            temperature=_number(o, "temperature", server.temperature, float),
            max_tokens=_number(o, "max_tokens", server.max_tokens, int),
            seed=_number(o, "seed", server.seed, int),
            timeout=_number(o, "timeout", server.timeout, float),
            # The generation task owns the retries (annotation/tasks.py): one call per attempt unless a
            # study system asks for in-process retries, and then their worst case must fit the time limit.
            max_retries=_number(o, "max_retries", 0, int),
            concurrency=_number(o, "concurrency", server.concurrency, int),
        )
        if problem := _time_limit_problem(config, server.attempt_time_limit_s):
            raise BackendError(f"{problem}.", transient=False)
        return config

    def messages_for(self, request: GenerationRequest) -> list[dict[str, str]]:
        return chat_messages(request.prompt, system=str(self.options.get("system_prompt") or "") or None)

    def generate(self, request: GenerationRequest) -> Generation:
        config = self.config_for(request.model)
        cache_dir = self.server.cache_dir
        use_cache = bool(self.options.get("use_cache", True))
        client = _client_for(config, cache_dir)
        # The summary's time with the model server is its time-out, once across its attempts (issue 30: a server
        # that hung cost every summary 4 time-outs): this call, a model-server slot included, gets what the
        # earlier attempts left (`request.spent_s`).
        left = config.timeout - request.spent_s
        if left < config.timeout * SPENT_FRACTION:
            raise BackendError(self._budget_spent(config, "its earlier attempts waited that long"), transient=False)
        started = time.monotonic()
        try:
            result = client.complete(self.messages_for(request), use_cache=use_cache, timeout=left)
        except LLMError as error:
            waited = time.monotonic() - started
            reason = f"{config.model}: {error.reason}"
            if error.transient and left - waited < config.timeout * SPENT_FRACTION:
                if error.server_answering:
                    # The server answered other calls meanwhile: busy, or slow on this one request (a latency
                    # tail), not hung. The task tries again with a whole time-out (the attempts still cap it):
                    # failing here showed annotators "try again" for a summary a retry writes (issue 30's field
                    # test at 300 annotators: 40 questions with one summary failed while nothing was wrong).
                    raise BackendError(
                        f"{reason}; the server answered other calls meanwhile, so it is asked again",
                        transient=True,
                        retry_after=error.retry_after,
                    ) from error
                # Spent by this call (a time-out, or a slot waited for that long) on a server that answered
                # nothing else meanwhile: the summary fails now, with the annotator's "try again" (a full
                # time-out again) as its way forward, rather than after 3 more time-outs; retrying sooner
                # cannot help a server that does not answer.
                raise BackendError(f"{reason}. {self._budget_spent(config)}", transient=False) from error
            raise BackendError(
                reason, transient=error.transient, retry_after=error.retry_after, waited_s=waited
            ) from error
        if not result.text.strip() and result.truncated:
            raise BackendError(self._out_of_tokens(config), transient=False)
        return Generation(
            text=result.text.strip(),
            raw_response=result.raw,
            usage=result.usage,
            latency_s=result.latency_s,
            finish_reason=result.finish_reason or "",
        )

    @staticmethod
    def _budget_spent(config: ChatConfig, how: str = "") -> str:
        how = f" ({how})" if how else ""
        return (
            f"The model server had this summary's time-out, {config.timeout:g} s, and did not answer within it{how}; "
            "not asked again. Try again once the server answers (or raise the system's timeout)."
        )

    def _out_of_tokens(self, config: ChatConfig) -> str:
        """Why an empty reply cut off at max_tokens failed, and where to raise it. Permanent: the identical
        request (temperature 0, a seed, the same budget) would only spend its tokens the same way."""
        reason = (
            f"{config.model}: the model ran out of tokens before answering (its reply stopped at max_tokens "
            f"{config.max_tokens} with no summary; a reasoning model spends them thinking first). "
        )
        if "max_tokens" in self.options:
            return reason + (
                "Raise max_tokens in this system's backend settings (an operational setting: it may change while "
                "the study runs), then retry the failed summaries."
            )
        return reason + "Raise LLM_MAX_TOKENS (this system's backend settings do not set max_tokens) and retry."
