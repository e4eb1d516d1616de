"""A study's pair tallies: how each pair of its systems fared so far, which the adaptive design reads to choose a
question's next pair (annotation.adaptive) and adds each answer to. One read and one write per answer, whatever
the study's size: the judgments themselves are never aggregated on an annotator's request."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
from django.db import connection

from annotation.models import Judgment, PairTally

# An outcome as the tally counts it: (winning system id, losing system id), or for a tie both ids with no winner.
Outcome = tuple[int, int, bool]


def tally_outcome(*, choice: str, left_system: int, right_system: int) -> Outcome | None:
    """What an answer adds to the tally: a decided choice the winner's win, a tie half of one to each side
    (`tally_wins`); None for "neither", which says both summaries miss the need, not which is better."""
    if choice == Judgment.Choice.LEFT:
        return left_system, right_system, False
    if choice == Judgment.Choice.RIGHT:
        return right_system, left_system, False
    if choice == Judgment.Choice.TIE:
        return left_system, right_system, True
    return None


def tally_wins(*, study_id: int, systems: Sequence[int]) -> npt.NDArray[np.float64]:
    """The study's win matrix over `systems` (ids, in row order) from its tallies: ``wins[i, j]`` how often system
    i beat j, a tie counting half to each; systems outside `systems` are left out. One indexed read of at most
    ``n (n - 1) / 2`` rows."""
    index = {system: i for i, system in enumerate(systems)}
    wins = np.zeros((len(systems), len(systems)))
    rows = PairTally.objects.filter(study_id=study_id).values_list(
        "first_id", "second_id", "first_wins", "second_wins", "ties"
    )
    for first, second, first_wins, second_wins, ties in rows:
        i, j = index.get(first), index.get(second)
        if i is not None and j is not None:
            wins[i, j] += first_wins + ties / 2
            wins[j, i] += second_wins + ties / 2
    return wins


def wins_add(wins: npt.NDArray[np.float64], *, systems: Sequence[int], outcomes: Iterable[Outcome]) -> None:
    """Add outcomes not stored yet to a win matrix from `tally_wins` (in place), as the tallies will count them."""
    index = {system: i for i, system in enumerate(systems)}
    for winner, loser, tie in outcomes:
        i, j = index[winner], index[loser]
        if tie:
            wins[i, j] += 0.5
            wins[j, i] += 0.5
        else:
            wins[i, j] += 1


def tally_add(*, study_id: int, outcomes: Iterable[Outcome]) -> None:
    """Add outcomes to the study's tallies in one statement: an increment that inserts the pair's row the first
    time (INSERT ... ON CONFLICT DO UPDATE, which the ORM cannot say), so annotators answering at the same moment
    each add theirs and none is lost. Rows in key order, so two answers adding the same pairs lock them in the
    same order and never wait on each other in a cycle."""
    counts: Counter[tuple[int, int, str]] = Counter()
    for winner, loser, tie in outcomes:
        first, second = min(winner, loser), max(winner, loser)
        column = "ties" if tie else "first_wins" if winner == first else "second_wins"
        counts[(first, second, column)] += 1
    if not counts:
        return
    pairs = sorted({(first, second) for first, second, _ in counts})
    quote = connection.ops.quote_name
    table = quote(PairTally._meta.db_table)
    names = ("study_id", "first_id", "second_id", "first_wins", "second_wins", "ties")
    params: list[int] = []
    for first, second in pairs:
        params += [study_id, first, second, *(counts[(first, second, c)] for c in names[3:])]
    placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(pairs))
    increments = ", ".join(f"{quote(c)} = {table}.{quote(c)} + EXCLUDED.{quote(c)}" for c in names[3:])
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(map(quote, names))}) VALUES {placeholders} "  # noqa: S608 - names, not input
            f"ON CONFLICT ({', '.join(map(quote, names[:3]))}) DO UPDATE SET {increments}",
            params,
        )
