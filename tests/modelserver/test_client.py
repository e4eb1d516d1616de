"""ChatClient against a local server speaking the OpenAI chat-completions protocol."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from modelserver import ChatClient, ChatConfig, LLMError
from tests.support.openai_standin import openai_standin

MESSAGES = [
    {"role": "system", "content": "Answer from the abstracts and cite them as [n]."},
    {"role": "user", "content": "What helps nurses at handover?"},
]


def client_for(base_url: str, cache_dir: Path | None = None, **overrides: object) -> ChatClient:
    options: dict[str, object] = {"backoff_s": 0.01, "timeout": 5.0, "max_retries": 3} | overrides
    return ChatClient(ChatConfig(base_url=base_url, model="standin-model", **options), cache_dir)  # type: ignore[arg-type]


def test_success_returns_text_usage_and_finish_reason() -> None:
    with openai_standin(lambda body: "Handover checklists help [1].") as server:
        result = client_for(server.base_url, temperature=0.2, max_tokens=64, seed=7).complete(MESSAGES)

    assert result.text == "Handover checklists help [1]."
    assert result.finish_reason == "stop"
    assert result.usage["completion_tokens"] == 4
    assert result.usage["total_tokens"] == result.usage["prompt_tokens"] + 4
    assert result.model == "standin-model"
    assert result.raw["object"] == "chat.completion"
    assert result.latency_s > 0
    assert not result.cached
    # What went over the wire is what the config says.
    (sent,) = server.requests
    assert sent["messages"] == MESSAGES
    assert sent["model"] == "standin-model"
    assert sent["temperature"] == 0.2
    assert sent["max_tokens"] == 64
    assert sent["seed"] == 7


def test_api_key_is_sent_as_bearer_token() -> None:
    with openai_standin(api_key="sk-local") as server:
        assert client_for(server.base_url, api_key="sk-local").complete(MESSAGES).text
    assert server.headers[0]["authorization"] == "Bearer sk-local"


@pytest.mark.parametrize("fault", ["429", "500", "503", "drop"])
def test_transient_fault_then_success(fault: str) -> None:
    with openai_standin(script=[fault]) as server:
        result = client_for(server.base_url).complete(MESSAGES)
    assert result.text.startswith("Stand-in summary")
    assert server.script.played == [fault]
    assert server.completions == 2


def test_a_research_call_retries_a_timeout() -> None:
    with openai_standin(script=["timeout"], hang_s=5.0) as server:
        started = time.perf_counter()
        result = client_for(server.base_url, timeout=0.3, lane="research").complete(MESSAGES)
        elapsed = time.perf_counter() - started
    assert result.finish_reason == "stop"
    assert server.completions == 2
    assert elapsed < 3.0


def test_a_hanging_server_costs_an_annotators_summary_one_time_out_per_attempt() -> None:
    """Issue 30: an annotator's summary is not asked again inside its attempt after a time-out (the generation
    task's retries decide what follows), where the client's own retries used to stack time-outs."""
    with openai_standin(script=["timeout"], hang_s=5.0) as server:
        started = time.perf_counter()
        with pytest.raises(LLMError) as first:
            client_for(server.base_url, timeout=1.0).complete(MESSAGES)
        assert 1.0 <= time.perf_counter() - started < 2.5  # one time-out, not max_retries + 1 of them
        assert first.value.transient and first.value.timed_out
        assert server.completions == 1
        # The task's retry is sent at once, and answered.
        assert client_for(server.base_url, timeout=1.0).complete(MESSAGES).finish_reason == "stop"
    assert server.completions == 2


def test_retries_are_bounded_and_the_reason_survives() -> None:
    with openai_standin(script=["503"] * 10) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server.base_url, max_retries=2).complete(MESSAGES)
    assert caught.value.transient
    assert "503 Service Unavailable" in caught.value.reason
    assert caught.value.reason.endswith("(asked 3 times)")
    assert "gave up" not in caught.value.reason.lower()  # the generation's own attempts say that (issue 33)
    assert server.completions == 3


def test_malformed_json_is_retried_then_reported_clearly() -> None:
    with openai_standin(script=["malformed"]) as server:
        assert client_for(server.base_url).complete(MESSAGES).text
    assert server.completions == 2

    with openai_standin(script=["malformed"] * 5) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server.base_url, max_retries=1).complete(MESSAGES)
    assert "malformed JSON" in caught.value.reason
    assert server.base_url in caught.value.reason


def test_401_fails_fast_with_a_readable_reason() -> None:
    with openai_standin(api_key="sk-right") as server:
        with pytest.raises(LLMError) as caught:
            client_for(server.base_url, api_key="sk-wrong").complete(MESSAGES)
    assert not caught.value.transient
    assert caught.value.status == 401
    assert caught.value.reason.startswith(f"401 Unauthorized from {server.base_url}: check the API key")
    assert server.completions == 1  # no retry


def test_unknown_model_fails_fast_naming_the_model() -> None:
    with openai_standin(models=["llama-3.3-70b"]) as server:
        with pytest.raises(LLMError) as caught:
            client_for(server.base_url).complete(MESSAGES)
    assert not caught.value.transient
    assert "404 Not Found" in caught.value.reason
    assert "'standin-model'" in caught.value.reason
    assert server.completions == 1


def test_cache_hit_makes_no_http_request(tmp_path: Path) -> None:
    with openai_standin() as server:
        first = client_for(server.base_url, tmp_path).complete(MESSAGES)
        second = client_for(server.base_url, tmp_path).complete(MESSAGES)
        assert server.completions == 1
        assert second.text == first.text and second.usage == first.usage
        assert second.cached and not first.cached
        # Anything that changes the output is part of the key; use_cache=False bypasses it.
        client_for(server.base_url, tmp_path, temperature=0.7).complete(MESSAGES)
        client_for(server.base_url, tmp_path).complete(MESSAGES, use_cache=False)
        assert server.completions == 3
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_corrupt_cache_entry_is_ignored(tmp_path: Path) -> None:
    with openai_standin() as server:
        client_for(server.base_url, tmp_path).complete(MESSAGES)
        (entry,) = tmp_path.glob("*.json")
        entry.write_text("{not json")
        assert client_for(server.base_url, tmp_path).complete(MESSAGES).text
        assert server.completions == 2


def test_concurrency_limit_per_server() -> None:
    with openai_standin(delay=0.2) as server:
        client = client_for(server.base_url, concurrency=2)
        threads = [threading.Thread(target=client.complete, args=(MESSAGES,)) for _ in range(4)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
    # Four calls of 0.2 s, two at a time: two waves.
    assert 0.38 < elapsed < 1.0


def test_clients_for_several_models_and_replicas_build_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TLS context loads the CA bundle (about 25 ms of CPU); a worker process built one for every client,
    every model and replica it called, even for an http:// server."""
    import ssl

    built: list[object] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    configs = [
        ChatConfig(base_url="http://127.0.0.1:9/v1", model="model-one"),
        ChatConfig(
            base_url="https://a.example/v1", base_urls=("https://a.example/v1", "https://b.example/v1"), model="m2"
        ),
    ]
    for config in configs:
        ChatClient(config).close()
    assert len(built) <= 1, f"{len(built)} TLS contexts for 3 connections' clients"


