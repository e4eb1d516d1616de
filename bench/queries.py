"""Each written SQL read of the apps beside its best ORM equivalent, on a filled PostgreSQL database.

For every statement: its p50 wall time per call written out and through the ORM (`only()`, `values_list()`,
`select_related()`, one statement where the ORM can), their ratio, the statements each issues, and the
verdict by the rule of issue 29 (bench/README.md, "Written SQL or the ORM"): the written statement stays
only on a hot path (a request of the load test's targets, the status poll, every generation) where the ORM's
read costs at least RATIO times its CPU. CPU (this process's thread and its PostgreSQL backend's) decides, not
wall time: on a shared host the wall time is mostly waiting for a core, and under load what a request costs in
CPU is what the others queue behind (bench/load.py's CPU floor).

    .venv/bin/python bench/queries.py                         # 100 annotators x 2 questions, 2,000 calls each
    .venv/bin/python bench/queries.py --annotators 20 --calls 300    # a quick look

The database (`--db-name`, default bench_queries; it must start with bench) is dropped and created, filled
through the services with eager tasks (the offline backends: no broker, no model server) and dropped at the
end unless --keep-db. Calls alternate raw and ORM, so a busy host slows both alike.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._shared import QUESTIONS, check_db_name, process_cpu_ns, recreate_database  # noqa: E402

# The rule: a written statement stays on a hot path where the ORM's read costs this many times its CPU.
RATIO = 1.3


@dataclass
class Case:
    name: str  # the statement, as the table names it
    where: str  # the function that issues it
    hot: str  # the hot path it is on; "(...)" for a path that is not hot
    raw: Callable[[Any], Any]
    orm: Callable[[Any], Any]
    samples: list[Any]
    atomic: bool = False  # run inside a transaction (locking reads), rolled back after each call


def _fill(*, annotators: int, questions: int, seed: int) -> None:
    """A study with `annotators` who each asked `questions` and hold a token: every question answered to the
    end but the last, whose bracket is left part-way (so that each has a current match)."""
    from rest_framework.authtoken.models import Token

    from annotation.models import Match
    from annotation.selectors.tournament import match_current
    from annotation.services.query import query_submit
    from annotation.services.tournament import judgment_record
    from tests.annotation.factories import StudyFactory, join

    rng = random.Random(seed)
    study = StudyFactory(slug="bench", check_share=0.2)
    for _ in range(annotators):
        participation = join(study)
        Token.objects.create(user=participation.annotator)
        asked = rng.sample(QUESTIONS, questions)
        for number, text in enumerate(asked, start=1):
            query = query_submit(participation=participation, text=text, client_token="")
            left_pending = rng.randrange(1, 4) if number == len(asked) else 0
            while (match := match_current(query=query)) is not None and Match.objects.filter(
                bracket__query=query, status=Match.Status.PENDING
            ).count() + (match.round < 2) > left_pending:
                judgment_record(
                    match=match, choice=match.check_expected or rng.choice(["left", "right"]), by=participation
                )


def _replaced() -> dict[str, Callable[..., Any]]:
    """The written statements the ORM replaced (issue 29), kept here as the reference their rows measure the ORM
    against: each as it stood in annotation/selectors and annotation/services before."""
    from django.db import connection

    from annotation.models import Candidate, Participation, Query, RetrievedDocument
    from kernel.queries import (
        RowShape,
        column,
        fetch_one,
        for_update_of,
        instances_from_row,
        model_columns,
        select_list,
    )
    from studies.models import PromptTemplate, Study

    q = connection.ops.quote_name
    participation_shape: RowShape = [
        (Participation, "p", model_columns(Participation)),
        (Study, "s", model_columns(Study)),
    ]
    participation_from = (
        f"SELECT {select_list(participation_shape)} FROM {q(Participation._meta.db_table)} p"  # noqa: S608
        f" INNER JOIN {q(Study._meta.db_table)} s ON s.{column(Study, 'id')} = p.{column(Participation, 'study')}"
    )
    by_key = f"{participation_from} WHERE p.id = %s AND p.annotator_id = %s"
    locked = f"{participation_from} WHERE p.id = %s{for_update_of('p')}"

    def participation(sql: str, params: list[Any], annotator: Any = None) -> Any:
        found, study = instances_from_row(fetch_one(sql, params), participation_shape)
        found.study = study
        if annotator is not None:
            found.annotator = annotator
        return found

    query_shape: RowShape = [
        (Query, "q", model_columns(Query)),
        (Participation, "p", model_columns(Participation)),
        (Study, "s", model_columns(Study)),
        (PromptTemplate, "t", model_columns(PromptTemplate)),
    ]

    def query_sql(lock: bool, retrieval: bool) -> str:
        shape = query_shape if retrieval else query_shape[:3]
        documents = (
            f", EXISTS (SELECT 1 FROM {q(RetrievedDocument._meta.db_table)} d WHERE d.query_id = q.id)"  # noqa: S608
            if retrieval
            else ""
        )
        return (
            f"SELECT {select_list(shape)}{documents} FROM {q(Query._meta.db_table)} q"  # noqa: S608
            f" INNER JOIN {q(Participation._meta.db_table)} p ON p.id = q.participation_id"
            f" INNER JOIN {q(Study._meta.db_table)} s ON s.id = p.study_id"
            + (
                f" LEFT OUTER JOIN {q(PromptTemplate._meta.db_table)} t ON t.id = s.prompt_template_id"
                if retrieval
                else ""
            )
            + " WHERE q.id = %s"
            + (for_update_of("q") if lock else "")
        )

    statements = {
        (lock, retrieval): query_sql(lock, retrieval) for lock in (False, True) for retrieval in (False, True)
    }

    def query_with_study(query_id: int, *, lock: bool = False, retrieval: bool = False) -> Any:
        row = fetch_one(statements[lock, retrieval], [query_id])
        shape = query_shape if retrieval else query_shape[:3]
        width = sum(len(names) for _, _, names in shape)
        query, participation_read, study, *rest = instances_from_row(row[:width], shape)
        query.participation, participation_read.study = participation_read, study
        if retrieval:
            study.prompt_template = rest[0]
            query.has_documents = bool(row[-1])
        return query

    def positions_store(candidates: list[Any]) -> None:
        pairs = [(c.pk, c.position) for c in candidates]
        cases = " ".join("WHEN %s THEN %s" for _ in pairs)
        keys = ", ".join("%s" for _ in pairs)
        sql = (
            f"UPDATE {q(Candidate._meta.db_table)} SET {column(Candidate, 'position')} = CASE {column(Candidate, 'id')}"  # noqa: S608
            f" {cases} END WHERE {column(Candidate, 'id')} IN ({keys})"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [value for pair in pairs for value in pair] + [pk for pk, _ in pairs])

    return {
        "participation_own": lambda p: participation(by_key, [p.pk, p.annotator.pk], p.annotator),
        "participation_locked": lambda p: participation(locked, [p.pk]),
        "query_with_study": query_with_study,
        "positions_store": positions_store,
    }


def _cases() -> list[Case]:
    """The statements: the kept ones (annotation.queries, kernel.queries) beside the ORM reads they are held to
    (tests/annotation/orm_reads.py, DRF's token read), the replaced ones beside the ORM read that replaced them."""
    from rest_framework.authtoken.models import Token

    from annotation import queries
    from annotation.api.serializers import DOCUMENT_FIELDS, QUERY_SHOWN
    from annotation.models import Bracket, Candidate, Match, Participation, Query
    from annotation.selectors.participation import participation_locked, participation_own
    from annotation.selectors.query import query_with_study
    from annotation.views import PAGE_DOCUMENT_FIELDS
    from kernel.queries import token_with_user
    from tests.annotation import orm_reads

    participations = list(Participation.objects.select_related("annotator", "study"))
    asked = list(Query.objects.select_related("participation__annotator"))
    pending = list(
        Match.objects.filter(status=Match.Status.PENDING).select_related("bracket__query__participation__annotator")
    )
    matches = list(Match.objects.select_related("bracket"))
    candidates = list(Candidate.objects.values_list("pk", flat=True))
    tokens = list(Token.objects.values_list("key", flat=True))
    brackets = list(Bracket.objects.prefetch_related("query__candidates"))
    replaced = _replaced()

    def token_orm(key: str) -> Any:
        return Token.objects.select_related("user").get(key=key)

    def documents(names: tuple[str, ...]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        return (
            lambda query: queries.documents_values(query_id=query.pk, names=names),
            lambda query: orm_reads.documents_values(query_id=query.pk, names=names),
        )

    def by_slug(side: Any) -> Callable[[Any], Any]:
        return lambda p: side.participation_with_study(annotator=p.annotator, study_slug=p.study.slug)

    def own(side: Any) -> Callable[[Any], Any]:
        return lambda q: side.query_of_annotator(
            annotator_id=q.participation.annotator_id, query_id=q.pk, fields=QUERY_SHOWN
        )

    def shown(side: Any) -> Callable[[Any], Any]:
        return lambda m: side.match_current_shown(
            annotator_id=m.bracket.query.participation.annotator_id, query_id=m.bracket.query_id
        )

    def page(side: Any) -> Callable[[Any], Any]:
        return lambda m: side.match_current_of(participation=m.bracket.query.participation, index=m.bracket.query.index)

    poll, page_sources = documents(DOCUMENT_FIELDS), documents(PAGE_DOCUMENT_FIELDS)
    generation_sources = documents(("external_id", "title", "abstract", "url", "year", "venue", "authors"))
    kept = [
        Case(
            "token and its user",
            "kernel.queries.token_with_user",
            "every API request",
            lambda key: token_with_user(key=key),
            token_orm,
            tokens,
        ),
        Case(
            "participation by study slug",
            "participation_with_study",
            "match page",
            by_slug(queries),
            by_slug(orm_reads),
            participations,
        ),
        Case("question if the caller's", "query_of_annotator", "status poll", own(queries), own(orm_reads), asked),
        Case("sources, poll body", "documents_values", "status poll", *poll, asked),
        Case("sources, match page", "documents_values", "match page", *page_sources, asked),
        Case("sources, generation", "documents_values", "generation", *generation_sources, asked),
        Case(
            "generation progress",
            "candidate_progress_values",
            "status poll",
            lambda q: queries.candidate_progress_values(query_id=q.pk),
            lambda q: orm_reads.candidate_progress_values(query_id=q.pk),
            asked,
        ),
        Case("current match (API)", "match_current_shown", "current match", shown(queries), shown(orm_reads), pending),
        Case("current match (page)", "match_current_of", "match page", page(queries), page(orm_reads), pending),
        Case(
            "bracket progress",
            "bracket_slots",
            "match page",
            lambda m: queries.bracket_slots(bracket_id=m.bracket_id),
            lambda m: orm_reads.bracket_slots(bracket_id=m.bracket_id),
            matches,
        ),
        Case(
            "bracket, locked (choice)",
            "bracket_matches_locked",
            "choice",
            lambda m: queries.bracket_matches_locked(match_id=m.pk),
            lambda m: orm_reads.bracket_matches_locked(match_id=m.pk),
            matches,
            atomic=True,
        ),
        Case(
            "candidate for generation",
            "candidate_for_generation",
            "generation",
            lambda pk: queries.candidate_for_generation(candidate_id=pk),
            lambda pk: orm_reads.candidate_for_generation(candidate_id=pk),
            candidates,
        ),
        Case(
            "any candidate unfinished",
            "query_has_unfinished",
            "generation",
            lambda q: queries.query_has_unfinished(query_id=q.pk),
            lambda q: orm_reads.query_has_unfinished(query_id=q.pk),
            asked,
        ),
    ]
    gone = [
        Case(
            "participation by key",
            "participation_own",
            "(API participation routes)",
            replaced["participation_own"],
            lambda p: participation_own(annotator=p.annotator, participation_id=p.pk),
            participations,
        ),
        Case(
            "participation, locked",
            "participation_locked",
            "(a question, persona, finish)",
            replaced["participation_locked"],
            lambda p: participation_locked(participation_id=p.pk),
            participations,
            atomic=True,
        ),
        Case(
            "question with study, locked",
            "query_with_study(lock)",
            "(once per question)",
            lambda q: replaced["query_with_study"](q.pk, lock=True),
            lambda q: query_with_study(query_id=q.pk, lock=True),
            asked,
            atomic=True,
        ),
        Case(
            "question for retrieval",
            "query_with_study(retrieval)",
            "(once per question)",
            lambda q: replaced["query_with_study"](q.pk, retrieval=True),
            lambda q: query_with_study(query_id=q.pk, retrieval=True),
            asked,
        ),
        Case(
            "positions of a draw (write)",
            "bracket_create",
            "(once per question)",
            lambda b: replaced["positions_store"](list(b.query.candidates.all())),
            lambda b: Candidate.objects.bulk_update(list(b.query.candidates.all()), ["position"]),
            brackets,
            atomic=True,
        ),
    ]
    return kept + gone


def _time(case: Case, side: Callable[[Any], Any], sample: Any, backend: int) -> tuple[float, float]:
    """Wall time and CPU time (this thread's and its PostgreSQL backend's) of one call, in milliseconds."""
    from django.db import transaction

    wall, cpu, server = time.perf_counter_ns(), time.thread_time_ns(), process_cpu_ns(backend) or 0
    if case.atomic:
        with transaction.atomic():
            side(sample)
            transaction.set_rollback(True)
    else:
        side(sample)
    wall, cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
    return wall / 1e6, (cpu + (process_cpu_ns(backend) or 0) - server) / 1e6


def _statements(case: Case, side: Callable[[Any], Any], sample: Any) -> int:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        side(sample)
        transaction.set_rollback(True)
    if os.environ.get("BENCH_SHOW_SQL"):
        print([q["sql"][:80] for q in ctx.captured_queries], file=sys.stderr)
    return len(
        [
            q
            for q in ctx.captured_queries
            if not q["sql"].startswith(("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT"))
        ]
    )


def _run(cases: list[Case], *, calls: int, seed: int, only: str | None) -> list[dict[str, Any]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    rng = random.Random(seed)
    rows = []
    for case in cases:
        if only and only not in case.name and only not in case.where:
            continue
        if not case.samples:
            print(f"  skipped {case.name}: no rows to read", file=sys.stderr)
            continue
        for sample in case.samples[:20]:  # warm: the statements' caches, the ORM's, PostgreSQL's pages
            _time(case, case.raw, sample, backend)
            _time(case, case.orm, sample, backend)
        times: dict[str, list[tuple[float, float]]] = {"raw": [], "orm": []}
        for i in range(calls):
            sample = rng.choice(case.samples)
            for side in ("raw", "orm") if i % 2 else ("orm", "raw"):
                times[side].append(_time(case, getattr(case, side), sample, backend))
        wall = {side: statistics.median(t[0] for t in times[side]) for side in times}
        cpu = {side: statistics.median(t[1] for t in times[side]) for side in times}
        keep = not case.hot.startswith("(") and cpu["orm"] >= RATIO * cpu["raw"]
        row = {
            "name": case.name,
            "where": case.where,
            "hot": case.hot,
            "wall": wall,
            "cpu": cpu,
            "statements": {side: _statements(case, getattr(case, side), case.samples[0]) for side in times},
            "verdict": "keep" if keep else "ORM",
        }
        rows.append(row)
        print(
            f"| {row['name']} | `{row['where']}` | {row['hot']} | {wall['raw']:.2f} | {wall['orm']:.2f}"
            f" | {cpu['raw']:.2f} | {cpu['orm']:.2f} | {cpu['orm'] / cpu['raw']:.2f}x"
            f" | {row['statements']['raw']} / {row['statements']['orm']} | {row['verdict']} |",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=100)
    parser.add_argument("--questions", type=int, default=2, help=f"questions per annotator (at most {len(QUESTIONS)})")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per side and statement")
    parser.add_argument("--only", help="run the statements whose name or function contains this")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db-name", default="bench_queries")
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--keep-db", action="store_true", help="keep the database (and reuse it with --reuse-db)")
    parser.add_argument("--reuse-db", action="store_true", help="read the database a --keep-db run left")
    args = parser.parse_args(argv)
    check_db_name(parser, args.db_name)
    if not 1 <= args.questions <= len(QUESTIONS) or args.annotators < 1 or args.calls < 1:
        parser.error(f"--annotators and --calls must be at least 1 and --questions 1-{len(QUESTIONS)}")

    if not args.reuse_db:
        recreate_database(args.admin_url, args.db_name)
    work = Path(tempfile.mkdtemp(prefix="bench-queries-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": args.admin_url.rsplit("/", 1)[0] + f"/{args.db_name}",
            "CELERY_BROKER_URL": "memory://",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "LOG_LEVEL": "WARNING",
            "ENV_FILE": str(work / "no.env"),
            "MEDIA_ROOT": str(work / "media"),
        }
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    try:
        if not args.reuse_db:
            call_command("migrate", verbosity=0)
            started = time.monotonic()
            _fill(annotators=args.annotators, questions=args.questions, seed=args.seed)
            print(f"filled in {time.monotonic() - started:.0f} s", file=sys.stderr)
        from annotation.models import Candidate, Match, Query, RetrievedDocument

        print(
            f"database: {Query.objects.count()} questions, {Candidate.objects.count()} candidates, "
            f"{RetrievedDocument.objects.count()} sources, {Match.objects.count()} matches "
            f"({Match.objects.filter(status='pending').count()} pending); {args.calls} calls per side; "
            f"rule: written where hot and the ORM's CPU >= {RATIO}x"
        )
        print(
            "| statement | function | hot path | wall p50 ms raw | wall p50 ms ORM | CPU p50 ms raw | CPU p50 ms ORM"
            " | CPU ORM / raw | statements raw / ORM | verdict |"
        )
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        _run(_cases(), calls=args.calls, seed=args.seed, only=args.only)
    finally:
        connections.close_all()
        if not args.keep_db:
            import psycopg

            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
