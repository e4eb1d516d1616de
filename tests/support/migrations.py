"""Tests that take the database back to an earlier migration: `migrate_to` moves it, and `migrated_back` restores
every app's latest migration afterwards, whatever the test did.

Every app's, not the one app's under test: going back also unapplies other apps' migrations that depend on the
later ones, and restoring one app's latest left them off. The later tests of the same process then met an old
schema ("column annotation_bracket.design does not exist", after scoring's migration test went back to 0002)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(targets: Sequence[tuple[str, str | None]]) -> Any:
    """Migrate the test database to `targets` and return the apps (historical models) as of those migrations."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(list(targets))
    ContentType.objects.clear_cache()
    return executor.loader.project_state([target for target in targets if target[1]]).apps


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@contextmanager
def migrated_back(targets: Sequence[tuple[str, str | None]]) -> Iterator[Any]:
    """The apps as of `targets` while the block runs; every app's latest migration again afterwards."""
    try:
        yield migrate_to(targets)
    finally:
        migrate_to(latest())
