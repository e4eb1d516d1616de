"""Shared fixtures: factories for a study and its annotators, on the real database."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


def require(condition: bool, reason: str) -> None:
    """Skip on a developer's machine that lacks a prerequisite; fail in CI, which must have it. Works at a test
    module's top too (an optional extra's import)."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is missing a prerequisite: {reason}")
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(autouse=True, scope="session")
def _own_file_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Uploaded and generated files (MEDIA_ROOT, CORPUS_ROOT, CORPUS_INDEX_DIR) go to this run's temporary folder.

    Their defaults are under var/, which a running bin/demo uses too (research job files are named
    by job id, so a test's job 1 would overwrite the demo's). The environment carries them to the
    Celery workers the integration tests start.
    """
    from django.conf import settings

    saved = {name: os.environ.get(name) for name in ("MEDIA_ROOT", "CORPUS_ROOT", "CORPUS_INDEX_DIR")}
    for name in saved:
        folder = str(tmp_path_factory.mktemp(name.lower()))
        setattr(settings, name, folder)
        os.environ[name] = folder
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}; set SHARED_DATA_DIR")
    return SHARED_DATA


@pytest.fixture
def small_reply_caps(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Caps on external replies small enough for a test's stand-in to pass: 64 KiB from model servers and
    OpenAlex, applied to this process as a worker applies MODEL_SERVER_MAX_RESPONSE_BYTES."""
    from generation import openai_chat
    from generation import settings as generation_settings
    from modelserver import client

    monkeypatch.setattr(client, "_max_response_bytes", client._max_response_bytes)  # put back after the test
    monkeypatch.setattr(generation_settings, "_configured", False)
    settings.MODEL_SERVER_MAX_RESPONSE_BYTES = 64 * 1024
    settings.OPENALEX_MAX_RESPONSE_BYTES = 64 * 1024
    yield
    # The clients made under the small cap are not handed to a later test whose stand-in gets the same port.
    openai_chat.close_clients()
