"""The admin index's notice of failed generations: how many of the user's studies' summaries failed, with a
link to the list of them, where a newcomer otherwise saw no sign that anything had gone wrong."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from annotation.selectors.generation import candidates_failed_count

register = template.Library()


@register.inclusion_tag("admin/annotation/failed_work_alert.html", takes_context=True)
def failed_work_alert(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    count = candidates_failed_count(user=user) if user is not None else 0
    url = reverse("admin:annotation_candidate_changelist") + "?status__exact=failed"
    return {"count": count, "url": url}
