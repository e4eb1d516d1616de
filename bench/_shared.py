"""What the benchmark scripts share: realistic questions, a fresh database, percentiles."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

QUESTIONS = [
    "How does rotating night shift work affect sleep and medication errors in nurses?",
    "How durable is protection from mRNA vaccines against severe disease?",
    "What are reliable ways to evaluate large language models beyond benchmarks?",
    "Do automatic summarisation metrics agree with human judgments of quality?",
    "Which climate adaptation practices help smallholder farmers during drought?",
    "What interventions improve early childhood literacy in low-income schools?",
    "How is antimicrobial resistance spreading through hospital wastewater?",
    "Which urban design measures reduce heat exposure in cities?",
    "Does remote patient monitoring reduce readmissions for heart failure?",
    "How do robots learn manipulation skills from human demonstrations?",
]


def recreate_database(admin_url: str, name: str) -> None:
    """Drop and create a benchmark database (the name must say it is one)."""
    import psycopg

    if not name.startswith("bench"):
        raise SystemExit(f"refusing to recreate {name!r}: benchmark databases start with 'bench'")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def manage(env: dict[str, str], *argv: str) -> None:
    """Run a management command of this repository with the benchmark's environment."""
    result = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"manage.py {' '.join(argv)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
