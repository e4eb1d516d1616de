"""Writing the audit log (studies/models_audit.py): one row per change an admin or researcher makes, in the
transaction of that change, so a change rolled back leaves no row and a committed one always has its row.

The services that change a study call `audit_record` with who acted (`by`, a user; None for a command) and
where from (`origin`: an `AuditOrigin`, or `command_origin("study_member")`). Values are stored as JSON, with
secrets left out: a setting named like a key, token, password or secret reads "[redacted]" (a setting naming
an environment variable, `api_key_env`, is a name, not a secret, and is kept)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from studies.models import Study
from studies.models_audit import COMMAND_PREFIX, AuditEvent, AuditOrigin, StudyAuditLog

REDACTED = "[redacted]"
# Keys whose values are secrets; a key ending in _env names an environment variable and is kept.
SECRET_KEY = re.compile(r"(api_?key|token|secret|password|passwd|authorization|credential)s?$", re.IGNORECASE)


def _secret(key: str) -> bool:
    return bool(SECRET_KEY.search(key)) and not key.lower().endswith("_env")


def audit_value(value: Any) -> Any:
    """`value` as the log stores it: JSON, model rows by their key, secrets redacted at any depth."""
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, Mapping):
        return {str(k): REDACTED if _secret(str(k)) else audit_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [audit_value(v) for v in value]
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def audit_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keys whose values differ, as (before, after) of those keys alone."""
    old, new = audit_value(dict(before)), audit_value(dict(after))
    keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    return {k: old.get(k) for k in keys}, {k: new.get(k) for k in keys}


def _actor(by: Any) -> Any:
    return by if by is not None and getattr(by, "is_authenticated", False) and by.pk is not None else None


def audit_record(
    *,
    study: Study | None,
    by: Any,
    origin: str,
    event_type: AuditEvent,
    object_type: str,
    object_id: Any = "",
    object_repr: str = "",
    before: Any = None,
    after: Any = None,
    study_slug: str = "",
) -> StudyAuditLog:
    """Write one row of the audit log. Called inside the service's transaction, never on its own."""
    if origin not in AuditOrigin.values and not origin.startswith(COMMAND_PREFIX):
        raise ValueError(f"Unknown audit origin {origin!r}.")  # a programming error, not bad input
    actor = _actor(by)
    return StudyAuditLog.objects.create(
        study=study if study is not None and study.pk is not None else None,
        study_slug=(study.slug if study is not None else study_slug)[:80],
        actor=actor,
        actor_name=actor.get_username()[:150] if actor is not None else "",
        origin=origin[:100],
        event_type=event_type,
        event_time=timezone.now(),
        object_type=object_type,
        object_id=str(object_id)[:40],
        object_repr=str(object_repr)[:200],
        before=audit_value(before),
        after=audit_value(after),
    )
