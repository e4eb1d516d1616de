"""Which LCS path is fastest at which size: the grid behind scoring.core.lcs's choice.

    .venv/bin/python bench/lcs.py [--pairs 4] [--rounds 3] [--json bench/out/lcs.json]

Summaries of 16 to 600 tokens against sources of 64 to 20,000 tokens (a summary never longer than its
source). Real pairs: SQuALITY human answers (the summary) against stories (the source; stories joined to
reach 20,000 tokens), tokenised by kernel.text.tokenize outside the clock; random pairs: both sides drawn
from a Zipf-like vocabulary of 5,000 words. Per cell and path, mean microseconds per pair of --pairs pairs,
median of --rounds interleaved rounds (each round runs every path, so a burst of load hits them alike):

- codes: scoring.core.lcs.lcs_length_rapidfuzz, the former one-off path (tokens given byte or character
  codes in Python, then rapidfuzz's LCSseq on the codes);
- lists: rapidfuzz's LCSseq on the token lists themselves (it keys each token by its hash), with the
  check lcs_length makes first that every token is a str;
- ints: the exact alternative for lists, every token mapped to an int by a dict first (the mapping is the
  whole difference from "lists", so its cost is this row less that one);
- prepared: LcsSource with its source coded beforehand (the coding is in its own column, "prep");
- lcs_length: the one-off call as it now chooses.

Every path's lengths are checked against the pure-Python lcs_length_bits on every pair (exit 1 otherwise).
The last column names the fastest one-off path (codes, lists, ints) of the cell.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DATA_DIR = Path(os.environ.get("SHARED_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
SUMMARY_SIZES = (16, 64, 150, 300, 600)
SOURCE_SIZES = (64, 300, 664, 2000, 3000, 5000, 10000, 20000)
ONE_OFF = ("codes", "lists", "ints")

Pair = tuple[list[str], list[str]]


def real_texts() -> tuple[list[list[str]], list[str]]:
    """SQuALITY's human answers (one token list per story) and all its stories' tokens end to end."""
    from kernel.text import tokenize

    summaries: list[list[str]] = []
    stories: list[str] = []
    with (DATA_DIR / "squality" / "v1-3_txt_test.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            story = json.loads(line)
            summaries.append(tokenize(" ".join(r["response_text"] for q in story["questions"] for r in q["responses"])))
            stories.extend(tokenize(story["document"]))
    return summaries, stories


def real_pairs(summaries: list[list[str]], stories: list[str], m: int, n: int, count: int) -> list[Pair]:
    """``count`` pairs: the i-th long-enough answer cut to ``m`` tokens against ``n`` story tokens from the
    i-th story on (so the pair's source is mostly its own story)."""
    long_enough = [s for s in summaries if len(s) >= m]
    step = max(1, (len(stories) - n) // max(1, count))
    return [(list(long_enough[i % len(long_enough)][:m]), list(stories[i * step : i * step + n])) for i in range(count)]


def random_pairs(m: int, n: int, count: int, rng: random.Random) -> list[Pair]:
    vocabulary = [f"w{i}" for i in range(5000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    return [(rng.choices(vocabulary, weights, k=m), rng.choices(vocabulary, weights, k=n)) for _ in range(count)]


def _ints(a: Sequence[str], b: Sequence[str]) -> int:
    from rapidfuzz.distance.LCSseq import similarity

    numbers: dict[str, int] = {}
    code = numbers.setdefault
    return int(similarity([code(t, len(numbers)) for t in a], [code(t, len(numbers)) for t in b]))


def _lists(a: Sequence[str], b: Sequence[str]) -> int:
    from scoring.core import lcs

    found = lcs.lcs_length_lists(a, b)
    if found is None:
        raise SystemExit("the list path refused str tokens")
    return found


def measure(pairs: list[Pair], rounds: int) -> dict[str, float]:
    """Microseconds per pair for every path (median of interleaved rounds), lengths checked."""
    from scoring.core.lcs import LcsSource, lcs_length, lcs_length_bits, lcs_length_rapidfuzz

    expected = [lcs_length_bits(a, b) for a, b in pairs]
    sources = {id(b): LcsSource(b) for _, b in pairs}
    started = time.process_time()
    for source in sources.values():
        source.prepare()
    prep = (time.process_time() - started) / len(pairs)
    paths: dict[str, Callable[[Sequence[str], Sequence[str]], int]] = {
        "codes": lcs_length_rapidfuzz,
        "lists": _lists,
        "ints": _ints,
        "prepared": lambda a, b: sources[id(b)].lcs_length(a),
        "lcs_length": lcs_length,
    }
    work = sum(len(a) + len(b) for a, b in pairs)
    repeats = max(1, 100_000 // work)
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            started = time.process_time()
            for _ in range(repeats):
                got = [fn(a, b) for a, b in pairs]
            times[name].append((time.process_time() - started) / (repeats * len(pairs)))
            if got != expected:
                raise SystemExit(f"{name}: lengths {got} differ from lcs_length_bits's {expected}")
    # The minimum over rounds is the figure: other processes on a shared machine only ever add to a time.
    row = {name: min(values) * 1e6 for name, values in times.items()}
    row |= {f"{name} median": statistics.median(values) * 1e6 for name, values in times.items()}
    row["prep"] = prep * 1e6
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=4, help="pairs per cell and kind")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from scoring.core.lcs import HAVE_RAPIDFUZZ, LIST_PATH_MAX_CELLS, LIST_PATH_MAX_LONGER

    if not HAVE_RAPIDFUZZ:
        raise SystemExit("rapidfuzz is not installed: there is one path only")
    summaries, stories = real_texts()
    rng = random.Random(29)
    results: list[dict[str, Any]] = []
    load = os.getloadavg()[0]
    header = f"{'kind':<6} {'m':>4} {'n':>6} " + " ".join(
        f"{p:>9}" for p in (*ONE_OFF, "prepared", "prep", "lcs_length")
    )
    print(f"microseconds per pair, min of {args.rounds} interleaved rounds, {args.pairs} pairs per cell")
    print(f"{header}  fastest one-off  lists/codes")
    for kind in ("real", "random"):
        for m in SUMMARY_SIZES:
            for n in SOURCE_SIZES:
                if m > n:
                    continue
                pairs = (
                    real_pairs(summaries, stories, m, n, args.pairs)
                    if kind == "real"
                    else random_pairs(m, n, args.pairs, rng)
                )
                row = measure(pairs, args.rounds)
                fastest = min(ONE_OFF, key=row.__getitem__)
                results.append({"kind": kind, "m": m, "n": n, **row, "fastest": fastest})
                cells = " ".join(f"{row[p]:>9.1f}" for p in (*ONE_OFF, "prepared", "prep", "lcs_length"))
                print(
                    f"{kind:<6} {m:>4} {n:>6} {cells}  {fastest:<15}  {row['lists'] / row['codes']:>11.2f}", flush=True
                )
    against_best = [r["lcs_length"] / min(r["codes"], r["lists"]) for r in results]
    against_codes = sorted(r["codes"] / r["lcs_length"] for r in results)
    print(
        f"lcs_length against the faster of codes and lists, per cell: median {statistics.median(against_best):.2f}x,"
        f" worst {max(against_best):.2f}x; speed-up over the former one-off path (codes): median"
        f" {statistics.median(against_codes):.2f}x, from {against_codes[0]:.2f}x to {against_codes[-1]:.2f}x"
    )
    print(
        f"lcs_length takes 'lists' when m x n <= {LIST_PATH_MAX_CELLS:,}, n <= {LIST_PATH_MAX_LONGER:,} and every"
        f" token is a str, otherwise 'codes'; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
