"""Score a JSONL file of summaries with any metrics of the suite (no database needed)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from generation.settings import configure_model_servers
from scoring.cli import main


class Command(BaseCommand):
    help = "Score rows.jsonl (id, summary, source, reference, query, persona) with the named metrics."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "args",
            nargs="*",
            help="Arguments of `python -m scoring.cli`, e.g. --input a.jsonl --output b.jsonl --metrics rouge1,chrf",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        # Hand everything after the command name to the plain-Python CLI, so both accept the same flags.
        # The plain-Python CLI knows no Django settings: apply the deployment's model-server limit
        # (MODEL_SERVER_LIMIT_URL) and LLM cache (LLM_CACHE) to the judges and rewrites it runs.
        configure_model_servers()

        code = main(argv[2:])
        if code:
            raise SystemExit(code)

    def handle(self, *args: Any, **options: Any) -> None:  # pragma: no cover - run_from_argv does the work
        raise CommandError("use: manage.py score_texts --input FILE --output FILE --metrics NAMES")
