"""Score every generated candidate of a study (in the background unless --now)."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.core.management.base import BaseCommand, CommandError

from generation.settings import judge_from_settings
from kernel.exceptions import ApplicationError
from scoring import services
from scoring.core.judges import PROMPT_VERSIONS
from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from studies.models import Study
from studies.models_audit import command_origin


def _judge(options: dict[str, Any]) -> dict[str, str] | None:
    """The judge the flags ask for, each flag not given taken from its variable (docs/metrics.md); None when
    no flag is given, so the run takes the whole judge from the environment, or has none."""
    if not (options["judge_model"] or options["judge_base_url"] or options["judge_name"]):
        return None
    configured = judge_from_settings()
    judge = {
        field: (options[f"judge_{field}"] or getattr(configured, field)).strip()
        for field in ("model", "base_url", "name")
    }
    if not judge["model"] or not judge["base_url"]:
        raise CommandError(
            "A judge needs a model (--judge-model or JUDGE_MODEL) and a base URL (--judge-base-url or JUDGE_BASE_URL)."
        )
    return judge


class Command(BaseCommand):
    help = "Score a study's candidates with the named metrics; scores are stored per candidate, metric and version."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument(
            "--metrics", default="", help="comma-separated metric names (see python -m scoring.cli --list)"
        )
        parser.add_argument("--reference", default="titles", choices=["titles", "abstracts"])
        parser.add_argument("--source", default="abstracts", choices=["abstracts", "titles_and_abstracts"])
        parser.add_argument("--now", action="store_true", help="score in this process instead of queueing tasks")
        parser.add_argument("--judge-model", help="the LLM judge's model (default JUDGE_MODEL)")
        parser.add_argument("--judge-base-url", help="the judge server's base URL (default JUDGE_BASE_URL)")
        parser.add_argument(
            "--judge-name",
            default="",
            help="a short name for the judge's server (default JUDGE_NAME, else its host:port)",
        )
        parser.add_argument(
            "--pairwise",
            action="store_true",
            help="run the annotator-style pairwise judge over the study's answered matches (both orders) "
            "instead of scoring candidates; --metrics is then not needed",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with the slug {options['study']!r}.")
        metrics = [m.strip() for m in options["metrics"].split(",") if m.strip()]
        if not options["pairwise"] and not metrics:
            raise CommandError("Give --metrics (or --pairwise for the pairwise judge).")
        judge = _judge(options)
        try:
            if options["now"]:
                # Run the chunks in this process: the project's Celery app (config.celery) is the current one.
                current_app.conf.task_always_eager = True
            if options["pairwise"]:
                run = services.pairwise_run_start(study=study, judge=judge, origin=command_origin("score_study"))
                metrics = ["pairwise judge"]
            else:
                run = services.scoring_run_start(
                    study=study,
                    metrics=metrics,
                    reference=options["reference"],
                    source=options["source"],
                    judge=judge,
                    origin=command_origin("score_study"),
                )
        except ApplicationError as error:
            raise CommandError(error.message) from error
        run.refresh_from_db()
        if run.status == ScoringRun.Status.DONE or options["now"]:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Scored {run.done} of {run.total} {'matches' if options['pairwise'] else 'candidates'} "
                    f"with {', '.join(metrics)}."
                )
            )
            if options["pairwise"]:
                self._say_unanswered(run)
            else:
                self._say_missing(run)
        else:
            self.stdout.write(
                f"Queued scoring run {run.pk}: {run.total} {'matches' if options['pairwise'] else 'candidates'} in "
                "chunks; progress on the research page."
            )

    def _say_unanswered(self, run: ScoringRun) -> None:
        """How many of the pairwise run's votes have no usable answer (stored with a reason), and the first
        reason: a judge that is down or never answers A, B or Neither otherwise reads as a finished run."""
        judge = run.options.get("judge") or {}
        votes = PairwiseVote.objects.filter(
            match_id__in=[match_id for chunk in run.chunks for match_id in chunk],
            judge_model=judge.get("model", ""),
            judge_server=judge.get("server", ""),
            prompt_version=PROMPT_VERSIONS["pairwise"],
        )
        empty = votes.filter(choice="")
        count = empty.count()
        if count:
            reason = empty.exclude(reason="").values_list("reason", flat=True).first() or "no reason recorded"
            self.stdout.write(self.style.WARNING(f"{count} of {votes.count()} votes have no answer (e.g. {reason})."))

    def _say_missing(self, run: ScoringRun) -> None:
        """How many of the run's values could not be computed (stored empty, with a reason), and the first
        reason: "Scored 52 of 52" alone reads as 52 values where an unconfigured judge gave none."""
        missing = CandidateScore.objects.filter(
            candidate__query__participation__study_id=run.study_id,
            metric__in=run.metrics,
            computed_at__gte=run.created_at,
            value__isnull=True,
        )
        count = missing.count()
        if count:
            reason = missing.exclude(reason="").values_list("reason", flat=True).first() or "no reason recorded"
            self.stdout.write(self.style.WARNING(f"{count} values could not be computed (e.g. {reason})."))
