"""The default "neither" threshold of each metric on the demo study, beside threshold 0 (the former default).

Creates the demo study (`seed_demo`: demo corpus, two offline strategies x persona/generic) in a fresh
database, lets seeded annotators ask questions and answer every match through the services (random choices,
"neither" one time in nine), scores every summary with the offline lexical, DataStats and abstractiveness
metrics (`score_study --now`), analyses it (`analyze --study demo`) and prints, per metric, its pooled SD,
the default threshold (0.2 pooled SD, docs/metrics.md) and how often the metric votes "neither" with alpha,
at threshold 0 and at the default. The choices are random, so alpha says nothing here: the thresholds and the
"neither" shares are the figures.

    .venv/bin/python bench/demo_thresholds.py                 # 8 annotators x 3 questions, about a minute
    .venv/bin/python bench/demo_thresholds.py --annotators 20 --questions 5

The database (`--db-name`, default bench_demo_thresholds; it must start with bench) is dropped and created
(`--admin-url` reaches the server), and kept at the end only with --keep-db. Tasks run eagerly in this
process: no broker or worker is used.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._shared import QUESTIONS, check_db_name, recreate_database  # noqa: E402

METRICS = (
    "rouge1,rouge2,rougeL,bleu,chrf,coverage,density,compression,novel_2gram,summary_length,ra_2,sa_2,ar_2,ar_risk"
)


def _play(*, annotators: int, questions: int, seed: int) -> None:
    from annotation.selectors.tournament import match_current
    from annotation.services.participation import participation_finish
    from annotation.services.query import query_submit
    from annotation.services.tournament import judgment_record
    from studies.models import Study
    from tests.annotation.factories import join

    study = Study.objects.get(slug="demo")
    rng = random.Random(seed)
    for _ in range(annotators):
        participation = join(study)
        for text in rng.sample(QUESTIONS, questions):
            query = query_submit(participation=participation, text=text, client_token="")
            while (match := match_current(query=query)) is not None:
                choice = rng.choices(["left", "right", "neither"], weights=[4, 4, 1])[0]
                judgment_record(match=match, choice=choice, by=participation)
        participation_finish(participation=participation)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--questions", type=int, default=3, help="questions per annotator (at most 10)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--db-name", default="bench_demo_thresholds")
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)
    check_db_name(parser, args.db_name)
    if not 1 <= args.questions <= len(QUESTIONS) or args.annotators < 1:
        parser.error(f"--annotators must be at least 1 and --questions 1-{len(QUESTIONS)}")

    database_url = args.admin_url.rsplit("/", 1)[0] + f"/{args.db_name}"
    recreate_database(args.admin_url, args.db_name)
    work = Path(tempfile.mkdtemp(prefix="bench-demo-thresholds-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url,
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
        call_command("migrate", verbosity=0)
        quiet = io.StringIO()
        call_command(
            "seed_demo", "--admin-password", "bench-only", "--admin-password-file", str(work / "pw"), stdout=quiet
        )
        _play(annotators=args.annotators, questions=args.questions, seed=args.seed)
        call_command("score_study", "--study", "demo", "--metrics", METRICS, "--now", stdout=quiet)
        out = work / "report"
        call_command("analyze", "--study", "demo", "--out", str(out), "--resamples", str(args.resamples), verbosity=0)
        report = json.loads((out / "report.json").read_text())
    finally:
        connections.close_all()
        if not args.keep_db:
            import psycopg

            with psycopg.connect(args.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{args.db_name}" WITH (FORCE)')

    agreement = report["agreement"]
    sweep: dict[str, dict[float, dict]] = defaultdict(dict)
    for point in report["threshold_sweeps"]:
        sweep[point["metric"]][round(point["sd_multiple"], 6)] = point
    p = report["provenance"]
    print(
        f"demo study: {p['n_annotators']} annotators, {p['n_rows']} comparisons; human 'neither' "
        f"{agreement['human_neither']:.1%}; reference: threshold 0 (the former default)"
    )
    header = ("metric", "pooled SD", "threshold", "neither @0", "neither @default", "alpha @0", "alpha @default")
    print(f"{header[0]:<16}" + "".join(f"{h:>17}" for h in header[1:]))
    for m in agreement["metrics"]:
        zero = sweep.get(m["metric"], {}).get(0.0, {})
        print(
            f"{m['metric']:<16}{_fmt(m.get('pooled_sd'), 4):>17}{_fmt(m['threshold'], 4):>17}"
            f"{_fmt(zero.get('metric_neither')):>17}{_fmt(m['metric_neither']):>17}"
            f"{_fmt(zero.get('alpha')):>17}{_fmt(m['alpha']):>17}"
        )
    for excluded in agreement.get("excluded", []):
        print(f"left out: {excluded['metric']}: {excluded['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
