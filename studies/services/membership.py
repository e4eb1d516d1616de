"""Study membership and the guarded writes of a study: who may create, edit and staff a study, and the
settings only a superuser may set (a model server's address, a file on the server). The admin and the
admin API write a study through here; the rules themselves are studies/selectors/membership.py's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import models, transaction

from kernel.exceptions import ApplicationError
from studies.models import Study, StudyMembership, StudySystem
from studies.models_audit import AuditEvent, AuditOrigin
from studies.selectors.membership import StudyAction, study_allows
from studies.services.audit import audit_diff, audit_record
from studies.services.study import STUDY_FIELDS, study_create, study_update, system_spec

# Settings that reach outside the study: where requests go (and which environment variable's value is
# sent there as the API key), and which file on the server is read. Superusers alone may set or change them.
PRIVILEGED_SYSTEM_SETTINGS = ("base_url", "api_key_env")
PRIVILEGED_RETRIEVAL_SETTINGS = ("corpus_path",)


def _is_superuser(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_superuser)


def study_check_privileged_settings(
    *,
    by: Any,
    retrieval_settings: Mapping[str, Any] | None,
    systems: Sequence[Mapping[str, Any]] | None,
    study: Study | None,
) -> None:
    """Refuse (403, naming the field) a non-superuser's new or changed privileged setting. Settings a
    superuser stored may be kept unchanged by anyone who may edit the study."""
    if _is_superuser(by):
        return
    stored_retrieval = dict(study.retrieval_settings or {}) if study is not None and study.pk else {}
    given_retrieval = retrieval_settings if isinstance(retrieval_settings, Mapping) else {}
    for key in PRIVILEGED_RETRIEVAL_SETTINGS:
        if given_retrieval.get(key) != stored_retrieval.get(key):
            raise ApplicationError(
                f"Only an administrator (superuser) may set {key} in the retrieval settings.",
                field="retrieval_settings",
                status=403,
            )
    stored_systems: dict[Any, dict[str, Any]] = {}
    if study is not None and study.pk:
        for system in StudySystem.objects.filter(study_id=study.pk):
            spec = system_spec(system)
            stored_systems[system.pk] = spec
            stored_systems[system.label] = spec
    for given in systems or ():
        match = stored_systems.get(given.get("id")) or stored_systems.get(given.get("label")) or {}
        stored_settings = match.get("backend_settings") or {}
        given_settings = given.get("backend_settings", stored_settings)
        if not isinstance(given_settings, Mapping):
            continue  # the study's own validation names a malformed value
        for key in PRIVILEGED_SYSTEM_SETTINGS:
            if given_settings.get(key) != stored_settings.get(key):
                raise ApplicationError(
                    f"System {given.get('label', '')!r}: only an administrator (superuser) may set {key} in the "
                    "backend settings.",
                    field="systems",
                    status=403,
                )


def _require(*, by: Any, study: Study, action: StudyAction) -> None:
    if not study_allows(user=by, study=study, action=action):
        raise ApplicationError("Only the study's owners may change it.", status=403)


LAST_OWNER = "A study keeps at least one owner: make someone else owner first."


@transaction.atomic
def membership_set(
    *, study: Study, user: Any, role: str, by: Any = None, origin: str = AuditOrigin.CODE
) -> StudyMembership:
    """Give the user this role in the study (idempotent: an existing membership changes role); never the
    last owner another role, on any path (the API, the admin, `manage.py study_member`). A change is audited
    as done by `by` from `origin`."""
    if role not in StudyMembership.Role.values:
        raise ApplicationError(
            f"Unknown role {role!r}; choose one of {', '.join(StudyMembership.Role.values)}.", field="role"
        )
    if _would_leave_no_owner(study=study, user_id=user.pk, role=role):
        raise ApplicationError(LAST_OWNER, field="role")
    was = StudyMembership.objects.filter(study=study, user=user).values_list("role", flat=True).first()
    membership, _ = StudyMembership.objects.update_or_create(study=study, user=user, defaults={"role": role})
    if was != role:
        audit_record(
            study=study,
            by=by,
            origin=origin,
            event_type=AuditEvent.MEMBER_ADDED if was is None else AuditEvent.MEMBER_ROLE_CHANGED,
            object_type="membership",
            object_id=user.pk,
            object_repr=user.get_username(),
            before=None if was is None else {"role": was},
            after={"role": role},
        )
    return membership


@transaction.atomic
def membership_remove(*, membership: StudyMembership, by: Any = None, origin: str = AuditOrigin.CODE) -> None:
    """End a membership (idempotent: one already gone is no error); never the last owner's. The stored row's
    member is the one checked, whatever user the given instance now names (an admin form's row edited and
    deleted in one save)."""
    stored = (
        StudyMembership.objects.filter(pk=membership.pk)
        .values_list("user_id", "user__username", "role", "study__slug")
        .first()
    )
    if stored is None:
        return
    user_id, username, role, _ = stored
    if _would_leave_no_owner(study=membership.study_id, user_id=user_id, role=None):
        raise ApplicationError(LAST_OWNER, field="username")
    StudyMembership.objects.filter(pk=membership.pk).delete()
    audit_record(
        study=Study.objects.get(pk=membership.study_id),
        by=by,
        origin=origin,
        event_type=AuditEvent.MEMBER_REMOVED,
        object_type="membership",
        object_id=user_id,
        object_repr=username,
        before={"role": role},
        after=None,
    )


# The settings that make up the study's open link (docs/crowd.md), audited as their own event; the link's
# secret itself (open_link_token) is never logged.
OPEN_LINK_FIELDS = frozenset(
    {
        "open_link_enabled",
        "participant_cap",
        "place_timeout_minutes",
        "open_link_expires_at",
        "external_id_param",
        "completion_url",
        "crowd_completion_code",
        "screen_out_url",
    }
)


def _study_state(study_pk: int) -> dict[str, Any]:
    """A study as the audit log compares it: its settings, status and systems (by label)."""
    study = Study.objects.get(pk=study_pk)
    systems = StudySystem.objects.filter(study_id=study_pk).order_by("order", "pk")
    return {
        **{name: study.serializable_value(name) for name in ("status", *STUDY_FIELDS)},
        "systems": {system.label: {k: v for k, v in system_spec(system).items() if k != "label"} for system in systems},
    }


def _audit_study_change(
    *, study: Study, by: Any, origin: str, before: Mapping[str, Any], after: Mapping[str, Any]
) -> None:
    """One row per kind of change (status, open link, systems, other settings), each with only what changed."""
    old, new = audit_diff(before, after)
    groups = {
        AuditEvent.STUDY_STATUS_CHANGED: {"status"},
        AuditEvent.STUDY_OPEN_LINK_CHANGED: OPEN_LINK_FIELDS,
        AuditEvent.STUDY_SYSTEMS_CHANGED: {"systems"},
    }
    for event in (
        AuditEvent.STUDY_SETTINGS_CHANGED,
        AuditEvent.STUDY_STATUS_CHANGED,
        AuditEvent.STUDY_OPEN_LINK_CHANGED,
        AuditEvent.STUDY_SYSTEMS_CHANGED,
    ):
        others = set().union(*groups.values())
        keys = [k for k in old if (k in groups[event] if event in groups else k not in others)]
        if keys:
            audit_record(
                study=study,
                by=by,
                origin=origin,
                event_type=event,
                object_type="study",
                object_id=study.pk,
                object_repr=study.slug,
                before={k: old[k] for k in keys},
                after={k: new[k] for k in keys},
            )


@transaction.atomic
def study_create_owned(
    *, by: Any, origin: str = AuditOrigin.CODE, systems: Iterable[Mapping[str, Any]] | None = None, **fields: Any
) -> Study:
    """Create a study as `by`, who becomes its owner."""
    specs = None if systems is None else [dict(s) for s in systems]
    study_check_privileged_settings(
        by=by, retrieval_settings=fields.get("retrieval_settings"), systems=specs, study=None
    )
    study = study_create(**fields, systems=specs)
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=AuditEvent.STUDY_CREATED,
        object_type="study",
        object_id=study.pk,
        object_repr=study.slug,
        after=_study_state(study.pk),
    )
    membership_set(study=study, user=by, role=StudyMembership.Role.OWNER, by=by, origin=origin)
    return study


@transaction.atomic
def study_update_as(
    *,
    by: Any,
    study: Study,
    origin: str = AuditOrigin.CODE,
    systems: Iterable[Mapping[str, Any]] | None = None,
    **fields: Any,
) -> Study:
    """Change a study as `by`, who must be allowed to manage it (an owner, or a superuser); what changed is
    audited, read before and after under the study's row lock."""
    _require(by=by, study=study, action=StudyAction.MANAGE)
    specs = None if systems is None else [dict(s) for s in systems]
    study_check_privileged_settings(
        by=by, retrieval_settings=fields.get("retrieval_settings", study.retrieval_settings), systems=specs, study=study
    )
    Study.objects.select_for_update().filter(pk=study.pk).values_list("pk").first()
    before = _study_state(study.pk)
    updated = study_update(study=study, systems=specs, **fields)
    _audit_study_change(study=updated, by=by, origin=origin, before=before, after=_study_state(updated.pk))
    return updated


