"""The tournament of a query: drawing its bracket, showing a match, recording a choice (`judgment_record`)
and advancing the winner to the next round. A tie advances the side the bracket's seeded coin picks
(`tie_advances`); a tie in the final ends the bracket with no single winner (docs/annotators.md).

Under the study's adaptive design the "bracket" is a schedule instead: each answer is added to the study's pair
tallies and the question's next pair is the one that tells most about the ranking so far (annotation.adaptive),
until the study's comparisons per question are asked (`_adaptive_next`)."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import normalize_newlines
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotation import queries
from annotation.adaptive import Entrant, max_budget, next_pair, pair_label, posterior
from annotation.models import Bracket, Candidate, Judgment, Match, Participation, Query
from annotation.positions import position_name, span_label
from annotation.services.participation import participation_require_active
from annotation.services.quality import check_apply_policy, check_due, check_failed, check_match_create
from annotation.services.tally import Outcome, tally_add, tally_outcome, tally_wins, wins_add
from kernel.exceptions import ApplicationError
from kernel.similarity import token_likeness
from kernel.stamps import stamp_first
from kernel.text import tokenize
from studies.models import Study, StudySystem
from studies.services.study import adaptive_budget, study_require_open

COMMENT_MAX_CHARS = 2000


def _round_label(round_number: int, total_rounds: int, letters: str) -> str:
    if round_number == total_rounds:
        return "final"
    return f"round{round_number}_{letters.lower()}"


def _draw(candidates: Sequence[Candidate], rng: random.Random, *, constrained_first_round: bool) -> list[int | None]:
    """The bracket's first-round slots in order, each a candidate id or None for a bye (positions A, B, C, …
    go to the candidates in slot order). A power-of-two size has no bye: a random permutation; with a
    constrained first round, every first-round pair (A-B, C-D, …) is one persona and one generic candidate,
    which meets which and who takes the pair's first letter drawn at random too. Another size fills the
    slots up to the next power of two with byes (`_draw_with_byes`)."""
    slots = 2 ** max((len(candidates) - 1).bit_length(), 1)
    if len(candidates) != slots:
        return _draw_with_byes(candidates, rng, constrained_first_round=constrained_first_round, slots=slots)
    order: list[int | None] = []
    order.extend(_draw_full(candidates, rng, constrained_first_round=constrained_first_round))
    return order


def _by_condition(candidates: Sequence[Candidate]) -> tuple[list[int], list[int], list[int]]:
    """Persona, generic and other candidate ids (the condition snapshot; the system's for legacy rows)."""
    by_condition: dict[str, list[int]] = {StudySystem.Condition.PERSONA: [], StudySystem.Condition.GENERIC: []}
    others: list[int] = []
    for candidate in candidates:
        condition = candidate.condition or candidate.system.condition
        by_condition.get(condition, others).append(candidate.pk)
    return by_condition[StudySystem.Condition.PERSONA], by_condition[StudySystem.Condition.GENERIC], others


def _draw_with_byes(
    candidates: Sequence[Candidate], rng: random.Random, *, constrained_first_round: bool, slots: int
) -> list[int | None]:
    """First-round slots for a size that is not a power of two: `slots - n` candidates drawn at random have a
    bye (each alone in its first-round pair, so no two byes meet), the others play in pairs, and the pairs
    and the byes are shuffled over the first round's places. With a constrained first round the playing
    pairs are one persona and one generic candidate each, and the byes go to as many of each (a design that
    passed study validation has as many persona as generic candidates)."""
    matches = len(candidates) - slots // 2
    if constrained_first_round:
        persona, generic, others = _by_condition(candidates)
        rng.shuffle(persona)
        rng.shuffle(generic)
        pairs = [[p, g] for p, g in zip(persona[:matches], generic[:matches], strict=False)]
        rest = persona[len(pairs) :] + generic[len(pairs) :] + others
        rng.shuffle(rest)
        # Designs changed by hand may lack the persona/generic pairs: the rest fills the first round's
        # matches before anyone gets a bye, so the number of matches is the design's whatever happened.
        while len(pairs) < matches:
            pairs.append([rest.pop(), rest.pop()])
        units = pairs + [[candidate_id] for candidate_id in rest]
    else:
        ids = [c.pk for c in candidates]
        rng.shuffle(ids)
        units = [ids[2 * i : 2 * i + 2] for i in range(matches)] + [
            [candidate_id] for candidate_id in ids[2 * matches :]
        ]
    rng.shuffle(units)
    order: list[int | None] = []
    for unit in units:
        rng.shuffle(unit)
        order.extend(unit if len(unit) == 2 else [unit[0], None])
    return order


def _draw_full(candidates: Sequence[Candidate], rng: random.Random, *, constrained_first_round: bool) -> list[int]:
    """`_draw` for a power-of-two size: candidate ids in bracket order (unchanged, so that a kept seed
    draws the same bracket it always did)."""
    if not constrained_first_round:
        ids = [c.pk for c in candidates]
        rng.shuffle(ids)
        return ids
    by_condition: dict[str, list[int]] = {StudySystem.Condition.PERSONA: [], StudySystem.Condition.GENERIC: []}
    others: list[int] = []
    for candidate in candidates:
        # The snapshot; the system only for rows without one (legacy imports).
        condition = candidate.condition or candidate.system.condition
        by_condition.get(condition, others).append(candidate.pk)
    persona, generic = by_condition[StudySystem.Condition.PERSONA], by_condition[StudySystem.Condition.GENERIC]
    rng.shuffle(persona)
    rng.shuffle(generic)
    pairs = [[p, g] for p, g in zip(persona, generic, strict=False)]
    # A design that passed study validation has as many of each; anything left over (a design changed by
    # hand in the database) is paired among itself rather than refusing the annotator's question.
    rest = persona[len(pairs) :] + generic[len(pairs) :] + others
    rng.shuffle(rest)
    pairs += [rest[i : i + 2] for i in range(0, len(rest), 2)]
    rng.shuffle(pairs)
    order: list[int] = []
    for pair in pairs:
        rng.shuffle(pair)
        order.extend(pair)
    return order


def bracket_create(*, query: Query, seed: int | None = None, study: Study | None = None) -> Bracket:
    """Randomly assign candidates to positions A, B, C, … (respecting the study's constrained first round)
    and create the first round's matches. `study` is the query's, when the caller has read it already."""
    existing = Bracket.objects.filter(query=query).first()
    if existing is not None:
        return existing
    seed = secrets.randbits(62) if seed is None else seed
    rng = random.Random(seed)
    candidates = list(query.candidates.select_related("system").order_by("system__order", "pk"))
    if study is None:
        study = (
            Study.objects.filter(participations=query.participation_id)
            .only("pk", "constrained_first_round", "check_share", "identical_policy", "design", "adaptive_matches")
            .get()
        )
    if study.design == Study.Design.ADAPTIVE:
        return _adaptive_create(query=query, candidates=candidates, seed=seed, study=study)
    study_id, constrained, check_share, policy = (
        study.pk,
        study.constrained_first_round,
        study.check_share,
        study.identical_policy,
    )
    slots = _draw(candidates, rng, constrained_first_round=constrained)
    candidate_ids = [candidate_id for candidate_id in slots if candidate_id is not None]
    by_id = {c.pk: c for c in candidates}
    for position, candidate_id in enumerate(candidate_ids):
        by_id[candidate_id].position = position_name(position)
    Candidate.objects.bulk_update([by_id[candidate_id] for candidate_id in candidate_ids], ["position"])
    byes = [[index, slots[2 * index]] for index in range(len(slots) // 2) if slots[2 * index + 1] is None]
    bracket = Bracket.objects.create(
        query=query,
        seed=seed,
        size=len(candidate_ids),
        pair_likeness=pair_likeness(candidates),
        byes=byes,
    )
    bye_at = bracket.bye_candidates()
    first_round = Match.objects.bulk_create(
        [
            _match_build(bracket=bracket, round_number=1, index=index, entrants=slots[2 * index : 2 * index + 2])
            for index in range(len(slots) // 2)
            if index not in bye_at
        ]
    )
    # Every match of the bracket so far, for the advance below (it reads no match again).
    matches = list(first_round)
    if check_due(seed=seed, share=check_share):
        check = check_match_create(
            bracket=bracket, study_id=study_id, participation_id=query.participation_id, candidate_ids=candidate_ids
        )
        if check is not None:
            matches.append(check)
    # A question the annotator set aside while it was generating stays set aside.
    Query.objects.filter(pk=query.pk).exclude(status=Query.Status.DISCARDED).update(status=Query.Status.READY)
    # Two byes side by side meet in round 2 at once.
    for index in sorted(bye_at):
        if index % 2 == 0 and index + 1 in bye_at:
            _advance_from(bracket=bracket, round_number=1, index=index, matches=matches, policy=policy)
    if policy == Study.IdenticalPolicy.TIE:
        for match in first_round:
            if match.identical and match.status == Match.Status.PENDING:
                _tie_record_automatic(bracket=bracket, match=match)
                _tournament_advance(bracket=bracket, match=match, matches=matches, policy=policy)
    return bracket


def _adaptive_create(*, query: Query, candidates: Sequence[Candidate], seed: int, study: Study) -> Bracket:
    """`bracket_create` under the adaptive design: positions drawn at random from the seed (every summary has
    one, none a bye), the attention check placed as in a bracket, and the first pair chosen (`_adaptive_next`)."""
    rng = random.Random(seed)
    order = [c.pk for c in candidates]
    rng.shuffle(order)
    by_id = {c.pk: c for c in candidates}
    for position, candidate_id in enumerate(order):
        by_id[candidate_id].position = position_name(position)
    Candidate.objects.bulk_update([by_id[candidate_id] for candidate_id in order], ["position"])
    budget = min(adaptive_budget(study=study, systems=len(order)), max_budget(len(order)))
    bracket = Bracket.objects.create(
        query=query,
        seed=seed,
        size=len(order),
        pair_likeness=pair_likeness(candidates),
        design=Study.Design.ADAPTIVE,
        budget=budget,
        # The condition snapshot, the system's only for rows without one (legacy imports).
        entrants=[
            [c, by_id[c].system_id, by_id[c].condition or by_id[c].system.condition]
            for c in order  # position order
        ],
    )
    matches: list[Match] = []
    if check_due(seed=seed, share=study.check_share):
        check = check_match_create(
            bracket=bracket, study_id=study.pk, participation_id=query.participation_id, candidate_ids=order
        )
        if check is not None:
            matches.append(check)
    Query.objects.filter(pk=query.pk).exclude(status=Query.Status.DISCARDED).update(status=Query.Status.READY)
    _adaptive_next(
        bracket=bracket,
        matches=matches,
        study=study,
        counted=lambda: query.participation.source != Participation.Source.PREVIEW,
    )
    return bracket


def _adaptive_next(
    *,
    bracket: Bracket,
    matches: list[Match],
    study: Study,
    counted: Callable[[], bool],
    outcomes: Sequence[Outcome] = (),
) -> None:
    """Create the question's next pair, unless its comparisons are all asked or no pair is left: the one that tells
    most about the ranking (annotation.adaptive.next_pair) from the study's tallies and `outcomes`, this request's
    answers not stored there yet, which are added to them last (`counted()`: not a preview's). A new pair of
    identical summaries under the identical policy "tie" is recorded as a tie at once and the next one chosen. The
    question is ranked once nothing is pending. `matches`: all the question's matches (checks included), under the
    bracket's lock or just created; the matches created here are appended. Of `study` its key, first-round rule and
    identical policy are read."""
    entrants = [Entrant(candidate=c, system=i, condition=cond) for i, (c, _, cond) in enumerate(bracket.entrants or [])]
    systems = [system for _, system, _ in bracket.entrants or []]
    outcomes = list(outcomes)
    wins = None
    while True:
        data = [m for m in matches if not m.check_expected]
        if len(data) >= bracket.budget or any(m.status == Match.Status.PENDING for m in data):
            break
        if wins is None:
            wins = tally_wins(study_id=study.pk, systems=systems)
            wins_add(wins, systems=systems, outcomes=outcomes)
        pair = next_pair(
            entrants,
            gains=posterior(wins).gains(),
            asked=[(m.left_id, m.right_id) for m in data if m.left_id is not None and m.right_id is not None],
            retired={
                c
                for m in data
                if _match_choice(m) == Judgment.Choice.NEITHER
                for c in (m.left_id, m.right_id)
                if c is not None
            },
            constrained=study.constrained_first_round,
            rng=random.Random(f"{bracket.seed}:adaptive:{len(data) + 1}"),
        )
        if pair is None:
            break
        round_number = len(data) + 1
        number = round_number + sum(1 for m in matches if m.check_expected and m.round < round_number)
        left_id, right_id, kind, similarity = _placed(bracket=bracket, round_number=round_number, index=0, pair=pair)
        match = Match.objects.create(
            bracket=bracket,
            round=round_number,
            index=0,
            label=pair_label(number),
            left_id=left_id,
            right_id=right_id,
            identical=kind,
            similarity=similarity,
        )
        matches.append(match)
        if not (kind and study.identical_policy == Study.IdenticalPolicy.TIE):
            break
        _tie_record_automatic(bracket=bracket, match=match)
        if (outcome := _adaptive_outcome(bracket=bracket, match=match, choice=Judgment.Choice.TIE)) is not None:
            outcomes.append(outcome)
            wins_add(wins, systems=systems, outcomes=[outcome])
    if outcomes and counted():
        tally_add(study_id=study.pk, outcomes=outcomes)
    if not any(m.status == Match.Status.PENDING for m in matches):
        if Query.objects.filter(pk=bracket.query_id, status=Query.Status.READY).update(status=Query.Status.RANKED):
            bracket.query.status = Query.Status.RANKED  # the judgment's page says so (views._compare_answer)


def _adaptive_outcome(*, bracket: Bracket, match: Match, choice: str) -> Outcome | None:
    """What an answer to an adaptive match adds to the study's tallies (annotation.services.tally)."""
    system_of = {candidate: system for candidate, system, _ in bracket.entrants or []}
    assert match.left_id is not None and match.right_id is not None  # an answered match has both sides
    return tally_outcome(choice=choice, left_system=system_of[match.left_id], right_system=system_of[match.right_id])


def _match_choice(match: Match) -> str | None:
    """The choice an answered match recorded (None while it is pending or was skipped)."""
    return _answered(match, "choice")


def _pair_key(first_id: int, second_id: int) -> str:
    return f"{min(first_id, second_id)}:{max(first_id, second_id)}"


def pair_likeness(candidates: Sequence[Candidate]) -> dict[str, list[object]]:
    """Every pair of a query's candidates that is identical or near-identical (``kernel.similarity``):
    ``{"<id>:<id>": [kind, similarity]}``, measured once when the bracket is drawn so that a later round's
    match is flagged without reading the texts again."""
    out: dict[str, list[object]] = {}
    tokens = [tokenize(c.text) for c in candidates]
    for i, first in enumerate(candidates):
        for j in range(i + 1, len(candidates)):
            found = token_likeness(tokens[i], tokens[j])
            if found.kind:
                out[_pair_key(first.pk, candidates[j].pk)] = [found.kind, found.similarity]
    return out


def tie_advances(*, bracket: Bracket, match: Match) -> int | None:
    """The candidate a tie sends on: the bracket's seeded coin for this match, so the same seed always
    sends the same side; None in the final, where a tie leaves no single winner."""
    if bracket.adaptive or match.round >= bracket.rounds:
        return None  # an adaptive schedule sends no one on: its next pair is chosen afresh
    heads = random.Random(f"{bracket.seed}:tie:{match.round}:{match.index}").random() < 0.5
    return match.left_id if heads else match.right_id


def _tie_record_automatic(*, bracket: Bracket, match: Match) -> Judgment:
    """Record an identical pair as a tie without asking (the study's identical policy "tie")."""
    judgment = Judgment.objects.create(
        match=match,
        choice=Judgment.Choice.TIE,
        winner_id=tie_advances(bracket=bracket, match=match),
        automatic=True,
        answered_at=timezone.now(),
    )
    match.status = Match.Status.ANSWERED
    match.save(update_fields=["status"])
    match.judgment = judgment
    return judgment


def _match_create(*, bracket: Bracket, round_number: int, index: int, entrants: Sequence[int | None]) -> Match:
    """Create a match between two candidate ids; a missing entrant (after a "neither") skips it."""
    match = _match_build(bracket=bracket, round_number=round_number, index=index, entrants=entrants)
    match.save(force_insert=True)
    return match


def _slot_positions(bracket: Bracket) -> list[str | None]:
    """The position in each first-round slot, None for a bye's empty place (the second of its pair)."""
    bye_at = bracket.bye_candidates()
    names: list[str | None] = []
    placed = 0
    for slot in range(bracket.slots):
        if slot % 2 and slot // 2 in bye_at:
            names.append(None)
        else:
            names.append(position_name(placed))
            placed += 1
    return names


def _match_build(*, bracket: Bracket, round_number: int, index: int, entrants: Sequence[int | None]) -> Match:
    """The match `_match_create` stores, not stored yet (the first round is inserted in one statement)."""
    span = 2**round_number
    names = [name for name in _slot_positions(bracket)[index * span : (index + 1) * span] if name is not None]
    label = _round_label(round_number, bracket.rounds, span_label(names))
    if entrants[0] is None or entrants[1] is None:
        return Match(bracket=bracket, round=round_number, index=index, label=label, status=Match.Status.SKIPPED)
    left_id, right_id, kind, similarity = _placed(
        bracket=bracket, round_number=round_number, index=index, pair=(entrants[0], entrants[1])
    )
    return Match(
        bracket=bracket,
        round=round_number,
        index=index,
        label=label,
        left_id=left_id,
        right_id=right_id,
        identical=kind,
        similarity=similarity,
    )


def _placed(*, bracket: Bracket, round_number: int, index: int, pair: tuple[int, int]) -> tuple[int, int, str, Any]:
    """A match's (left id, right id, likeness kind, similarity): left/right placement is random, reproducible
    from the bracket's seed, and the pair's likeness the one measured when the bracket was drawn."""
    left_id, right_id = pair
    if random.Random(f"{bracket.seed}:{round_number}:{index}").random() < 0.5:
        left_id, right_id = right_id, left_id
    kind, similarity = (bracket.pair_likeness or {}).get(_pair_key(left_id, right_id), ["", None])
    return left_id, right_id, kind, similarity


def _match_winner_id(match: Match) -> int | None:
    return _answered(match, "winner_id")


def _answered(match: Match, field: str) -> Any:
    """`field` of the judgment of an answered match (None while it is pending or was skipped)."""
    if match.status != Match.Status.ANSWERED:
        return None
    judgment = getattr(match, "judgment", None)
    if judgment is None:
        # Answered by a request that committed while this one waited for the bracket's lock: the locked
        # read returned the match's new status but not the judgment inserted since it began.
        return Judgment.objects.filter(match_id=match.pk).values_list(field, flat=True).get()
    return getattr(judgment, field)


def _tournament_advance(*, bracket: Bracket, match: Match, matches: list[Match], policy: str | None = None) -> None:
    """After a match resolves, create the next round's match once its sibling has resolved too.
    A "neither" (or a skipped match) leaves no winner, so the match it feeds is skipped;
    a tie sends on the side its coin picked. A new match between identical summaries is recorded as a tie at
    once under the identical policy "tie" (`policy`; else read from the bracket's study).
    `matches` are all the bracket's matches (attention checks included), `match` among them, as read under the
    bracket row's lock (`judgment_record` takes it with them) or just created (`bracket_create`); the matches
    created here are appended. Without the lock, two siblings answered at the same moment each see the other
    still pending and no final is created; with it, no other answer changes them while this one runs, so the
    sibling, the next round's slot and what is still pending are read from them, not queried again. The
    tournament's slots are the data matches only: a check sits past them (index >= size) and feeds no round."""
    _advance_from(bracket=bracket, round_number=match.round, index=match.index, matches=matches, policy=policy)


def _advance_from(*, bracket: Bracket, round_number: int, index: int, matches: list[Match], policy: str | None) -> None:
    """`_tournament_advance` from the slot (`round_number`, `index`): a first-round slot may be a bye, which
    counts as resolved with its candidate going on (and is no match: nothing is recorded for it)."""
    slots = {(m.round, m.index): m for m in matches if not m.check_expected and m.index < bracket.size}
    bye_at = bracket.bye_candidates()

    def resolved(r: int, i: int) -> tuple[bool, int | None]:
        if r == 1 and i in bye_at:
            return True, bye_at[i]
        slot = slots.get((r, i))
        if slot is None or slot.status == Match.Status.PENDING:
            return False, None
        return True, _match_winner_id(slot)

    while round_number < bracket.rounds:
        (first_done, first_id), (second_done, second_id) = (
            resolved(round_number, index & ~1),
            resolved(round_number, index | 1),
        )
        if not (first_done and second_done) or (round_number + 1, index // 2) in slots:
            return
        match = _match_create(
            bracket=bracket, round_number=round_number + 1, index=index // 2, entrants=[first_id, second_id]
        )
        slots[(match.round, match.index)] = match
        matches.append(match)
        if match.status == Match.Status.PENDING and match.identical:
            policy = policy or bracket.query.participation.study.identical_policy
            if policy == Study.IdenticalPolicy.TIE:
                _tie_record_automatic(bracket=bracket, match=match)
        if match.status == Match.Status.PENDING:
            return
        round_number, index = match.round, match.index
    # A pending attention check keeps the question open too.
    if not any(m.status == Match.Status.PENDING for m in matches):
        if Query.objects.filter(pk=bracket.query_id, status=Query.Status.READY).update(status=Query.Status.RANKED):
            bracket.query.status = Query.Status.RANKED  # the judgment's page says so (views._compare_answer)


def match_mark_shown(*, match: Match, participation: Participation) -> Match:
    """Record when a match was first put in front of the annotator (reloads keep the first time). Refused
    (403/409, nothing recorded) while the study is paused or closed or once the participation has ended, as
    the comparison page shows a notice then: a match fetched then would count the pause as reading time."""
    participation_require_active(participation=participation)
    stamp_first(match, "shown_at")
    return match


CHOICE_WORDS = {
    Judgment.Choice.LEFT: gettext_lazy("the left summary (the top one on a phone)"),
    Judgment.Choice.RIGHT: gettext_lazy("the right summary (the bottom one on a phone)"),
    Judgment.Choice.NEITHER: gettext_lazy("neither summary"),
    Judgment.Choice.TIE: gettext_lazy("both equally good"),
}


def already_answered_message(choice: str) -> str:
    """What an annotator is told when a comparison they answer again was answered otherwise before."""
    return _(
        "This comparison was already answered, with %(choice)s, probably in another tab or window. Answers "
        "cannot be changed, so this one was not recorded."
    ) % {"choice": CHOICE_WORDS[Judgment.Choice(choice)]}


def _already_answered(existing: Judgment, choice: str) -> Judgment:
    """The same answer again (a double click, a resent form) is the answer already recorded; a different
    one (a stale second tab) is refused with what was recorded, so the annotator knows theirs did not count."""
    if existing.choice == choice:
        return existing
    raise ApplicationError(
        already_answered_message(existing.choice),
        status=409,
        extra={"match": existing.match_id, "recorded_choice": existing.choice},
    )


def judgment_record(*, match: Match, choice: str, by: Participation, comment: str = "") -> Judgment:
    """Answer a match. The same answer again is returned unchanged; a different one is refused.
    A tie ("both equally good") only where the study allows ties; a comment only where it collects them
    (on the match, or on the question: then it replaces the question's earlier comment)."""
    return _judgment_record(match_id=match.pk, choice=choice, comment=comment, participation_id=by.pk)


def judgment_record_as(*, annotator: Any, match_id: int, choice: str, comment: str = "") -> Judgment:
    """`judgment_record` for the API: the match is named by id and must be one of the signed-in annotator's
    own (anyone else's is a 404), checked in the same locked read, so the view reads nothing first."""
    if annotator is None or annotator.pk is None:
        raise ApplicationError(_("Not found."), status=404)
    return _judgment_record(match_id=match_id, choice=choice, comment=comment, annotator_id=annotator.pk)


def judgment_record_on_page(
    *, participation: Participation, index: int, match_id: int, choice: str, comment: str = ""
) -> Judgment:
    """`judgment_record` for the comparison page of question `index`: only the match on screen there (the
    question's current match, `selectors.tournament.match_current`, attention checks included) takes the
    answer; any other is refused (409 with `extra["match"]`, nothing recorded), so a stale tab or a late
    second press is never applied to the current match. The same answer again is returned unchanged."""
    return _judgment_record(
        match_id=match_id, choice=choice, comment=comment, participation_id=participation.pk, page_index=index
    )


def _judgment_record(
    *,
    match_id: int,
    choice: str,
    comment: str,
    participation_id: int | None = None,
    annotator_id: int | None = None,
    page_index: int | None = None,
) -> Judgment:
    if choice not in Judgment.Choice.values:
        raise ApplicationError(_("Choose left, right, neither or (where offered) both equally good."), field="choice")
    # A line break is one character whoever calls: a browser sends CRLF, and a comment at the limit must not
    # be refused (or stored) by how its lines end. The page's form and the API's field normalise too.
    comment = normalize_newlines(comment).strip()
    if len(comment) > COMMENT_MAX_CHARS:
        raise ApplicationError(
            _("A comment can be at most %(limit)d characters (this one has %(length)d).")
            % {"limit": COMMENT_MAX_CHARS, "length": len(comment)},
            field="comment",
        )
    try:
        return _judgment_record_locked(
            match_id=match_id,
            choice=choice,
            comment=comment,
            participation_id=participation_id,
            annotator_id=annotator_id,
            page_index=page_index,
        )
    except IntegrityError:
        # The one-to-one key refused a second judgment. The lock below makes this unreachable through this
        # service (an answered match's locked row says so); it stays the database's last word, and then the
        # same rules apply. The transaction has rolled back, so nothing of ours was written.
        existing = Judgment.objects.filter(match_id=match_id).first()
        if existing is None:
            raise
        return _already_answered(existing, choice)


def _not_on_page(match_id: int) -> ApplicationError:
    return ApplicationError(
        _("This comparison is not part of your question. Your answer was not recorded."),
        status=409,
        extra={"match": match_id},
    )


@transaction.atomic
def _judgment_record_locked(
    *,
    match_id: int,
    choice: str,
    comment: str,
    participation_id: int | None,
    annotator_id: int | None,
    page_index: int | None,
) -> Judgment:
    # One statement reads and locks every match of the bracket (attention checks included) with the bracket
    # row, the query, participation, study and judgments: the bracket's lock serialises the answers to sibling
    # matches, so the one answered second sees the first and creates the next round's match, and the advance
    # needs no further read. Not the study: that would queue every annotator behind one row. Of the question,
    # participation and study only the columns this path reads are fetched (`queries.CHOICE_COLUMNS`).
    matches = queries.bracket_matches_locked(match_id=match_id)
    match = next((m for m in matches if m.pk == match_id), None)
    query = match.bracket.query if match is not None else None
    if (
        match is None
        or query is None
        or (participation_id is not None and query.participation_id != participation_id)
        or (annotator_id is not None and query.participation.annotator_id != annotator_id)
    ):
        if page_index is not None:
            raise _not_on_page(match_id)
        raise ApplicationError(_("Not found."), status=404)
    if page_index is not None and query.index != page_index:
        raise _not_on_page(match_id)
    study = query.participation.study
    if choice == Judgment.Choice.TIE and not study.allow_ties:
        raise ApplicationError(
            _("This study does not offer “both equally good”: choose left, right or neither."), field="choice"
        )
    if comment and study.comments == Study.Comments.OFF:
        raise ApplicationError(_("This study does not collect comments."), field="comment")
    existing = getattr(match, "judgment", None)
    if existing is None and match.status == Match.Status.ANSWERED:
        # Answered by a request that committed while this one waited for the lock (see _match_winner_id).
        existing = Judgment.objects.get(match_id=match.pk)
    if existing is not None:
        return _already_answered(existing, choice)
    # The page shows the question's current match: its first pending one in (round, index) order, attention
    # checks included (`match_current`), which is the order of `matches`.
    on_screen = next((m for m in matches if m.status == Match.Status.PENDING), None)
    if page_index is not None and match is not on_screen:
        raise ApplicationError(
            _("That comparison is not the one to answer now. Your answer was not recorded."),
            status=409,
            extra={"match": match_id},
        )
    if match.status == Match.Status.SKIPPED:
        raise ApplicationError(_("This comparison was skipped and takes no answer."), status=409)
    if query.status != Query.Status.READY:
        raise ApplicationError(_("This question was set aside, so its comparisons take no more answers."), status=409)
    study_require_open(study=study)
    now = timezone.now()
    shown_at = match.shown_at or now
    winner_id = {"left": match.left_id, "right": match.right_id}.get(choice)
    if choice == Judgment.Choice.TIE:
        winner_id = tie_advances(bracket=match.bracket, match=match)
    # No savepoint around the insert: under the lock, a match without a judgment stays so until we commit.
    judgment = Judgment.objects.create(
        match=match,
        choice=choice,
        winner_id=winner_id,
        shown_at=shown_at,
        answered_at=now,
        seconds_on_page=max(0.0, (now - shown_at).total_seconds()),
        comment=comment if study.comments == Study.Comments.MATCH else "",
    )
    match.status = Match.Status.ANSWERED
    match.save(update_fields=["status"])
    if comment and study.comments == Study.Comments.QUESTION:
        Query.objects.filter(pk=query.pk).update(feedback=comment)
    if not match.check_expected and match.bracket.adaptive:
        participation = query.participation
        _adaptive_next(
            bracket=match.bracket,
            matches=matches,
            study=study,
            counted=lambda: participation.source != Participation.Source.PREVIEW,
            outcomes=[o for o in [_adaptive_outcome(bracket=match.bracket, match=match, choice=choice)] if o],
        )
        return judgment
    if not match.check_expected:
        _tournament_advance(bracket=match.bracket, match=match, matches=matches)
        return judgment
    # An attention check feeds no round; answered last, it is what completes the question.
    if not any(m.status == Match.Status.PENDING for m in matches):
        if Query.objects.filter(pk=query.pk, status=Query.Status.READY).update(status=Query.Status.RANKED):
            query.status = Query.Status.RANKED
    if check_failed(match=match, choice=choice):
        check_apply_policy(participation=query.participation, study=study)
    return judgment


# A ready question without a single match (never made by `bracket_create`, which draws the first round with
# the status): what the comparison page says rather than sending the annotator round in circles.
NOTHING_TO_ANSWER = gettext_lazy(
    "This question has no comparison to show. Please contact the research team; your earlier answers are saved."
)


@transaction.atomic
def bracket_settle(*, query_id: int) -> bool:
    """Give a question that is ready but has no match left to answer its end state, so that no page or client
    waits for a match that will never come: the comparison page sends a ready question's annotator to its
    current match and the study's page sends them back to the question; with no match to show, they went round
    in circles (and the current-match API answered 204 forever). Under the bracket's lock, as an answer: each
    resolved tournament match is advanced again (creating any next-round match it lacks), and a bracket with
    still nothing pending ends ranked. True when the question has somewhere to go now (a match to answer, or
    it is no longer ready: ranked here, or answered or set aside meanwhile); False only for a question without
    a single match, which stays as it is.

    How a match can vanish: a check's decoy is another question's summary, and deleting that question cascades
    to the check (annotation.services.quality.check_match_create keeps previews, which are deleted, out of it)."""
    any_match = Match.objects.filter(bracket__query_id=query_id).values_list("pk", flat=True).first()
    matches = queries.bracket_matches_locked(match_id=any_match) if any_match is not None else []
    if not matches:
        return False
    bracket = matches[0].bracket
    if bracket.query.status != Query.Status.READY or any(m.status == Match.Status.PENDING for m in matches):
        return True
    if bracket.adaptive:
        study = bracket.query.participation.study
        # Nothing new to add to the tallies: every answer added its own.
        _adaptive_next(bracket=bracket, matches=matches, study=study, counted=lambda: False)
        return True
    for match in list(matches):
        if not match.check_expected and match.index < bracket.size:
            _tournament_advance(bracket=bracket, match=match, matches=matches)
    if not any(m.status == Match.Status.PENDING for m in matches):
        Query.objects.filter(pk=query_id, status=Query.Status.READY).update(status=Query.Status.RANKED)
    return True
