"""Run metric stress tests on a JSONL file of rows (the same flags as `python -m scoring.stress.cli`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from generation.settings import configure_model_servers
from scoring.stress.cli import main


class Command(BaseCommand):
    help = "Perturb summaries and check that metrics move as they should: --input rows.jsonl --tests NAMES --metrics NAMES --out DIR."

    def run_from_argv(self, argv: list[str]) -> None:
        # The plain-Python CLI knows no Django settings: apply the deployment's model-server limit
        # (MODEL_SERVER_LIMIT_URL) and LLM cache (LLM_CACHE) to the judges and rewrites it runs.
        configure_model_servers()

        code = main(argv[2:])
        if code:
            raise SystemExit(code)

    def handle(self, *args: Any, **options: Any) -> None:  # pragma: no cover - run_from_argv does the work
        pass