def _would_leave_no_owner(*, study: Study | int, user_id: int, role: str | None) -> bool:
    """Whether giving the user `role` (None: no membership) leaves a study that has owners without one. Every
    owner row is locked, in one order, before deciding: two owners stepping down at once queue here, and the
    second reads the first's change (a row no longer an owner drops out of its locked read) and is refused,
    instead of each locking the other's row and both going ahead or deadlocking."""
    if role == StudyMembership.Role.OWNER:
        return False
    owners = list(
        StudyMembership.objects.select_for_update()
        .filter(study=study, role=StudyMembership.Role.OWNER)
        .order_by("pk")
        .values_list("user_id", flat=True)
    )
    return bool(owners) and set(owners) <= {user_id}


@transaction.atomic
def membership_set_as(
    *, by: Any, study: Study, user: Any, role: str, origin: str = AuditOrigin.CODE
) -> StudyMembership:
    """An owner (or a superuser) gives a user a role in the study; the last owner cannot step down, so that
    someone besides the superusers can always manage the study."""
    _require(by=by, study=study, action=StudyAction.MANAGE)
    return membership_set(study=study, user=user, role=role, by=by, origin=origin)


@transaction.atomic
def membership_remove_as(*, by: Any, study: Study, user: Any, origin: str = AuditOrigin.CODE) -> None:
    """An owner (or a superuser) ends a user's membership (idempotent); never the last owner's."""
    _require(by=by, study=study, action=StudyAction.MANAGE)
    membership = StudyMembership.objects.filter(study=study, user=user).first()
    if membership is not None:
        membership_remove(membership=membership, by=by, origin=origin)


# What the audit row keeps of a deleted row, by model name: the participation's pseudonymous code (annotation's
# model, named here rather than imported: studies sits below annotation), an invitation's note (its token is a secret).
DELETED_ROW_NAMED_BY = {"participation": ("code",), "invitation": ("note",)}


@transaction.atomic
def study_record_delete(*, record: Study | models.Model, by: Any, origin: str = AuditOrigin.CODE) -> None:
    """Delete a study with everything in it, or one of its rows (an invitation, annotation's participation: any row
    with a `study`) (the admin's Delete, for those who may manage the study); audited first, with what it was, so the
    row outlives it."""
    study = record if isinstance(record, Study) else record.study  # type: ignore[attr-defined]
    _require(by=by, study=study, action=StudyAction.MANAGE)
    if isinstance(record, Study):
        event, object_type, before = AuditEvent.STUDY_DELETED, "study", _study_state(record.pk)
    else:
        event, object_type = AuditEvent.ROW_DELETED, record._meta.model_name or ""
        before = {name: getattr(record, name) for name in DELETED_ROW_NAMED_BY.get(object_type, ())}
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=event,
        object_type=object_type,
        object_id=record.pk,
        object_repr=str(record)[:200],
        before=before,
        after=None,
    )
    record.delete()
