"""Which migrations a running study can take (docs/deploy.md, "Upgrades").

An upgrade runs the new release's migrations while the previous release's web servers and workers still serve
annotators (web hosts migrate as they start; workers wait for them: `wait_for_migrations`). That is safe only
for an *expand* migration, one the previous release's code keeps working on: a new table, a new nullable
column or one with a database default, an index. A *contract* migration breaks the previous release while it
runs: it removes or renames what that code reads, or adds a column its inserts do not fill. Such a change ships
in two releases: the first stops using the thing (and adds what replaces it, as an expand), the second, once
no host runs the first, removes it.

`classify(operation)` says which an operation is, with the reason; `pending(executor)` lists the migrations a
database has not applied, each with its verdict. `manage.py upgrade_plan` prints them; `--check` fails while a
contract is pending, for a deploy script to stop the previous release first.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from django.db import migrations, models
from django.db.migrations.executor import MigrationExecutor


class Verdict(Enum):
    EXPAND = "expand"  # the previous release keeps working
    REVIEW = "review"  # code the tool cannot read (SQL, Python) or a constraint old rows may break
    CONTRACT = "contract"  # the previous release breaks: stop it first


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    operation: str
    reason: str


# Operations that change only Django's idea of the models, never the database.
STATE_ONLY = (
    migrations.AlterModelOptions,
    migrations.AlterModelManagers,
)


def _field_is_optional(field: models.Field[Any, Any]) -> bool:
    """The previous release can insert rows without knowing the column: it may be NULL, the database fills it,
    or it is a many-to-many (a table of its own)."""
    if field.many_to_many:
        return True
    if field.null:
        return True
    return getattr(field, "db_default", models.NOT_PROVIDED) is not models.NOT_PROVIDED


def classify(
    operation: migrations.operations.base.Operation, app: str = "", new_tables: set[tuple[str, str]] | None = None
) -> list[Finding]:
    """The operation's verdict. `new_tables`: the models (app, lower-case name) created earlier in the same
    upgrade, which the previous release has never seen, so anything done to them is an expand; a CreateModel
    adds its model to it."""
    new_tables = new_tables if new_tables is not None else set()
    name = operation.describe()
    if isinstance(operation, migrations.SeparateDatabaseAndState):
        # Only what it does to the database counts; its state operations move models between apps on paper.
        found = [f for op in operation.database_operations for f in classify(op, app, new_tables)]
        return found or [Finding(Verdict.EXPAND, name, "changes Django's state only, not the database")]
    if isinstance(operation, STATE_ONLY):
        return [Finding(Verdict.EXPAND, name, "no change to the database")]
    if isinstance(operation, migrations.CreateModel):
        new_tables.add((app, operation.name_lower))
        return [Finding(Verdict.EXPAND, name, "a new table, which the previous release never reads")]
    model = getattr(operation, "model_name_lower", None) or getattr(operation, "model_name", "")
    if (app, str(model).lower()) in new_tables:
        return [
            Finding(Verdict.EXPAND, name, "on a table this upgrade creates, which the previous release never reads")
        ]
    if isinstance(operation, migrations.AddIndex):
        return [Finding(Verdict.EXPAND, name, "an index (it blocks writes to the table while it is built)")]
    if isinstance(operation, migrations.AddField):
        if _field_is_optional(operation.field):
            return [Finding(Verdict.EXPAND, name, "a column the previous release's inserts may leave out")]
        return [
            Finding(
                Verdict.CONTRACT,
                name,
                "a NOT NULL column without a database default: the previous release's inserts leave it out and "
                "fail (give it db_default=, or null=True first and NOT NULL in the next release)",
            )
        ]
    if isinstance(operation, migrations.RemoveField | migrations.DeleteModel):
        return [Finding(Verdict.CONTRACT, name, "removes what the previous release reads and writes")]
    if isinstance(operation, migrations.RenameField | migrations.RenameModel | migrations.AlterModelTable):
        return [Finding(Verdict.CONTRACT, name, "renames what the previous release reads and writes")]
    if isinstance(operation, migrations.AlterField):
        if operation.field.null:
            return [Finding(Verdict.EXPAND, name, "the column may be NULL: the previous release's values still fit")]
        return [
            Finding(
                Verdict.REVIEW,
                name,
                "a changed column: safe if it only widens what it accepts (a longer max_length, a dropped "
                "constraint); a contract if it narrows it or makes it NOT NULL",
            )
        ]
    if isinstance(operation, migrations.AddConstraint | migrations.AlterUniqueTogether):
        return [
            Finding(Verdict.REVIEW, name, "a constraint: the previous release may write rows it refuses, until stopped")
        ]
    if isinstance(operation, migrations.RemoveIndex | migrations.RemoveConstraint | migrations.RenameIndex):
        return [Finding(Verdict.EXPAND, name, "drops or renames an index or constraint, which no code names")]
    if isinstance(operation, migrations.RunPython | migrations.RunSQL):
        return [Finding(Verdict.REVIEW, name, "code the tool cannot read: check what it changes")]
    return [Finding(Verdict.REVIEW, name, f"{type(operation).__name__}: not classified")]


def verdict_of(findings: list[Finding]) -> Verdict:
    order = [Verdict.EXPAND, Verdict.REVIEW, Verdict.CONTRACT]
    return max((f.verdict for f in findings), key=order.index, default=Verdict.EXPAND)


@dataclass(frozen=True)
class Step:
    app: str
    name: str
    verdict: Verdict
    findings: list[Finding]
    reviewed: str = ""  # the migration's own UPGRADE_NOTE: what a person found on reviewing it


def step_of(migration: migrations.Migration, new_tables: set[tuple[str, str]] | None = None) -> Step:
    new_tables = new_tables if new_tables is not None else set()
    findings = [f for operation in migration.operations for f in classify(operation, migration.app_label, new_tables)]
    verdict = verdict_of(findings)
    note = str(getattr(migration, "UPGRADE_NOTE", "") or "")
    if verdict is Verdict.REVIEW and note.startswith("expand:"):
        verdict = Verdict.EXPAND  # reviewed: the note says why the previous release keeps working
    elif note.startswith("contract:"):
        verdict = Verdict.CONTRACT  # reviewed: the note says what of the previous release it breaks
    return Step(migration.app_label, migration.name, verdict, findings, note)


def pending(executor: MigrationExecutor) -> list[Step]:
    """The migrations this database has not applied, in the order `migrate` would apply them."""
    targets = executor.loader.graph.leaf_nodes()
    plan = executor.migration_plan(targets)
    new_tables: set[tuple[str, str]] = set()
    return [step_of(migration, new_tables) for migration, backwards in plan if not backwards]
