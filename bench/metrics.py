"""Throughput of every offline metric on real pairs, and our LCS against rouge-score's table.

    .venv/bin/python bench/metrics.py [--pairs 1000] [--neural-seconds 25] [--json bench/out/metrics.json]

Pairs: RoSE CNN/DailyMail articles with each system summary and the reference, plus
SciTLDR abstracts with an author TLDR as summary and another TLDR as reference.
Implementations that compute several outputs at once (rouge, DataStats, abstractiveness,
BERTScore) are timed once and reported for all their outputs. Neural metrics run on as
many of the pairs as fit in --neural-seconds (the count is printed) so the whole bench
stays within about three minutes on a 2-core machine.

LCS: summaries of 300 tokens against sources of 5,000 tokens (SQuALITY stories and
their human answers; --lcs-pairs, default 12), the same token lists (tokenisation timed on no side)
through rouge_score.rouge_scorer._lcs_table, scoring.core.lcs.lcs_length (rapidfuzz's LCSseq on byte
codes at this size, bench/lcs.py for the others; the whole work per pair), LcsSource with its source coded once (what score_rows does for a source
several summaries share; the coding is timed and printed beside it), the pure-Python fallback
lcs_length_bits, and the alternatives evaluated for lcs_length (the former code-point mapping, rapidfuzz
on the token lists, np.unique codes), in --lcs-rounds interleaved rounds (default 3); min and median over
rounds. Every row's lengths must equal rouge-score's on the real pairs and on two random pairs (exit 1
otherwise). Exit status 2 when lcs_length is under 1,000x rouge-score (median).
Then score_rows' LCS work on the real pairs (--pairs): lcs_length per text against one LcsSource per
source text, medians of interleaved rounds, totals checked equal.
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
LCS_TARGET = 1_000
ROUGE = "rouge-score _lcs_table"
PREPARED = "LcsSource prepared once per source"
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


def random_lcs_pairs(summary_len: int = 300, source_len: int = 5000) -> list[tuple[list[str], list[str]]]:
    """Random pairs checked for lengths (not timed): a summary drawn evenly from 3,000 words (more than 255
    distinct tokens: lcs_length's character codes, not bytes) against a Zipf-like source, and both sides
    drawn evenly from 200 words (many matches)."""
    rng = random.Random(16)
    vocabulary = [f"w{i}" for i in range(3000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    large = ([rng.choice(vocabulary) for _ in range(summary_len)], rng.choices(vocabulary, weights, k=source_len))
    small = [rng.choice(vocabulary[:200]) for _ in range(summary_len)]
    if len(set(large[0])) <= 255:
        raise SystemExit("the random summary should have more than 255 distinct tokens")
    return [large, (small, [rng.choice(vocabulary[:200]) for _ in range(source_len)])]


def _former_code_points(summary: list[str], source: list[str]) -> int:
    """The previous lcs_length: code points for the tokens both sides share, two joins (kept to compare)."""
    from rapidfuzz.distance.LCSseq import similarity

    shared = set(summary)
    shared.intersection_update(source)
    code = {token: chr(i) for i, token in enumerate(shared, start=2)}
    left = "".join([code.get(token, "\x00") for token in summary])
    right = "".join([code.get(token, "\x01") for token in source])
    return int(similarity(left, right))


def _rapidfuzz_token_lists(summary: list[str], source: list[str]) -> int:
    """rapidfuzz on the token lists themselves: it keys each token by its Python hash (exact only without
    hash collisions, which nothing checks) and takes its hash-map path."""
    from rapidfuzz.distance.LCSseq import similarity

    return int(similarity(summary, source))


def _numpy_unique(summary: list[str], source: list[str]) -> int:
    """Codes from numpy's np.unique(return_inverse=True) over both sides (an object-array sort)."""
    from array import array

    import numpy as np
    from rapidfuzz.distance.LCSseq import similarity

    inverse = np.unique(np.array(summary + source, dtype=object), return_inverse=True)[1]
    return int(similarity(array("q", inverse[: len(summary)].tolist()), array("q", inverse[len(summary) :].tolist())))


def bench_lcs(n_pairs: int, rounds: int, fast_repeats: int) -> dict[str, Any]:
    """rouge-score's table against our LCS paths and the alternatives evaluated for them, on the same
    pairs in interleaved rounds (each round runs every implementation, so a burst of load hits them
    alike); per implementation the min and the median over rounds of the mean time per pair.

    Every implementation is given the same token lists (tokenisation is timed on neither side), and
    every row but one does the whole work per pair. The exception, labelled, is LcsSource prepared once
    per source, as score_rows does for each source text that several summaries share; its preparation
    is printed beside it."""
    import statistics

    from rouge_score.rouge_scorer import _lcs_table

    from scoring.core.lcs import HAVE_RAPIDFUZZ, LcsSource, lcs_length, lcs_length_bits

    pairs = lcs_pairs(n_pairs)
    if len(pairs) < n_pairs:
        print(f"  only {len(pairs)} SQuALITY pairs are long enough", file=sys.stderr)
    checked = random_lcs_pairs()
    prepared: dict[int, LcsSource] = {}

    def prepare_sources(repeats: int) -> float:
        """Seconds per source to code it (a fresh LcsSource, prepare(), then dropped, as an lru_cache
        eviction would), timed outside the prepared row's clock; then the row's sources are coded."""
        started = time.perf_counter()
        for _ in range(repeats):
            for _, source in pairs:
                LcsSource(source).prepare()
        seconds = (time.perf_counter() - started) / (len(pairs) * repeats)
        for _, source in [*pairs, *checked]:
            coded = prepared[id(source)] = LcsSource(source)
            if not coded.prepare():
                raise SystemExit("LcsSource.prepare() failed")
        return seconds

    ours = "lcs_length (codes at this size)" if HAVE_RAPIDFUZZ else "lcs_length (no rapidfuzz)"
    impls: dict[str, tuple[Any, int]] = {
        ROUGE: (lambda a, b: _lcs_table(b, a)[-1][-1], 1),
        ours: (lcs_length, fast_repeats),
        "lcs_length_bits (pure Python)": (lcs_length_bits, max(1, fast_repeats // 10)),
    }
    if HAVE_RAPIDFUZZ:
        impls |= {
            PREPARED: (lambda a, b: prepared[id(b)].lcs_length(a), fast_repeats * 4),
            "former lcs_length (shared code points)": (_former_code_points, fast_repeats),
            "rapidfuzz on token lists (hashes)": (_rapidfuzz_token_lists, fast_repeats),
            "np.unique codes + rapidfuzz": (_numpy_unique, max(1, fast_repeats // 10)),
        }
    per_round: dict[str, list[float]] = {name: [] for name in impls}
    preparation: list[float] = []
    load_first = os.getloadavg()[0]
    lengths: dict[str, list[int]] = {}
    for r in range(rounds):
        for name, (fn, repeats) in impls.items():
            if name == PREPARED:
                preparation.append(prepare_sources(max(1, fast_repeats // 5)))
            started = time.perf_counter()
            for _ in range(repeats):
                got = [fn(summary, source) for summary, source in pairs]
            per_round[name].append((time.perf_counter() - started) / (len(pairs) * repeats))
            lengths[name] = got
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    reference = lengths[ROUGE]
    checked_lengths = [_lcs_table(source, summary)[-1][-1] for summary, source in checked]
    for name, got in lengths.items():
        if got != reference:
            raise SystemExit(f"LCS lengths differ on the real pairs: {name} {got} vs rouge-score {reference}")
        fn = impls[name][0]
        on_random = checked_lengths if name == ROUGE else [fn(summary, source) for summary, source in checked]
        if on_random != checked_lengths:
            raise SystemExit(f"LCS lengths differ on the random pairs: {name} {on_random} vs {checked_lengths}")
    stats = {
        name: {"min_ms": min(times) * 1000, "median_ms": statistics.median(times) * 1000}
        for name, times in per_round.items()
    }
    rouge = stats[ROUGE]
    for name, row in stats.items():
        row["speedup_median"] = rouge["median_ms"] / row["median_ms"]
        row["speedup_min"] = rouge["min_ms"] / row["min_ms"]
        # Each round's own ratio (the same burst of load on both), then their median.
        row["speedup_per_round_median"] = statistics.median(
            r / t for r, t in zip(per_round[ROUGE], per_round[name], strict=True)
        )
    return {
        "pairs": len(pairs),
        "rounds": rounds,
        "summary_tokens": len(pairs[0][0]),
        "source_tokens": len(pairs[0][1]),
        "lcs_lengths": reference,
        "random_pairs_lengths": checked_lengths,
        "target_row": ours,
        "load_first": load_first,
        "load_last": os.getloadavg()[0],
        "preparation_ms": {
            "min": min(preparation, default=0) * 1000,
            "median": statistics.median(preparation or [0]) * 1000,
        },
        "implementations": stats,
    }


def bench_lcs_per_source(pairs: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """The LCS work of score_rows' abstractiveness on the real pairs (each row's reference and summary
    against its source; RoSE's twelve systems share an article, a SciTLDR source is seen once): lcs_length
    per text against one LcsSource per source text behind an lru_cache of 64, as score_rows keeps them.
    Tokens are made outside the clock; interleaved rounds, medians; totals must agree."""
    import functools
    import statistics

    from kernel.text import tokenize
    from scoring.core.lcs import LcsSource, lcs_length

    rows = [(p["id"], p["source"], tokenize(p["reference"]), tokenize(p["summary"])) for p in pairs]
    source_tokens = {source: tokenize(source) for _, source, _, _ in rows}
    subsets = {
        "all": rows,
        "RoSE (12 rows per article)": [r for r in rows if r[0].startswith("rose:")],
        "SciTLDR (a source per row)": [r for r in rows if r[0].startswith("scitldr:")],
    }

    def per_text(subset: list[tuple[str, str, list[str], list[str]]]) -> int:
        return sum(
            lcs_length(reference, source_tokens[source]) + lcs_length(summary, source_tokens[source])
            for _, source, reference, summary in subset
        )

    def per_source(subset: list[tuple[str, str, list[str], list[str]]]) -> int:
        coded = functools.lru_cache(maxsize=64)(lambda source: LcsSource(source_tokens[source]))
        return sum(
            coded(source).lcs_length(reference) + coded(source).lcs_length(summary)
            for _, source, reference, summary in subset
        )

    results = {}
    for label, subset in subsets.items():
        if not subset:
            continue
        times: dict[str, list[float]] = {"lcs_length per text": [], "LcsSource per source text": []}
        totals = set()
        for _ in range(rounds):
            for name, fn in (("lcs_length per text", per_text), ("LcsSource per source text", per_source)):
                started = time.perf_counter()
                totals.add(fn(subset))
                times[name].append(time.perf_counter() - started)
        if len(totals) != 1:
            raise SystemExit(f"LCS totals differ between lcs_length and LcsSource on {label}: {totals}")
        results[label] = {
            "rows": len(subset),
            **{name: statistics.median(values) * 1000 for name, values in times.items()},
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--neural-seconds", type=float, default=20.0, help="time box per neural metric")
    parser.add_argument("--lcs-pairs", type=int, default=12, help="pairs run through rouge-score's quadratic table")
    parser.add_argument("--lcs-rounds", type=int, default=3, help="interleaved rounds of the LCS implementations")
    parser.add_argument("--lcs-only", action="store_true", help="only the LCS comparison")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    random.seed(0)
    total = time.perf_counter()

    metrics: list[dict[str, Any]] = []
    if not args.lcs_only:
        pairs = real_pairs(args.pairs)
        print(f"metric throughput on {len(pairs)} real pairs (RoSE CNN/DM + SciTLDR):", file=sys.stderr)
        metrics = bench_metrics(pairs, args.neural_seconds)
    print("LCS, 300-token summaries vs 5,000-token sources:", file=sys.stderr)
    lcs = bench_lcs(args.lcs_pairs, args.lcs_rounds, fast_repeats=50)
    print("LCS as score_rows does it, on the real pairs:", file=sys.stderr)
    per_source = bench_lcs_per_source(real_pairs(args.pairs), rounds=max(args.lcs_rounds, 5))

    print()
    if metrics:
        print(f"{'implementation':<18} {'pairs':>6} {'pairs/s':>10}  metrics")
        print(f"{'-' * 18} {'-' * 6} {'-' * 10}  {'-' * 40}")
    for row in metrics:
        note = f"  ({row['errors']} values not computable)" if row["errors"] else ""
        print(
            f"{row['implementation']:<18} {row['pairs']:>6} {row['pairs_per_s']:>10.1f}  {','.join(row['metrics'])}{note}"
        )
    print()
    print(
        f"LCS on {lcs['pairs']} real pairs of {lcs['summary_tokens']} x {lcs['source_tokens']} tokens, "
        f"{lcs['rounds']} interleaved rounds; lengths {lcs['lcs_lengths']} on the real pairs and "
        f"{lcs['random_pairs_lengths']} on two random ones, equal in every row; token lists given to every "
        f"row (tokenisation timed in none); load average (1 min) {lcs['load_first']:.1f} at the first round, "
        f"{lcs['load_last']:.1f} after the last:"
    )
    width = max(len(name) for name in lcs["implementations"]) + 2
    print(
        f"  {'implementation':<{width}} {'min ms/pair':>12} {'median ms/pair':>15} {'speed-up (median)':>18} "
        f"{'(min)':>8} {'(per-round median)':>19}"
    )
    for name, row in lcs["implementations"].items():
        print(
            f"  {name:<{width}} {row['min_ms']:>12.3f} {row['median_ms']:>15.3f} "
            f"{row['speedup_median']:>17.0f}x {row['speedup_min']:>7.0f}x {row['speedup_per_round_median']:>18.0f}x"
        )
    print(
        f"  ({PREPARED}: its preparation, {lcs['preparation_ms']['median']:.3f} ms per source (median; "
        f"{lcs['preparation_ms']['min']:.3f} min), is not in its row; every other row does the whole work per pair)"
    )
    if PREPARED in lcs["implementations"]:
        # score_rows measures a reference and a summary against each row's source, and keeps one LcsSource
        # per source text: the first PREPARE_AFTER texts take lcs_length, then the source is coded.
        from scoring.core.lcs import PREPARE_AFTER

        plain = lcs["implementations"][lcs["target_row"]]["median_ms"]
        coded = lcs["implementations"][PREPARED]["median_ms"]
        rouge = lcs["implementations"][ROUGE]["median_ms"]
        for rows in (1, 12):
            texts = 2 * rows
            early = min(texts, PREPARE_AFTER)
            late = texts - early
            per_text = (early * plain + (lcs["preparation_ms"]["median"] + late * coded if late else 0)) / texts
            print(
                f"  computed from the medians: score_rows' LCS per text, {rows} row{'s' if rows > 1 else ''} "
                f"(reference + summary) per source: {per_text:.3f} ms, {rouge / per_text:.0f}x"
            )
    print(f"  target: {lcs['target_row']} at least {LCS_TARGET:,}x rouge-score (median of rounds)")
    print(
        f"\nscore_rows' LCS work (reference and summary against each row's source, tokens made beforehand), "
        f"median ms of interleaved rounds, equal totals; load average {os.getloadavg()[0]:.1f}:"
    )
    for label, row in per_source.items():
        plain, coded = row["lcs_length per text"], row["LcsSource per source text"]
        print(
            f"  {label:<28} {row['rows']:>5} rows: lcs_length per text {plain:8.1f} ms, "
            f"LcsSource per source text {coded:8.1f} ms ({plain / coded:.2f}x)"
        )
    elapsed = time.perf_counter() - total
    print(f"\nbench finished in {elapsed:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"metrics": metrics, "lcs": lcs, "lcs_per_source": per_source, "seconds": elapsed}, indent=2),
            encoding="utf-8",
        )
    ours = lcs["implementations"][lcs["target_row"]]
    return 0 if ours["speedup_median"] >= LCS_TARGET else 2


if __name__ == "__main__":
    raise SystemExit(main())
