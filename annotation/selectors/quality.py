"""Reads of quality control: each participation's attention checks (answered, failed, pass rate), its speed
flag from time on page, and its manual exclusion, as the research pages, the admin API and the analysis see them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from annotation.models import Judgment, Participation
from studies.models import Study

# A median over fewer timed comparisons says little about a participant's pace: no speed flag below this.
SPEED_MIN_COMPARISONS = 3


@dataclass(frozen=True)
class ParticipationQuality:
    participation_id: int
    code: str
    checks_answered: int
    checks_failed: int
    median_seconds: float | None
    """Median time on page over the participation's comparisons (checks included: they look the same)."""
    speed_flagged: bool
    checks_flagged: bool
    """Failed checks reached the study's `check_max_failures`."""
    screened_out: bool
    excluded: bool
    exclusion_reason: str

    def to_dict(self) -> dict[str, object]:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "pass_rate": self.pass_rate}

    @property
    def pass_rate(self) -> float | None:
        if not self.checks_answered:
            return None
        return (self.checks_answered - self.checks_failed) / self.checks_answered


def speed_flagged(*, seconds: list[float], threshold: float | None) -> bool:
    timed = [s for s in seconds if s is not None]
    return threshold is not None and len(timed) >= SPEED_MIN_COMPARISONS and median(timed) < threshold


def participation_quality(*, study: Study, code: str | None = None) -> list[ParticipationQuality]:
    """Every participation of the study (or the one with this code) with its checks, pace and exclusion,
    by code. Two queries."""
    participations = Participation.objects.filter(study=study)
    judgments = Judgment.objects.filter(match__bracket__query__participation__study=study)
    if code is not None:
        participations = participations.filter(code=code)
        judgments = judgments.filter(match__bracket__query__participation__code=code)
    seconds: dict[int, list[float]] = defaultdict(list)
    answered: dict[int, int] = defaultdict(int)
    failed: dict[int, int] = defaultdict(int)
    rows = judgments.values_list(
        "match__bracket__query__participation_id", "seconds_on_page", "choice", "match__check_expected"
    )
    for participation_id, secs, choice, expected in rows:
        if secs is not None:
            seconds[participation_id].append(secs)
        if expected:
            answered[participation_id] += 1
            failed[participation_id] += choice != expected
    out = []
    for p in participations.order_by("code").only("pk", "code", "screened_out_at", "excluded_at", "exclusion_reason"):
        times = seconds.get(p.pk, [])
        out.append(
            ParticipationQuality(
                participation_id=p.pk,
                code=p.code,
                checks_answered=answered.get(p.pk, 0),
                checks_failed=failed.get(p.pk, 0),
                median_seconds=median(times) if times else None,
                speed_flagged=speed_flagged(seconds=times, threshold=study.speed_threshold_seconds),
                checks_flagged=failed.get(p.pk, 0) >= study.check_max_failures,
                screened_out=p.screened_out_at is not None,
                excluded=p.excluded_at is not None,
                exclusion_reason=p.exclusion_reason,
            )
        )
    return out
