"""Migrations a running study can take (docs/deploy.md, "Upgrades"): the classifier's rules on operations written
here, and the rule held over the project's own migrations from the day it was written down."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader

from kernel.upgrades import Verdict, classify, step_of, verdict_of

# The last migration of each app released before the rule (2026-12-06). Earlier ones added NOT NULL columns
# without a database default (annotation 0008 to 0014, among others): each needed the previous release stopped.
RELEASED_BEFORE_THE_RULE = {
    "annotation": "0019_audit_log",
    "analysis": "0002_background_leases",
    "scoring": "0003_judge_identity",
    "corpus": "0004_retrieval_corpus_state",
}
PROJECT_APPS = {"annotation", "analysis", "scoring", "corpus", "studies"}


def verdict(operation: migrations.operations.base.Operation, new: set[tuple[str, str]] | None = None) -> Verdict:
    return verdict_of(classify(operation, "annotation", new))


def test_a_not_null_column_without_a_database_default_breaks_the_previous_release() -> None:
    added = migrations.AddField("query", "topic", models.CharField(max_length=20, default=""))
    assert verdict(added) is Verdict.CONTRACT  # Django's default= is applied by the new code only
    findings = classify(added)
    assert "previous release's inserts leave it out and fail" in findings[0].reason
    assert verdict(migrations.AddField("query", "topic", models.CharField(max_length=20, db_default=""))) is (
        Verdict.EXPAND
    )
    assert verdict(migrations.AddField("query", "topic", models.CharField(max_length=20, null=True))) is Verdict.EXPAND


def test_removing_or_renaming_breaks_it_and_a_new_table_does_not() -> None:
    assert verdict(migrations.RemoveField("query", "feedback")) is Verdict.CONTRACT
    assert verdict(migrations.RenameField("query", "feedback", "comment")) is Verdict.CONTRACT
    assert verdict(migrations.DeleteModel("SweeperRun")) is Verdict.CONTRACT
    created: set[tuple[str, str]] = set()
    table = migrations.CreateModel("Note", [("id", models.BigAutoField(primary_key=True))])
    assert verdict(table, created) is Verdict.EXPAND
    # Anything done to a table the same upgrade creates: the previous release never reads it.
    required = migrations.AddField("note", "text", models.TextField(default=""))
    assert verdict(required, created) is Verdict.EXPAND
    assert verdict(required) is Verdict.CONTRACT


def test_a_move_between_apps_on_paper_is_an_expand_and_code_is_for_review() -> None:
    moved = migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel("Study")])
    assert verdict(moved) is Verdict.EXPAND
    code = migrations.RunPython(migrations.RunPython.noop)
    assert verdict(code) is Verdict.REVIEW

    class Reviewed(migrations.Migration):
        operations = [code]
        UPGRADE_NOTE = "expand: fills a new column; the previous release never reads it"

    assert step_of(Reviewed("0099_fill", "annotation")).verdict is Verdict.EXPAND

    class Breaking(migrations.Migration):
        operations = [code]
        UPGRADE_NOTE = "contract: relabels what the previous release checks"

    assert step_of(Breaking("0100_relabel", "annotation")).verdict is Verdict.CONTRACT


def test_every_migration_since_the_rule_is_an_expand_or_says_why_not() -> None:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    new_tables: set[tuple[str, str]] = set()
    plan: list[tuple[str, str]] = []
    for leaf in sorted(loader.graph.leaf_nodes()):
        for node in loader.graph.forwards_plan(leaf):
            if node not in plan:
                plan.append(node)
    refused = []
    for app, name in plan:
        step = step_of(loader.graph.nodes[(app, name)], new_tables)
        if app not in PROJECT_APPS or name <= RELEASED_BEFORE_THE_RULE.get(app, ""):
            continue
        if step.verdict is not Verdict.EXPAND and not step.reviewed.startswith("contract:"):
            reasons = "; ".join(f"{f.operation}: {f.reason}" for f in step.findings if f.verdict is not Verdict.EXPAND)
            refused.append(f"{app}.{name} ({step.verdict.value}): {reasons}")
    assert refused == [], (
        "a migration the previous release cannot run beside (docs/deploy.md, 'Upgrades'): make it an expand, or "
        "set UPGRADE_NOTE = 'expand: why it is safe' after review, or 'contract: ...' for a release that stops "
        "the previous one first:\n" + "\n".join(refused)
    )


@pytest.mark.django_db
def test_upgrade_plan_on_a_migrated_database_has_nothing_to_do() -> None:
    out = io.StringIO()
    call_command("upgrade_plan", "--check", stdout=out)
    assert "No migration is pending" in out.getvalue()
