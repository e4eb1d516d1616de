"""The command-line scorers (`score_texts`, `stress_test`) run their judges and rewrites under the deployment's
model-server settings: the cluster-wide limit in Redis (MODEL_SERVER_LIMIT_URL) and the shared LLM cache."""

from __future__ import annotations

import pytest
from django.core.management import get_commands, load_command_class

from generation import settings as generation_settings
from modelserver import cache as llm_cache
from modelserver import limits


@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(generation_settings, "_configured", False)
    limits.configure_limiter(None)
    yield
    limits.configure_limiter(None)
    llm_cache.configure_cache("dir")


@pytest.mark.parametrize("command", ["score_texts", "stress_test"])
def test_a_cli_run_shares_the_model_server_limit_across_hosts(command: str, settings, unconfigured, capsys) -> None:
    settings.MODEL_SERVER_LIMIT_URL = "redis://127.0.0.1:6379/12"
    settings.LLM_CACHE = "off"
    assert not isinstance(limits.default_limiter(), limits.RedisLeaseLimiter)
    cmd = load_command_class(get_commands()[command], command)
    with pytest.raises(SystemExit):
        cmd.run_from_argv(["manage.py", command, "--help"])
    limiter = limits.default_limiter()
    assert isinstance(limiter, limits.RedisLeaseLimiter)
    # The same semaphore every worker uses: a slot taken here is counted in Redis.
    with limiter.acquire(["http://judge.lab:8000/v1"], 1, timeout=5):
        assert limiter.in_flight("http://judge.lab:8000/v1") == 1
    assert limiter.in_flight("http://judge.lab:8000/v1") == 0
