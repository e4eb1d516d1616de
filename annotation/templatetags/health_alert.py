"""The admin index's study health alerts: for each open study the user may manage, a banner when its summaries
fail or its annotators wait past the thresholds (annotation/health.py), with a link to its health panel."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from annotation.health import study_health
from studies.models import Study
from studies.selectors.membership import StudyAction, studies_for

register = template.Library()


@register.inclusion_tag("admin/annotation/health_alert.html", takes_context=True)
def health_alert(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    alerts: list[tuple[str, str]] = []
    panels: list[tuple[str, str]] = []
    if user is not None and user.is_authenticated:
        studies = studies_for(user=user, action=StudyAction.MANAGE, queryset=Study.objects.filter(status="open"))
        for study in studies.order_by("pk")[:20]:
            url = reverse("study-health", args=[study.pk])
            panels.append((study.title, url))
            alerts += [(text, url) for text in study_health(study=study, with_deployment=False).alerts]
    return {"alerts": alerts, "panels": panels}
