"""The admin's alarm for a stopped scheduler: a banner (and an error log line) when the periodic
sweepers have not run for SWEEPER_LATE_AFTER_S, since then nothing sees dead workers' work to an end."""

from __future__ import annotations

import logging
from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import timezone

from annotation.models import SweeperRun

register = template.Library()
logger = logging.getLogger(__name__)


def sweeper_late_message() -> str:
    """Empty when the generation sweeper ran recently; else what an admin should do about it."""
    late_after = timedelta(seconds=settings.SWEEPER_LATE_AFTER_S)
    last = SweeperRun.objects.filter(name="generation").values_list("last_run_at", flat=True).first()
    if last is not None and timezone.now() - last < late_after:
        return ""
    when = f"last ran {last:%Y-%m-%d %H:%M:%S} UTC" if last else "has never run"
    message = (
        f"The background sweeper {when}: work left behind by a worker that died is not being picked up. "
        "Check that exactly one Celery beat process is running (platform/celery-beat.sh) and a worker."
    )
    logger.error(message)
    return message


@register.inclusion_tag("admin/annotation/sweeper_alert.html")
def sweeper_alert() -> dict[str, str]:
    return {"message": sweeper_late_message()}
