"""Seed 003's layout on a long-document file (the same flags as `python -m scoring.seed_layout`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from generation.settings import configure_model_servers
from scoring.seed_layout import main


class Command(BaseCommand):
    help = (
        "Factuality metrics x retrieval window (w = 0, 1, 2) and mean absolute score change per perturbation: "
        "--dataset squality | --input rows.jsonl, --out DIR."
    )

    def run_from_argv(self, argv: list[str]) -> None:
        # The rewrites go through the deployment's model-server limit and LLM cache, as `stress_test`'s do.
        configure_model_servers()
        defaults = {
            "weights_dir": settings.METRICS_WEIGHTS_DIR or None,
            "device": settings.METRICS_DEVICE,
            "batch_size": settings.METRICS_BATCH_SIZE,
        }
        code = main(argv[2:], defaults=defaults, prog="manage.py seed_layout")
        if code:
            raise SystemExit(code)

    def handle(self, *args: Any, **options: Any) -> None:  # pragma: no cover - run_from_argv does the work
        pass
