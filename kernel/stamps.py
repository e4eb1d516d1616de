"""First-time stamps: when a page or a match was first put in front of a person (reloads keep the first)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


def stamp_first(instance: models.Model, field: str) -> None:
    """Set `field` to now on `instance` and its row unless the row has one already; a concurrent first
    stamp wins, and `instance` then reads the stored time."""
    if getattr(instance, field) is not None:
        return
    now = timezone.now()
    if type(instance)._default_manager.filter(pk=instance.pk, **{f"{field}__isnull": True}).update(**{field: now}):
        setattr(instance, field, now)
    else:
        instance.refresh_from_db(fields=[field])
