"""python manage.py upgrade_plan: the migrations this release would apply, each an expand (the previous release
keeps working while it runs), a contract (stop the previous release first) or one to review (docs/deploy.md,
"Upgrades"). `--check` exits 1 while a contract or an unreviewed migration is pending, for a deploy script."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from kernel.upgrades import Verdict, pending


class Command(BaseCommand):
    help = "List the pending migrations as expand, review or contract (can the previous release keep running?)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="exit 1 if a contract or a migration to review is pending"
        )
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        steps = pending(MigrationExecutor(connections[options["database"]]))
        if not steps:
            self.stdout.write("No migration is pending: nothing to do before the new release starts.")
            return
        for step in steps:
            self.stdout.write(f"{step.verdict.value:>8}  {step.app}.{step.name}")
            for finding in step.findings:
                if finding.verdict is not Verdict.EXPAND or step.verdict is Verdict.EXPAND and not step.reviewed:
                    self.stdout.write(f"          {finding.operation}: {finding.reason}")
            if step.reviewed:
                self.stdout.write(f"          reviewed: {step.reviewed}")
        contracts = [s for s in steps if s.verdict is Verdict.CONTRACT]
        review = [s for s in steps if s.verdict is Verdict.REVIEW]
        if contracts:
            self.stdout.write(
                f"\n{len(contracts)} contract migration(s): stop every web server and worker of the previous release "
                "before migrating (docs/deploy.md, 'Upgrades'); annotators see the one-moment page meanwhile."
            )
        elif review:
            self.stdout.write(
                f"\n{len(review)} migration(s) to review before migrating while the previous release runs."
            )
        else:
            self.stdout.write("\nEvery pending migration is an expand: migrate while the previous release serves.")
        if options["check"] and (contracts or review):
            raise SystemExit(1)
