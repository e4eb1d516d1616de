"""bin/demo, the README's first command, run in a fresh copy of the checkout: the invitation link it prints
opens, also in a checkout that has the .env docker compose reads (`cp platform/env.example .env`, README and
docs/deploy.md), and stopping bin/demo stops its worker, beat and web server."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.newcomer.test_fresh_clone import REPO_ROOT

pytestmark = pytest.mark.worker  # bin/demo starts a real Celery worker (and beat)

# What a fresh clone does not have: run-time state, environments, caches.
NOT_IN_A_CLONE = {".git", ".venv", "venv", "var", "node_modules", ".env", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _clone(tmp_path: Path) -> Path:
    """A copy of the checkout with the shared .venv linked in, so that bin/setup finds the runtime installed."""
    venv = (REPO_ROOT / ".venv").resolve()
    # bin/setup's stamp for the runtime lock (bin/demo's profile). bin/test runs bin/setup first, and an install
    # of dev-embeddings marks the runtime, which it contains, installed too; so CI has it.
    lock = REPO_ROOT / "requirements" / "runtime.txt"
    digest = hashlib.sha256(lock.read_bytes() + (REPO_ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    assert (venv / f".installed-runtime-{digest}").exists(), (
        "no bin/setup install stamp for requirements/runtime.txt in .venv: run bin/setup (bin/test does) first"
    )
    clone = tmp_path / "satisfy"
    shutil.copytree(
        REPO_ROOT,
        clone,
        ignore=lambda folder, names: [
            n for n in names if (Path(folder) == REPO_ROOT and n in NOT_IN_A_CLONE) or n == "__pycache__"
        ],
    )
    (clone / ".venv").symlink_to(venv)
    return clone


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local http URL
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None  # not listening yet


def test_the_printed_invitation_link_opens_even_beside_docker_composes_env_file(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    shutil.copy(clone / "platform" / "env.example", clone / ".env")  # docs/deploy.md, "One host"
    port = _free_port()
    # A newcomer's shell: none of the settings this test process set (config/settings/test.py) or inherited.
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    env["PORT"] = str(port)
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen(  # noqa: S603 - the repository's own script
            ["bin/demo"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        link = None
        deadline = time.monotonic() + 240
        while link is None and time.monotonic() < deadline and demo.poll() is None:
            found = re.search(rf"http://127\.0\.0\.1:{port}/join/\S+", log.read_text())
            link = found.group(0) if found else None
            time.sleep(0.5)
        assert link, log.read_text()[-3000:]
        # Printed only once the server answers: the first request already opens it (it used to be refused
        # for some 30 s on a first run).
        assert _status(link) == 200, log.read_text()[-3000:]
        assert "not reading .env" in log.read_text()
        # The demo installs the runtime, not the developers' tools: no npm for the accessibility tests.
        assert not (clone / "node_modules").exists()

        demo.send_signal(signal.SIGTERM)  # as Ctrl-C or a service manager stops it
        demo.wait(timeout=60)
        assert _status(link) is None, "the web server still answers"
        left = subprocess.run(["pgrep", "-g", str(demo.pid)], capture_output=True, text=True, check=False)
        assert left.stdout.strip() == "", f"bin/demo left processes running: {left.stdout}"
    finally:
        try:
            os.killpg(demo.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        demo.wait(timeout=30)


def test_a_taken_port_is_refused_naming_it_before_any_link_is_printed(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        env["PORT"] = str(port)
        done = subprocess.run(  # noqa: S603 - the repository's own script
            ["bin/demo"], cwd=clone, env=env, capture_output=True, text=True, timeout=240, check=False
        )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert f"port {port} on 127.0.0.1 is already in use" in output and "PORT=" in output
    assert "/join/" not in output and "Invitation link" not in output
    assert not (clone / "var" / "db.sqlite3").exists()
