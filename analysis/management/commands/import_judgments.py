"""Convert outside judgments (pairwise, best-worst, ranking) to the comparison table: ``analysis.import_cli``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError

from analysis import import_cli
from analysis.exports import FORMATS
from analysis.importers import KINDS


class Command(BaseCommand):
    help = "Convert a .csv/.jsonl file of pairwise, best-worst or ranking judgments to the comparison table in --out."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--kind", required=True, choices=KINDS)
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--columns", default=None, help="field=column pairs, e.g. best=Best,worst=Worst")
        parser.add_argument("--drop-contradictions", action="store_true")
        parser.add_argument("--study", default=None)
        parser.add_argument("--formats", default=",".join(FORMATS))

    def handle(self, *args: Any, **options: Any) -> None:
        argv = [str(options["file"]), "--kind", options["kind"], "--out", str(options["out"])]
        argv += ["--formats", options["formats"]]
        for name in ("columns", "study"):
            if options[name] is not None:
                argv += [f"--{name}", options[name]]
        if options["drop_contradictions"]:
            argv.append("--drop-contradictions")
        code = import_cli.main(argv, stdout=cast(TextIO, self.stdout), stderr=cast(TextIO, self.stderr))
        if code:
            raise CommandError("import failed (see the message above)", returncode=code)