def _worker_init_probe(**env: str):  # type: ignore[no-untyped-def]
    """Send `worker_init` in a fresh interpreter; its output: the TLS context and corpus indexes cached
    before and after, and whatever it logged."""
    import os
    import subprocess
    import sys

    probe = (
        "import django; django.setup(); import config.celery; from celery.signals import worker_init; "
        "from modelserver.client import tls_context; from generation import offline_retrieval as o; "
        "before = (tls_context.cache_info().currsize, len(o._INDEX_CACHE)); "
        "worker_init.send(sender=None); "
        "print(before, (tls_context.cache_info().currsize, len(o._INDEX_CACHE)))"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
        cwd=Path(__file__).resolve().parents[2], env={**os.environ, **env},
    )  # fmt: skip


def test_a_celery_worker_loads_the_http_stack_and_the_corpus_index_before_its_pool_forks() -> None:
    """What each prefork pool process would otherwise load on its first question (seconds of CPU across a
    pool of 16 while the first annotators wait) is loaded once, by the worker's `worker_init`."""
    out = _worker_init_probe()
    assert out.stdout.strip().splitlines()[-1] == "(0, 0) (1, 1)", out.stderr[-2000:]


def test_a_worker_whose_tls_bundle_is_missing_still_starts_and_says_why() -> None:
    out = _worker_init_probe(SSL_CERT_FILE="/nonexistent/ca.pem")
    assert out.stdout.strip().splitlines()[-1] == "(0, 0) (0, 1)", out.stderr[-2000:]
    assert "not loaded before the pool forks" in out.stderr and "No such file" in out.stderr


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        # DeepSeek-R1 / Qwen3 served without a reasoning parser: the thinking comes first, in the content.
        (
            "<think>\nThe nurse asks about handover; [2] is off topic.\n</think>\n\nChecklists help [1].",
            "Checklists help [1].",
        ),
        # A chat template that opens the block in the prompt: only its end is in the reply.
        ("Okay, source 1 is about checklists.\n</think>\n\nChecklists help [1].", "Checklists help [1]."),
        # Cut off mid-reasoning, or a reply that is only reasoning: no answer at all.
        ("<think>\nThe nurse asks about handover; source 1 says", ""),
        ("<think>Nothing in the abstracts answers this.</think>", ""),
    ],
)
def test_a_reasoning_models_thinking_is_not_part_of_the_answer(reply: str, answer: str) -> None:
    with openai_standin(lambda body: reply) as server:
        result = client_for(server.base_url).complete(MESSAGES)
    assert result.text == answer
    # The researcher's audit trail keeps the reasoning.
    assert result.raw["choices"][0]["message"]["content"] == reply


def test_a_cached_reply_kept_with_its_thinking_is_read_without_it(tmp_path: Path) -> None:
    reply = "<think>Source 1 answers it.</think>Checklists help [1]."
    with openai_standin(lambda body: reply) as server:
        client_for(server.base_url, cache_dir=tmp_path).complete(MESSAGES)
        # As an older version wrote it: the text with the reasoning in it.
        (entry,) = tmp_path.rglob("*.json")
        kept = json.loads(entry.read_text(encoding="utf-8"))
        assert kept["text"] == "Checklists help [1]."
        entry.write_text(json.dumps(kept | {"text": reply}), encoding="utf-8")
        result = client_for(server.base_url, cache_dir=tmp_path).complete(MESSAGES)
    assert result.cached and result.text == "Checklists help [1]."
    assert server.completions == 1


def test_content_sent_as_a_list_of_parts_is_read_by_its_text_parts() -> None:
    parts = [
        {"type": "text", "text": "Checklists help [1]; "},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": "long shifts hurt [2]."},
    ]
    with openai_standin(lambda body: parts) as server:
        result = client_for(server.base_url).complete(MESSAGES)
    assert result.text == "Checklists help [1]; long shifts hurt [2]."
