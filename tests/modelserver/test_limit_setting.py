"""MODEL_SERVER_LIMIT_URL=local keeps the model-server limit per process (docs/backends.md), in a Django process
and in plain Python; anything that is neither `local` nor a Redis URL is refused with a message naming it,
at startup in Django, at the first client in plain Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelserver import ChatClient, ChatConfig, limits
from tests.support.openai_standin import openai_standin

ROOT = Path(__file__).resolve().parents[2]


def _django_call(base_url: str, cache_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.modelserver._cache_worker", base_url, str(cache_dir), "A question?"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LLM_CACHE": "off", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_local_in_a_django_process_answers_the_call(tmp_path: Path) -> None:
    with openai_standin(lambda body: "An answer [1].") as server:
        done = _django_call(server.base_url, tmp_path, MODEL_SERVER_LIMIT_URL="local")
        assert done.returncode == 0, done.stderr
        assert '"text": "An answer [1]."' in done.stdout
        assert server.completions == 1


def test_a_url_that_is_not_redis_stops_a_django_process_naming_the_setting(tmp_path: Path) -> None:
    done = _django_call("http://127.0.0.1:9/v1", tmp_path, MODEL_SERVER_LIMIT_URL="http://redis:6379/0")
    assert done.returncode != 0
    assert "MODEL_SERVER_LIMIT_URL must be a Redis URL" in done.stderr
    assert "'http://redis:6379/0'" in done.stderr


@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain-Python process: nothing has called configure_limiter."""
    monkeypatch.setattr(limits, "_configured", False)
    monkeypatch.setattr(limits, "_default", limits._local)


@pytest.mark.usefixtures("unconfigured")
def test_local_in_plain_python_answers_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_SERVER_LIMIT_URL", "local")
    with openai_standin(lambda body: "Plain answer.") as server:
        client = ChatClient(ChatConfig(base_url=server.base_url, model="standin-model", max_retries=0))
        assert client.complete([{"role": "user", "content": "Q?"}], use_cache=False).text == "Plain answer."


@pytest.mark.usefixtures("unconfigured")
def test_a_url_that_is_not_redis_is_refused_in_plain_python_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODEL_SERVER_LIMIT_URL", "127.0.0.1:6379")
    with pytest.raises(ValueError, match=r"MODEL_SERVER_LIMIT_URL must be a Redis URL .* not '127.0.0.1:6379'"):
        ChatClient(ChatConfig(base_url="http://127.0.0.1:9/v1", model="standin-model"))
