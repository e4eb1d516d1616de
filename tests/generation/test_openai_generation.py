"""The OpenAI-compatible generation backend against a local stand-in server."""

from __future__ import annotations

from typing import Any

import pytest

from generation.openai_chat import OpenAIChatGeneration
from generation.registry import get_generation_backend
from kernel.backends import BackendError, Document, GenerationRequest
from tests.support.openai_standin import openai_standin


def openai_backend(options: dict[str, Any]) -> OpenAIChatGeneration:
    """The backend as a study system gets it: configured from the deployment's settings (generation.settings)."""
    backend = get_generation_backend("openai", options)
    assert isinstance(backend, OpenAIChatGeneration)
    return backend


DOCS = (
    Document(external_id="W1", title="Handover checklists", abstract="Checklists reduce omissions at handover."),
    Document(external_id="W2", title="Shift length", abstract="Long shifts increase errors."),
)


def request(model: str = "llama-3.3-70b") -> GenerationRequest:
    return GenerationRequest(
        query="What helps at handover?",
        documents=DOCS,
        prompt="Question: What helps at handover?\n\nAbstracts:\n[1] ...\n[2] ...\n\nSummary:",
        model=model,
    )


def test_generation_stores_what_researchers_audit() -> None:
    with openai_standin(
        lambda body: "  Checklists help [1]; long shifts hurt [2].  ", models=["llama-3.3-70b"]
    ) as server:
        backend = openai_backend(
            {
                "base_url": server.base_url,
                "temperature": 0.3,
                "max_tokens": 300,
                "seed": 11,
                "system_prompt": "Be brief.",
            }
        )
        generation = backend.generate(request())

    assert generation.text == "Checklists help [1]; long shifts hurt [2]."
    assert generation.finish_reason == "stop"
    assert generation.usage["completion_tokens"] == 7
    assert generation.raw_response["choices"][0]["message"]["content"].strip() == generation.text
    assert generation.latency_s > 0
    (sent,) = server.requests
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": request().prompt},
    ]
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["seed"]) == ("llama-3.3-70b", 0.3, 300, 11)


def test_truncated_answer_reports_length() -> None:
    with openai_standin(lambda body: "word " * 50) as server:
        generation = openai_backend({"base_url": server.base_url, "max_tokens": 10}).generate(request())
    assert generation.finish_reason == "length"


def test_a_transient_fault_goes_to_the_task_which_owns_the_retries() -> None:
    with openai_standin(script=["429"]) as server:
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url}).generate(request("m-transient"))
        assert server.completions == 1  # one call per task attempt
    assert caught.value.transient and "429" in caught.value.reason


def test_in_process_retries_are_opt_in_and_must_fit_the_time_limit() -> None:
    with openai_standin(script=["429", "drop"]) as server:
        generation = openai_backend({"base_url": server.base_url, "max_retries": 2, "timeout": 5}).generate(
            request("m-transient")
        )
    assert generation.text
    assert server.completions == 3
    with pytest.raises(BackendError) as caught:
        openai_backend({"base_url": "http://127.0.0.1:9/v1", "max_retries": 1, "timeout": 120}).generate(
            request("m-too-long")
        )
    assert not caught.value.transient and "over the 240 s time limit" in caught.value.reason
    assert "timeout 120 s x 2 call(s)" in caught.value.reason


def test_api_key_comes_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDY_LLM_KEY", "sk-study")
    with openai_standin(api_key="sk-study") as server:
        generation = openai_backend({"base_url": server.base_url, "api_key_env": "STUDY_LLM_KEY"}).generate(
            request("m-key")
        )
    assert generation.text


def test_wrong_key_is_a_permanent_error_with_a_reason() -> None:
    with openai_standin(api_key="sk-right") as server:
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url}).generate(request("m-wrong-key"))
    assert not caught.value.transient
    assert "401 Unauthorized" in caught.value.reason and "check the API key" in caught.value.reason
    assert server.completions == 1


def test_unknown_model_is_a_permanent_error_naming_it() -> None:
    with openai_standin(models=["llama-3.3-70b"]) as server:
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url}).generate(request("deepseek-v3.1"))
    assert not caught.value.transient
    assert "deepseek-v3.1" in caught.value.reason


