"""Throughput of every offline metric on real pairs, and the bit-parallel LCS against rouge-score's table.

    .venv/bin/python bench/metrics.py [--pairs 1000] [--neural-seconds 25] [--json bench/out/metrics.json]

Pairs: RoSE CNN/DailyMail articles with each system summary and the reference, plus
SciTLDR abstracts with an author TLDR as summary and another TLDR as reference.
Implementations that compute several outputs at once (rouge, DataStats, abstractiveness,
BERTScore) are timed once and reported for all their outputs. Neural metrics run on as
many of the pairs as fit in --neural-seconds (the count is printed) so the whole bench
stays within about three minutes on a 2-core machine.

LCS: summaries of 300 tokens against sources of 5,000 tokens (SQuALITY stories and
their human answers), the same pairs through rouge_score.rouge_scorer._lcs_table and
scoring.core.lcs.lcs_length; lengths must agree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DATA_DIR = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


def real_pairs(n: int) -> list[dict[str, Any]]:
    """About 60% RoSE (article, reference, system summary) and 40% SciTLDR (abstract, TLDR, TLDR)."""
    rose = json.loads((DATA_DIR / "rose" / "protocol-comparison.json").read_text(encoding="utf-8"))
    pairs: list[dict[str, Any]] = []
    for example in rose:
        for system, summary in example["system_outputs"].items():
            pairs.append(
                {
                    "id": f"rose:{example['example_id']}:{system}",
                    "source": example["source"],
                    "reference": example["reference"],
                    "summary": summary,
                }
            )
    pairs = pairs[: int(n * 0.6)]
    with (DATA_DIR / "scitldr" / "SciTLDR-A_test.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if len(pairs) >= n:
                break
            paper = json.loads(line)
            if len(paper["target"]) < 2:
                continue
            pairs.append(
                {
                    "id": f"scitldr:{paper['paper_id']}",
                    "source": " ".join(paper["source"]),
                    "summary": paper["target"][0],
                    "reference": paper["target"][1],
                }
            )
    return pairs


def bench_metrics(pairs: list[dict[str, Any]], neural_seconds: float) -> list[dict[str, Any]]:
    from scoring.core.api import offline_metrics, score_rows
    from scoring.core.registry import groups

    offline = set(offline_metrics())
    results = []
    for group in groups():
        names = [spec.name for spec in group.specs if spec.name in offline]
        if not names:
            continue
        started = time.perf_counter()
        done = 0
        errors = 0
        if group.uses_embeddings:
            # Model loading is a one-off cost: warm up on one pair outside the clock.
            score_rows(pairs[:1], names)
            started = time.perf_counter()
            while done < len(pairs) and time.perf_counter() - started < neural_seconds:
                chunk = pairs[done : done + 32]
                errors += sum(len(r["errors"]) for r in score_rows(chunk, names))
                done += len(chunk)
        else:
            errors = sum(len(r["errors"]) for r in score_rows(pairs, names))
            done = len(pairs)
        elapsed = time.perf_counter() - started
        results.append(
            {
                "implementation": group.key,
                "metrics": names,
                "pairs": done,
                "seconds": elapsed,
                "pairs_per_s": done / elapsed if elapsed else float("inf"),
                "errors": errors,
            }
        )
        print(f"  {group.key:<18} {done:>5} pairs  {done / elapsed:>9.1f} pairs/s", file=sys.stderr, flush=True)
    return results


def lcs_pairs(count: int, summary_len: int = 300, source_len: int = 5000) -> list[tuple[list[str], list[str]]]:
    """Real long sources (SQuALITY stories) and real summaries (human answers about them), cut to length."""
    from kernel.text import tokenize

    pairs = []
    with (DATA_DIR / "squality" / "v1-3_txt_test.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            story = json.loads(line)
            source = tokenize(story["document"])
            answers = [r["response_text"] for q in story["questions"] for r in q["responses"]]
            summary = tokenize(" ".join(answers))
            if len(source) < source_len or len(summary) < summary_len:
                continue
            pairs.append((summary[:summary_len], source[:source_len]))
            if len(pairs) == count:
                break
    return pairs


def bench_lcs(rouge_pairs: int, fast_repeats: int) -> dict[str, Any]:
    from rouge_score.rouge_scorer import _lcs_table

    from scoring.core.lcs import lcs_length

    pairs = lcs_pairs(rouge_pairs)
    started = time.perf_counter()
    slow = [_lcs_table(source, summary)[-1][-1] for summary, source in pairs]
    rouge_s = (time.perf_counter() - started) / len(pairs)
    started = time.perf_counter()
    for _ in range(fast_repeats):
        fast = [lcs_length(summary, source) for summary, source in pairs]
    fast_s = (time.perf_counter() - started) / (len(pairs) * fast_repeats)
    if fast != slow:
        raise SystemExit(f"LCS lengths differ: bit-parallel {fast} vs rouge-score {slow}")
    return {
        "pairs": len(pairs),
        "summary_tokens": len(pairs[0][0]),
        "source_tokens": len(pairs[0][1]),
        "lcs_lengths": fast,
        "rouge_score_ms": rouge_s * 1000,
        "bit_parallel_ms": fast_s * 1000,
        "speedup": rouge_s / fast_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--neural-seconds", type=float, default=20.0, help="time box per neural metric")
    parser.add_argument("--lcs-pairs", type=int, default=4, help="pairs run through rouge-score's quadratic table")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    random.seed(0)
    total = time.perf_counter()

    pairs = real_pairs(args.pairs)
    print(f"metric throughput on {len(pairs)} real pairs (RoSE CNN/DM + SciTLDR):", file=sys.stderr)
    metrics = bench_metrics(pairs, args.neural_seconds)
    print("LCS, 300-token summaries vs 5,000-token sources:", file=sys.stderr)
    lcs = bench_lcs(args.lcs_pairs, fast_repeats=20)

    print()
    print(f"{'implementation':<18} {'pairs':>6} {'pairs/s':>10}  metrics")
    print(f"{'-' * 18} {'-' * 6} {'-' * 10}  {'-' * 40}")
    for row in metrics:
        note = f"  ({row['errors']} values not computable)" if row["errors"] else ""
        print(
            f"{row['implementation']:<18} {row['pairs']:>6} {row['pairs_per_s']:>10.1f}  {','.join(row['metrics'])}{note}"
        )
    print()
    print(
        f"LCS on {lcs['pairs']} real pairs of {lcs['summary_tokens']} x {lcs['source_tokens']} tokens "
        f"(lengths {lcs['lcs_lengths']}, equal in both):"
    )
    print(f"  rouge-score _lcs_table   {lcs['rouge_score_ms']:>10.1f} ms/pair")
    print(f"  bit-parallel lcs_length  {lcs['bit_parallel_ms']:>10.3f} ms/pair")
    print(f"  speed-up                 {lcs['speedup']:>10.0f}x")
    elapsed = time.perf_counter() - total
    print(f"\nbench finished in {elapsed:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"metrics": metrics, "lcs": lcs, "seconds": elapsed}, indent=2), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
