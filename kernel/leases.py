"""Leases on background work: a running row belongs to its worker until `lease_expires_at` passes.

A heartbeat (kernel.heartbeat) renews the lease while the work runs; once it lapses, the worker is
presumed dead and another may claim the row. Used by candidates and research jobs alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q


def claimable(*, queued: Any, running: Any, now: datetime, redelivered: bool) -> Q:
    """Rows a worker may claim: queued ones, and running ones whose lease has lapsed or was never taken.
    A redelivered message may take over any running row at once: the broker redelivers a message only
    when the process that held it died (a pool process lost: `reject_on_worker_lost`), or, on Redis, past
    its visibility timeout, which the settings keep longer than any task may run."""
    condition = (
        Q(status=queued)
        | Q(status=running, lease_expires_at__lt=now)
        | Q(status=running, lease_expires_at__isnull=True)
    )
    if redelivered:
        condition |= Q(status=running)
    return condition
