"""Write report.json, report.html and the tables for a study (database) or an exported table (file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from analysis.cli import main, report_messages
from analysis.report.bundle import write_analysis
from analysis.selectors import analysis_frame
from analysis.services import DEFAULT_RESAMPLES, DEFAULT_SEED, analysis_config_for
from analysis.stats.analyze import analyze
from analysis.stats.errors import AnalysisError
from kernel.cli import out_dir_problem
from kernel.exceptions import ApplicationError
from studies.models import Study


class Command(BaseCommand):
    help = "Analyse a study (--study SLUG) or an exported comparison table (--comparisons FILE) into --out DIR."

    def add_arguments(self, parser: Any) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--study", help="study slug (reads the database)")
        source.add_argument(
            "--comparisons", type=Path, help="comparison table .csv/.jsonl/.parquet or legacy .zip (no database)"
        )
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--resamples", type=int, default=None)
        parser.add_argument(
            "--exclude",
            default=None,
            help="exclusion rule for a study: reasons among checks, speed, manual (comma-separated), or none; "
            "default: manual, plus checks and speed when the study uses them (docs/analysis.md)",
        )
        parser.add_argument(
            "--config", type=Path, default=None, help="JSON file of AnalysisConfig settings (file mode only)"
        )
        export = parser.add_mutually_exclusive_group()
        export.add_argument(
            "--export", action="store_true", help="file mode: also re-export the table (CSV, JSONL, Parquet)"
        )
        export.add_argument("--no-export", action="store_true", help="file mode: never write the table")

    def handle(self, *args: Any, **options: Any) -> None:
        problem = out_dir_problem(options["out"])
        if problem:
            raise CommandError(f"--out: {problem}")
        extra = []
        if options["seed"] is not None:
            extra += ["--seed", str(options["seed"])]
        if options["resamples"] is not None:
            extra += ["--resamples", str(options["resamples"])]
        if options["config"] is not None:
            if not options["comparisons"]:
                raise CommandError("--config applies to --comparisons (a study's settings come from the study)")
            extra += ["--config", str(options["config"])]
        if options["comparisons"]:
            if options["exclude"] is not None:
                raise CommandError("--exclude applies to --study: a table from a file carries no quality flags.")
            if options["export"]:
                extra.append("--export")
            if options["no_export"]:
                extra.append("--no-export")
            code = main(["--comparisons", str(options["comparisons"]), "--out", str(options["out"]), *extra])
            if code:
                # The file-mode status (2: bad input, named in the message above) is the command's too.
                raise CommandError("analysis failed (see the message above)", returncode=code)
            return
        self._study(options)

    def _study(self, options: dict[str, Any]) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with the slug {options['study']!r}.")
        try:
            frame, exclusion = analysis_frame(study=study, exclude=options["exclude"])
        except ApplicationError as error:
            raise CommandError(f"--exclude: {error.message}") from error
        if frame.empty:
            raise CommandError(
                f"Study {study.slug!r} has no answered comparisons yet."
                if not exclusion.total_comparisons
                else f"The exclusion rule ({exclusion.rule}) left no comparisons of {study.slug!r} to analyse."
            )
        seed = options["seed"] if options["seed"] is not None else DEFAULT_SEED
        resamples = options["resamples"] if options["resamples"] is not None else DEFAULT_RESAMPLES
        try:
            report = analyze(
                frame, config=analysis_config_for(frame, seed=seed, n_resamples=resamples), exclusion=exclusion
            )
        except (AnalysisError, ValueError) as error:
            raise CommandError(str(error)) from error
        try:
            outputs = write_analysis(report, frame, options["out"], title=f"{study.title}: analysis", study=study.slug)
        except OSError as error:
            raise CommandError(f"--out: {error}") from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Analysed {len(frame)} comparisons; wrote {outputs.json}, {outputs.html} and "
                f"{len(outputs.tables)} tables."
            )
        )
        self.stdout.write(exclusion.sentence())
        for line in report_messages(report):
            self.stdout.write(line)
