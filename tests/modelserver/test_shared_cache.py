"""LLM_CACHE=cache: an answer one worker process got is served to another from Django's cache (Redis here),
without a call to the model server; LLM_CACHE=dir keeps each host's folder to itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_standin import openai_standin

ROOT = Path(__file__).resolve().parents[2]


def _run(base_url: str, cache_dir: Path, question: str, **env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.modelserver._cache_worker", base_url, str(cache_dir), question],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture
def cache_url() -> str:
    url = os.environ.get("TEST_WORKER_BROKER_URL") or os.environ.get("CELERY_BROKER_URL") or ""
    if not url.startswith("redis://"):
        pytest.fail("the shared-cache test needs Redis: set TEST_WORKER_BROKER_URL=redis://...")
    return url


def test_the_second_process_gets_the_first_answer_from_the_shared_cache(cache_url: str, tmp_path: Path) -> None:
    # A question and reply unique to this run, so an entry from an earlier run cannot answer.
    token = uuid.uuid4().hex
    with openai_standin(lambda body: f"Shared answer {token} [1].") as server:
        env = {"CACHE_URL": cache_url, "LLM_CACHE": "cache"}
        first = _run(server.base_url, tmp_path / "host-a", token, **env)
        second = _run(server.base_url, tmp_path / "host-b", token, **env)
        assert first == {"text": f"Shared answer {token} [1].", "cached": False}
        assert second == {"text": f"Shared answer {token} [1].", "cached": True}
        assert server.completions == 1
        assert not (tmp_path / "host-a").exists() and not (tmp_path / "host-b").exists()


def test_folder_caches_on_two_hosts_do_not_share(cache_url: str, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    with openai_standin(lambda body: f"Own answer {token}.") as server:
        env = {"CACHE_URL": cache_url, "LLM_CACHE": "dir"}
        assert _run(server.base_url, tmp_path / "host-a", token, **env)["cached"] is False
        assert _run(server.base_url, tmp_path / "host-b", token, **env)["cached"] is False
        assert _run(server.base_url, tmp_path / "host-a", token, **env)["cached"] is True
        assert server.completions == 2
