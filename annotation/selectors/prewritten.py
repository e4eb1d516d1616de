"""Reads of pre-written studies: whether a study is one, and the next item an annotator gets (balanced)."""

from __future__ import annotations

from django.db.models import Count, Q

from annotation.models import Participation, PrewrittenItem, Query
from studies.models import Study


def study_has_prewritten(*, study: Study) -> bool:
    """A study has pre-written outputs iff it has items: its annotators get items, not a question box."""
    return PrewrittenItem.objects.filter(study_id=study.pk).exists()


def prewritten_item_next(*, participation: Participation) -> PrewrittenItem | None:
    """The item with the fewest questions showing it so far (a question set aside does not count), never one
    this participation has been shown; ties go to the item earlier in the imported file. None when every item
    has been shown to this participation."""
    return (
        PrewrittenItem.objects.filter(study_id=participation.study_id)
        .exclude(assignments__query__participation_id=participation.pk)
        .annotate(
            shown=Count("assignments", filter=~Q(assignments__query__status=Query.Status.DISCARDED), distinct=True)
        )
        .order_by("shown", "order", "pk")
        .first()
    )
