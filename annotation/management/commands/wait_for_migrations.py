"""python manage.py wait_for_migrations: return once the database holds every migration this release has.

A worker or the beat scheduler of a new release, on a host of its own, could start before the web servers had
migrated (compose's start order holds on one host only) and run the new code against the old tables. The
entrypoint (platform/entrypoint.sh) runs this before both, so they start on the schema their code expects."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


def unapplied(database: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations this code has and the database does not, as app.name."""
    executor = MigrationExecutor(connections[database])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]


class Command(BaseCommand):
    help = "Wait until every migration of this release is applied (the web servers apply them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait before giving up")
        parser.add_argument("--every", type=float, default=3.0, help="seconds between two looks")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["timeout"] < 0 or options["every"] <= 0:
            raise CommandError("--timeout must be at least 0 and --every above 0.")
        deadline = time.monotonic() + options["timeout"]
        said = False
        while missing := unapplied():
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"{len(missing)} migration(s) of this release are still not applied after "
                    f"{options['timeout']:g} s (first: {missing[0]}): start a web server of this release, which "
                    "migrates, or run `python manage.py migrate`."
                )
            if not said:
                self.stdout.write(
                    f"Waiting for the web servers to apply {len(missing)} migration(s) ({missing[0]}, ...)."
                )
                said = True
            connections.close_all()  # a fresh look each time, not a transaction's snapshot
            time.sleep(options["every"])
        if said:
            self.stdout.write("Migrations applied: starting.")
