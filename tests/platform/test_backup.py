"""A backup restores into an empty database with every answer and every research file (docs/backup.md)."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis import services
from analysis.models import ResearchJob
from annotation.models import Judgment
from annotation.selectors.tournament import match_current
from annotation.services.participation import participation_finish
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from tests.annotation.factories import StudyFactory, join
from tests.platform.conftest import REPO, production_env

pytestmark = pytest.mark.django_db(transaction=True)


def play(slug: str) -> None:
    study = StudyFactory(slug=slug)
    rng = random.Random(3)
    for _ in range(2):
        participation = join(study)
        query = query_submit(
            participation=participation, text="How are summaries of papers evaluated?", client_token=""
        )
        while (match := match_current(query=query)) is not None:
            judgment_record(match=match, choice=rng.choice(["left", "right", "neither"]), by=participation)
        participation_finish(participation=participation)
    services.research_job_start(study=study, kind=ResearchJob.Kind.EXPORT, options={"format": "csv"})


def manage(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_backup_restores_into_an_empty_database_with_every_answer_and_file(
    fresh_database: str, tmp_path: Path, settings
) -> None:
    play("backed-up")
    answers = sorted(Judgment.objects.values_list("match_id", "choice"))
    assert answers
    job = ResearchJob.objects.get()
    assert job.status == ResearchJob.Status.DONE, job.error
    stored = {
        path.relative_to(settings.MEDIA_ROOT).as_posix(): path.read_bytes()
        for path in Path(settings.MEDIA_ROOT, "research").rglob("*")
        if path.is_file()
    }
    assert any(key.endswith("comparisons.csv") for key in stored)

    out = io.StringIO()
    call_command("backup", out=tmp_path / "backup", stdout=out)
    assert f"{len(answers)} answers" in out.getvalue()

    env = {**production_env(fresh_database, tmp_path), "MEDIA_ROOT": str(tmp_path / "media-restored")}
    restored = manage("restore", "--from", str(tmp_path / "backup"), env=env, cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert f"{len(answers)} answers" in restored.stdout
    with psycopg.connect(fresh_database.replace("postgres://", "postgresql://", 1)) as conn:
        back = sorted(conn.execute("SELECT match_id, choice FROM annotation_judgment").fetchall())
    assert back == answers
    for key, content in stored.items():
        assert (tmp_path / "media-restored" / key).read_bytes() == content, key
    # The restored deployment runs: nothing left to migrate, and the study's export is listed.
    assert manage("migrate", "--check", env=env, cwd=tmp_path).returncode == 0

    # Never over data: a second restore into the now full database is refused, naming why, and changes nothing.
    again = manage("restore", "--from", str(tmp_path / "backup"), env=env, cwd=tmp_path)
    assert again.returncode != 0 and "is not empty" in again.stderr
    with psycopg.connect(fresh_database.replace("postgres://", "postgresql://", 1)) as conn:
        assert conn.execute("SELECT count(*) FROM annotation_judgment").fetchone() == (len(answers),)


def test_a_damaged_backup_is_refused_naming_the_file(tmp_path: Path) -> None:
    play("damaged")
    call_command("backup", out=tmp_path / "backup", stdout=io.StringIO())
    csv = next((tmp_path / "backup" / "files").rglob("comparisons.csv"))
    csv.write_bytes(csv.read_bytes() + b"tampered\n")
    with pytest.raises(CommandError, match=r"--from: .*comparisons\.csv is missing or differs"):
        call_command("restore", folder=tmp_path / "backup")
    with pytest.raises(CommandError, match="--out: .* is not empty"):
        call_command("backup", out=tmp_path / "backup")
