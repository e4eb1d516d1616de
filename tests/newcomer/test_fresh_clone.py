"""A fresh clone: management commands and the demo seeding work with nothing set in the environment."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
UNSET = ("DATABASE_URL", "SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE", "CELERY_BROKER_URL", "ENV_FILE")


def _manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    # Only where files go, so that the run touches neither var/ nor a running demo's database.
    env.update(
        ENV_FILE=str(tmp_path / "no.env"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        BROKER_DIR=str(tmp_path / "broker"),
        MEDIA_ROOT=str(tmp_path / "media"),
        CORPUS_ROOT=str(tmp_path / "corpora"),
        PYTHONPATH=str(REPO_ROOT),
    )
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "manage.py"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stdout


def test_management_commands_need_no_settings_and_the_demo_can_be_seeded_again(tmp_path: Path) -> None:
    assert "System check identified no issues" in _ok(_manage(tmp_path, "check"))
    _ok(_manage(tmp_path, "migrate", "--noinput"))

    scitldr = tmp_path / "SciTLDR-A_dev.jsonl"
    rows = [
        {
            "paper_id": f"p{i}",
            "title": title,
            "source": [f"We study {topic}.", f"Our {topic} method improves results."],
            "source_labels": [0, 1],
            "rouge_scores": [0.1, 0.2],
            "target": [f"A better {topic} method."],
        }
        for i, (title, topic) in enumerate([("Graph nets", "graph learning"), ("Speech", "speech recognition")])
    ]
    scitldr.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _ok(_manage(tmp_path, "import_corpus", str(scitldr), "--no-progress"))

    password_file = tmp_path / "var" / "demo-admin-password"
    first = _ok(_manage(tmp_path, "seed_demo", "--retrieval", "corpus", "--admin-password-file", str(password_file)))
    password = password_file.read_text(encoding="utf-8").strip()
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert f"user 'admin'  password '{password}'" in first
    assert re.search(r"http://127\.0\.0\.1:8000/join/\S+", first)

    # A second run keeps the study and the admin and says again how to sign in.
    again = _ok(_manage(tmp_path, "seed_demo", "--retrieval", "corpus", "--admin-password-file", str(password_file)))
    assert f"password '{password}'" in again
    assert "Created study" not in again

    # A password given on the command line replaces the generated one, which is then not shown again.
    given = _ok(
        _manage(tmp_path, "seed_demo", "--admin-password", "s3cret-Pass", "--admin-password-file", str(password_file))
    )
    assert "password 's3cret-Pass'" in given and not password_file.exists()
    assert "retrieves from the 'demo' sources" in given

    # A research command from the README, on the same embedded default.
    out = _ok(
        _manage(tmp_path, "export_comparisons", "--study", "demo", "--out", str(tmp_path / "out"), "--formats", "csv")
    )
    assert "Wrote 0 rows" in out


def _entry_point(tmp_path: Path, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(ENV_FILE=str(tmp_path / "no.env"), PYTHONPATH=str(REPO_ROOT), **extra)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_server_and_the_worker_start_on_production_settings_and_refuse_without_a_secret_key(
    tmp_path: Path,
) -> None:
    """What gunicorn (config.wsgi) and Celery (config.celery) load on a fresh clone: production settings,
    which refuse to start with a throwaway key; with SECRET_KEY set they load, with DEBUG off."""
    for module in ("config.wsgi", "config.celery"):
        code = f"import {module}; from django.conf import settings; print(settings.SETTINGS_MODULE, settings.DEBUG)"
        refused = _entry_point(tmp_path, code)
        assert refused.returncode != 0, refused.stdout
        assert "Set SECRET_KEY" in refused.stderr, refused.stderr[-2000:]
        started = _entry_point(tmp_path, code, SECRET_KEY="a-long-production-secret-" + "x" * 40)
        assert started.returncode == 0, started.stderr[-2000:]
        assert started.stdout.split() == ["config.settings.production", "False"], module
