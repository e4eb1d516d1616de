"""Back up and restore a deployment: the database and the research files in object storage, with a manifest
that a restore checks itself against (docs/backup.md).

A backup is a folder: ``database.dump`` (PostgreSQL's custom format, from ``pg_dump``) or ``database.sqlite3``
(SQLite's online backup), ``files/`` (every key of the research storage, as stored) and ``backup.json`` (when,
which code, which migrations, the rows that matter counted, every file with its size and SHA-256). A restore
goes into an empty database only, puts the files back, and then counts the rows and hashes the files again:
a backup that did not come back whole is an error naming what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.files.base import File
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from analysis.models import ResearchJob
from analysis.services import research_storage, stored_keys
from analysis.stats.provenance import code_version
from annotation.models import Candidate, Judgment, Match, Participation, Query
from kernel.exceptions import ApplicationError
from studies.models import Study

MANIFEST = "backup.json"
FORMAT_VERSION = 1
# What a restore must find again, counted: the answers above all (docs/backup.md).
COUNTED = {
    "studies": Study,
    "participations": Participation,
    "questions": Query,
    "summaries": Candidate,
    "matches": Match,
    "answers": Judgment,
    "research_jobs": ResearchJob,
}
STORAGE_ROOT = "research"


@dataclass(frozen=True)
class BackupResult:
    folder: Path
    counts: dict[str, int]
    files: int
    bytes: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _counts() -> dict[str, int]:
    return {name: model._default_manager.count() for name, model in COUNTED.items()}


def _storage_keys() -> list[str]:
    return sorted(stored_keys(research_storage(), STORAGE_ROOT))


def _pg_environment() -> dict[str, str]:
    """libpq's variables for the configured database, so that no password is on a command line."""
    db = connection.settings_dict
    env = dict(os.environ)
    for key, name in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"), ("PASSWORD", "PGPASSWORD")):
        if db.get(key):
            env[name] = str(db[key])
    env["PGDATABASE"] = str(db["NAME"])
    return env


def _run(command: list[str], *, what: str) -> None:
    try:
        done = subprocess.run(command, env=_pg_environment(), capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise ApplicationError(
            f"{command[0]} is not installed: {what} needs PostgreSQL's client tools (apt-get install "
            "postgresql-client, of the server's major version or newer)."
        ) from error
    if done.returncode != 0:
        raise ApplicationError(f"{what} failed ({command[0]} exited {done.returncode}): {done.stderr.strip()[-2000:]}")


def backup_create(*, out: Path) -> BackupResult:
    """Write a backup of the database and the research files into ``out`` (a new or empty folder)."""
    if out.exists() and any(out.iterdir()):
        raise ApplicationError(f"{out} is not empty: a backup goes into a new or empty folder.", field="out")
    out.mkdir(parents=True, exist_ok=True)
    vendor = connection.vendor
    # Counted first: the dump is taken after, so every row counted is in it (rows added meanwhile are extra).
    counts = _counts()
    if vendor == "postgresql":
        database = "database.dump"
        _run(
            ["pg_dump", "--format=custom", "--no-owner", "--no-privileges", f"--file={out / database}"], what="pg_dump"
        )
    elif vendor == "sqlite":
        database = "database.sqlite3"
        source = sqlite3.connect(str(connection.settings_dict["NAME"]))
        try:
            with sqlite3.connect(str(out / database)) as copy:
                source.backup(copy)
        finally:
            source.close()
    else:
        raise ApplicationError(f"Backups support PostgreSQL and SQLite, not {vendor}.")
    storage = research_storage()
    files = []
    total = 0
    for key in _storage_keys():
        target = out / "files" / key
        target.parent.mkdir(parents=True, exist_ok=True)
        with storage.open(key, "rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        size = target.stat().st_size
        total += size
        files.append({"key": key, "bytes": size, "sha256": _sha256(target)})
    migrations = sorted(MigrationRecorder(connection).applied_migrations())
    manifest = {
        "format": FORMAT_VERSION,
        "created_at": datetime.now(tz=UTC).isoformat(),
        "code_version": code_version(),
        "database": {"vendor": vendor, "file": database, "sha256": _sha256(out / database)},
        "migrations": [f"{app}.{name}" for app, name in migrations],
        "counts": counts,
        "files": files,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return BackupResult(folder=out, counts=counts, files=len(files), bytes=total)


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ApplicationError(f"{path} not found: not a backup folder.", field="from") from error
    except (OSError, ValueError) as error:
        raise ApplicationError(f"{path} cannot be read: {error}", field="from") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        raise ApplicationError(f"{path}: not a backup manifest of format {FORMAT_VERSION}.", field="from")
    return manifest


def _database_is_empty() -> bool:
    return not connection.introspection.table_names()


def backup_restore(*, folder: Path) -> BackupResult:
    """Restore the backup in ``folder`` into the configured database, which must be empty, and its files into the
    research storage; then check the rows and files against the manifest."""
    manifest = read_manifest(folder)
    database = folder / manifest["database"]["file"]
    if not database.is_file() or _sha256(database) != manifest["database"]["sha256"]:
        raise ApplicationError(f"{database} is missing or differs from the manifest's SHA-256.", field="from")
    for entry in manifest["files"]:
        path = folder / "files" / entry["key"]
        if not path.is_file() or _sha256(path) != entry["sha256"]:
            raise ApplicationError(f"{path} is missing or differs from the manifest's SHA-256.", field="from")
    if manifest["database"]["vendor"] != connection.vendor:
        raise ApplicationError(
            f"The backup is of a {manifest['database']['vendor']} database; this one is {connection.vendor}."
        )
    if not _database_is_empty():
        raise ApplicationError(
            f"The database {connection.settings_dict['NAME']!r} is not empty: a restore goes into a new, empty "
            "database (createdb NAME), never over data."
        )
    if connection.vendor == "postgresql":
        connection.close()
        _run(["pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", f"--dbname={connection.settings_dict['NAME']}", str(database)], what="pg_restore")  # fmt: skip
    else:
        connection.close()
        source = sqlite3.connect(str(database))
        try:
            with sqlite3.connect(str(connection.settings_dict["NAME"])) as restored:
                source.backup(restored)
        finally:
            source.close()
    storage = research_storage()
    total = 0
    for entry in manifest["files"]:
        path = folder / "files" / entry["key"]
        if storage.exists(entry["key"]):
            storage.delete(entry["key"])
        with path.open("rb") as fh:
            saved = storage.save(entry["key"], File(fh))
        if saved != entry["key"]:
            raise ApplicationError(f"The storage saved {entry['key']} as {saved}; the restore is incomplete.")
        total += entry["bytes"]
    counts = _counts()
    short = {name: (manifest["counts"][name], counts.get(name)) for name in manifest["counts"]}
    missing = {name: pair for name, pair in short.items() if pair[1] is None or pair[1] < pair[0]}
    if missing:
        said = ", ".join(f"{name} {now} of {was}" for name, (was, now) in missing.items())
        raise ApplicationError(f"The restored database lacks rows the backup counted: {said}.")
    return BackupResult(folder=folder, counts=counts, files=len(manifest["files"]), bytes=total)
