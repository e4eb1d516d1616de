"""Shared fixtures: factories for a study and its annotators, on the real database."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


# The modules that take longest, in seconds (the sum of `pytest --durations=0` per file on two busy cores, rounded).
# They start first, longest first, so that under `--dist worksteal` (bin/test) each process ends on short tests
# instead of one process waiting for the other to finish a long one started last. A module missing here keeps
# the usual order; a stale figure costs only speed. Whole modules move, so that module-scoped fixtures (a
# browser, a fuzzing schema) are still set up once.
SLOW_MODULES_S = {
    "tests/faults/test_faults.py": 480,
    "tests/integration/test_background_faults.py": 275,
    "tests/integration/test_worker.py": 130,
    "tests/platform/test_settings_errors.py": 110,
    "tests/e2e/test_accessibility.py": 105,
    "tests/security/test_permission_matrix.py": 100,
    "tests/security/test_page_forms.py": 100,
    "tests/fuzz/test_api_fuzz.py": 95,
    "tests/integration/test_queues.py": 95,
    "tests/faults/test_database_blip.py": 95,
    "tests/integration/test_yielding.py": 95,
    "tests/newcomer/test_fresh_clone.py": 95,
    "tests/platform/test_migrate_once.py": 75,
    "tests/scoring/factuality/test_weights_sources.py": 70,
    "tests/e2e/test_annotator_journey.py": 65,
    "tests/e2e/test_first_hour_pages.py": 60,
    "tests/newcomer/test_demo_command.py": 55,
    "tests/annotation/test_generation_races.py": 55,
    "tests/newcomer/test_sqlite_journey.py": 50,
    "tests/e2e/test_first_hour_second_pass.py": 45,
    "tests/platform/test_single_beat.py": 45,
    "tests/scoring/test_judge_runs.py": 45,
    "tests/modelserver/test_shared_cache.py": 45,
    "tests/e2e/test_researcher_journey.py": 45,
    "tests/platform/test_backup.py": 45,
}


def _database_use(item: pytest.Item) -> int:
    """pytest-django's order, which its own pytest_collection_modifyitems set before this one: 0 the database
    in a rolled-back transaction, 1 a transactional database (emptied after the test), 2 no database."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", [])
    if (marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences"))) or {
        "transactional_db",
        "live_server",
    } & set(fixtures):
        return 1
    return 0 if marker or "db" in fixtures else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first within pytest-django's order (a transactional test empties the database, so
    the others run before it), and the slow ones that need no database before all; a stable sort, so each
    module keeps its own order."""

    def key(item: pytest.Item) -> tuple[int, int]:
        seconds = SLOW_MODULES_S.get(item.nodeid.split("::", 1)[0], 0)
        use = _database_use(item)
        phase = -1 if use == 2 and seconds else use
        return phase, -seconds

    items.sort(key=key)


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
