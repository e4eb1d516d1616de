"""An invitation's writes for the study's owners: creating single-use or limited links in bulk and changing a
link's limit, expiry or note, each audited. Accepting one (a participation) is annotation/services/participation.py."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.db import transaction

from kernel.exceptions import ApplicationError
from kernel.storable import DB_INT_MAX
from studies.models import Invitation, Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.services.audit import audit_diff, audit_record


@transaction.atomic
def invitation_create_bulk(
    *,
    study: Study,
    count: int,
    max_uses: int = 1,
    expires_at: datetime | None = None,
    note: str = "",
    by: Any = None,
    origin: str = AuditOrigin.CODE,
) -> list[Invitation]:
    """Create `count` invitation links; audited as one row naming them by id (their tokens are secrets)."""
    if not 1 <= count <= 1000:
        raise ApplicationError("Create between 1 and 1000 invitations at a time.", field="count")
    invitation_check_max_uses(max_uses=max_uses)
    created = [
        Invitation.objects.create(
            study=study, token=secrets.token_urlsafe(24), max_uses=max_uses, expires_at=expires_at, note=note
        )
        for _ in range(count)
    ]
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=AuditEvent.INVITATIONS_CREATED,
        object_type="invitation",
        object_id=created[0].pk if count == 1 else "",
        object_repr=f"{count} invitation(s)",
        after={
            "count": count,
            "ids": [invitation.pk for invitation in created],
            "max_uses": max_uses,
            "expires_at": expires_at,
            "note": note,
        },
    )
    return created


INVITATION_EDITABLE = ("max_uses", "expires_at", "note")


@transaction.atomic
def invitation_update(*, invitation: Invitation, by: Any, origin: str = AuditOrigin.CODE, **fields: Any) -> Invitation:
    """Change an invitation's limit, expiry or note (the admin's invitation page); the uses counted by
    annotators who joined meanwhile are kept, and the new limit is checked against them."""
    unknown = sorted(set(fields) - set(INVITATION_EDITABLE))
    if unknown:
        raise ApplicationError(f"Unknown invitation field(s): {', '.join(unknown)}.", field=unknown[0])
    stored = Invitation.objects.select_for_update().select_related("study").get(pk=invitation.pk)
    if fields.get("max_uses") is not None:
        invitation_check_max_uses(max_uses=fields["max_uses"], used=stored.uses)
    before = {name: getattr(stored, name) for name in INVITATION_EDITABLE}
    for name, value in fields.items():
        setattr(stored, name, value)
    old, new = audit_diff(before, {name: getattr(stored, name) for name in INVITATION_EDITABLE})
    if old:
        stored.save(update_fields=list(old))
        audit_record(
            study=stored.study,
            by=by,
            origin=origin,
            event_type=AuditEvent.INVITATION_CHANGED,
            object_type="invitation",
            object_id=stored.pk,
            object_repr=f"invitation {stored.pk}",
            before=old,
            after=new,
        )
    return stored


def invitation_check_max_uses(*, max_uses: int, used: int = 0) -> None:
    """An invitation's limit: at least one use, and at least the annotators who already joined with it."""
    if max_uses < 1:
        raise ApplicationError("An invitation must allow at least one use.", field="max_uses")
    if max_uses > DB_INT_MAX:  # the column's integer: past it PostgreSQL refuses the row (a 500 before)
        raise ApplicationError(f"An invitation allows at most {DB_INT_MAX} uses.", field="max_uses")
    if max_uses < used:
        raise ApplicationError(
            f"{used} annotator(s) have already joined with this invitation: allow at least {used} uses.",
            field="max_uses",
        )