def test_retries_exhausted_is_transient_for_the_queue() -> None:
    with openai_standin(script=["503"] * 3) as server:
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url, "max_retries": 1, "timeout": 2}).generate(request("m-503"))
    assert caught.value.transient
    assert server.completions == 2


def test_missing_server_and_bad_settings_fail_with_reasons(settings: object) -> None:
    with pytest.raises(BackendError, match="No model server configured"):
        openai_backend({}).generate(request())
    with pytest.raises(BackendError, match="temprature"):
        openai_backend({"temprature": 0.5})
    with pytest.raises(BackendError, match="STUDY_MISSING_KEY"):
        openai_backend({"base_url": "http://127.0.0.1:9/v1", "api_key_env": "STUDY_MISSING_KEY"}).generate(request())


def test_the_cached_clients_close_their_connections_when_the_process_exits() -> None:
    """A worker or test process keeps one client per model server (connections reused). At exit they are
    closed before the interpreter tears down, where closing fails and Python reports each pooled socket as
    `ResourceWarning: unclosed socket`. The probe's own exit hook, registered first, runs last and reports."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import atexit; held = []; "
        "atexit.register(lambda: print('closed at exit:', [all(c.is_closed() for c in h._clients) for h in held])); "
        "import django; django.setup(); "
        "from generation import openai_chat; from generation.registry import get_generation_backend; "
        "from kernel.backends import GenerationRequest; "
        "from tests.support.openai_standin import openai_standin\n"
        "with openai_standin() as server:\n"
        "    for model in ('a', 'b'):\n"
        "        get_generation_backend('openai', {'base_url': server.base_url, 'use_cache': False}).generate(\n"
        "            GenerationRequest(query='q', documents=(), prompt='p', model=model))\n"
        "    held.extend(openai_chat._clients.values())\n"
        "print('cached:', len(held))\n"
    )
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-c", probe], capture_output=True, text=True, timeout=120, check=True,
        cwd=Path(__file__).resolve().parents[2], env=os.environ.copy(),
    )  # fmt: skip
    assert out.stdout.split() == ["cached:", "2", "closed", "at", "exit:", "[True,", "True]"], out.stderr[-3000:]
    assert "unclosed" not in out.stderr, out.stderr[-3000:]


def reasoning_then_answer(body: dict[str, object]) -> str:
    # A reasoning model thinks for 100 tokens before it answers (the stand-in counts a word as a token).
    return "<think>" + "weighing the sources " * 33 + "</think> Checklists help [1]."


def test_a_reasoning_models_answer_is_the_summary_without_its_thinking() -> None:
    with openai_standin(reasoning_then_answer) as server:
        generation = openai_backend({"base_url": server.base_url, "max_tokens": 400}).generate(request())
    assert generation.text == "Checklists help [1]."
    assert "weighing the sources" in generation.raw_response["choices"][0]["message"]["content"]


def test_a_reply_that_ran_out_of_tokens_before_answering_says_to_raise_max_tokens(settings: object) -> None:
    with openai_standin(reasoning_then_answer) as server:
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url, "max_tokens": 40}).generate(request())
        # The same request would spend its tokens the same way: the task must not retry it.
        assert not caught.value.transient
        assert "ran out of tokens before answering" in caught.value.reason
        assert "max_tokens 40" in caught.value.reason and "Raise max_tokens in this system's backend settings" in (
            caught.value.reason
        )
        # A system that leaves max_tokens to the deployment's default is pointed at that setting.
        settings.LLM_MAX_TOKENS = 30  # type: ignore[attr-defined]
        with pytest.raises(BackendError) as caught:
            openai_backend({"base_url": server.base_url}).generate(request("other-model"))
    assert not caught.value.transient and "max_tokens 30" in caught.value.reason
    assert "Raise LLM_MAX_TOKENS" in caught.value.reason
    assert server.completions == 2


def test_an_empty_reply_that_was_not_cut_off_is_left_to_the_tasks_retries() -> None:
    with openai_standin(lambda body: "<think>Nothing here answers it.</think>") as server:
        generation = openai_backend({"base_url": server.base_url, "max_tokens": 400}).generate(request())
    assert generation.text == "" and generation.finish_reason == "stop"
