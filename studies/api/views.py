"""The admin API of study design: studies and their systems, status, invitations, members and audit log, each
scoped to the caller's memberships and model permissions. A study's participations (progress, exclusions, the open
link's count) are annotation/api/views.py's, under the same /api/v1/admin/studies/<slug>/ paths."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.exceptions import ApplicationError
from studies.api import serializers as s
from studies.models import Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.selectors.audit import AUDIT_ACTION, audit_log_of_study, audit_row
from studies.selectors.membership import StudyAction, studies_for, study_allows
from studies.services.invitation import invitation_create_bulk
from studies.services.membership import membership_remove_as, membership_set_as, study_create_owned, study_update_as


class ModelPermissionsByAction(permissions.BasePermission):
    """The Django model permissions the view's `required_permissions` names for this action and method."""

    message = "Your account lacks the permission for this (ask an administrator to grant it)."

    def has_permission(self, request: Request, view: Any) -> bool:
        # A method the view does not offer is 405 for everyone: DRF would answer it only after the
        # permissions, and this table has no row for it (DELETE on a study is `destroy`, left out).
        if request.method not in view.allowed_methods:
            raise exceptions.MethodNotAllowed(str(request.method))
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        table: dict[str, list[str]] = view.required_permissions
        action = getattr(view, "action", None) or ""
        needed = table.get(f"{action}:{request.method}", table.get(action))
        if needed is None:
            return False  # an action with no row is refused, never left open
        return user.has_perms(needed)


def require_role(request: Request, study: Study, action: StudyAction) -> None:
    if not study_allows(user=request.user, study=study, action=action):
        raise ApplicationError(REFUSED_ROLE[action], status=403)


AUDIT_PAGE = 1000  # rows of the audit log per answer, at most

REFUSED_ROLE = {
    StudyAction.SEE: "You are not a member of this study.",
    StudyAction.ANALYSE: "Your role in this study does not include this (researchers and owners only).",
    StudyAction.MANAGE: "Only the study's owners may change it.",
}


class StudyScopedViewSet(viewsets.GenericViewSet):
    """Studies by slug, scoped to the caller's memberships (SEE; each action asks for its role too), with the
    model permissions its `required_permissions` names. annotation's study actions (progress, exclusion, the
    open link) share it, under the same /admin/studies/<slug>/ paths."""

    throttle_scope = "admin"  # docs/api.md, "Request rates"
    permission_classes = [ModelPermissionsByAction]
    required_permissions: dict[str, list[str]] = {}
    lookup_field = "slug"
    queryset = Study.objects.none()  # the schema's path types; requests use get_queryset

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return studies_for(
            user=self.request.user, action=StudyAction.SEE, queryset=Study.objects.prefetch_related("systems")
        )


class StudyAdminViewSet(
    StudyScopedViewSet,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.ListModelMixin,
):
    """Studies, scoped to the caller's memberships; creating one makes the caller its owner."""

    required_permissions = {
        "list": ["studies.view_study"],
        "retrieve": ["studies.view_study"],
        "create": ["studies.add_study"],
        "update": ["studies.change_study"],
        "partial_update": ["studies.change_study"],
        "status": ["studies.change_study"],
        "invitations:GET": ["studies.view_study", "studies.view_invitation"],
        "invitations:POST": ["studies.view_study", "studies.add_invitation"],
        "audit": ["studies.view_study", "studies.view_studyauditlog"],
        "metadata": ["studies.view_study"],  # OPTIONS
    }
    serializer_class = s.StudySerializer
    http_method_names = ["get", "post", "put", "patch", "head", "options"]

    def create(self, request: Request) -> Response:  # type: ignore[override]
        body = s.StudySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        systems = data.pop("systems", None)
        study = study_create_owned(by=request.user, origin=AuditOrigin.ADMIN_API, **data, systems=systems)
        return Response(s.StudySerializer(study).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, slug: str, partial: bool = False) -> Response:  # type: ignore[override]
        """PUT and PATCH: the same rules as creating, through study_update. `systems`, when given, is the
        full list (systems left out are removed); it cannot change once summaries exist (409)."""
        study = self.get_object()
        require_role(request, study, StudyAction.MANAGE)
        body = s.StudySerializer(study, data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        systems = data.pop("systems", None)
        study = study_update_as(by=request.user, study=study, origin=AuditOrigin.ADMIN_API, systems=systems, **data)
        return Response(s.StudySerializer(Study.objects.prefetch_related("systems").get(pk=study.pk)).data)

    @extend_schema(request=s.StudyStatusSerializer, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def status(self, request: Request, slug: str) -> Response:
        study = self.get_object()
        require_role(request, study, StudyAction.MANAGE)
        body = s.StudyStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        study = study_update_as(
            by=request.user, study=study, origin=AuditOrigin.ADMIN_API, status=body.validated_data["status"]
        )
        return Response(s.StudySerializer(study).data)

    @extend_schema(request=s.InvitationBulkSerializer, responses={201: s.InvitationSerializer(many=True)})
    @action(detail=True, methods=["post", "get"])
    def invitations(self, request: Request, slug: str) -> Response:
        study = self.get_object()
        if request.method == "GET":
            require_role(request, study, StudyAction.ANALYSE)
            return Response(s.InvitationSerializer(study.invitations.all(), many=True).data)
        require_role(request, study, StudyAction.MANAGE)
        body = s.InvitationBulkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        invitations = invitation_create_bulk(
            study=study, by=request.user, origin=AuditOrigin.ADMIN_API, **body.validated_data
        )
        return Response(s.InvitationSerializer(invitations, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("event_type", str, enum=AuditEvent.values, description="Only this kind of event."),
            OpenApiParameter("actor", str, description="Only this user's actions (a username)."),
            OpenApiParameter("before", int, description="Only rows older than this id (the next page)."),
            OpenApiParameter("limit", int, description=f"At most this many rows (default and most {AUDIT_PAGE})."),
        ],
        responses=s.AuditEntrySerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def audit(self, request: Request, slug: str) -> Response:
        """The study's audit log, newest first: who changed what, when, from where, before and after
        (owners and researchers of the study). Pages of `limit` rows; `?before=` the last id for the next."""
        study = self.get_object()
        require_role(request, study, AUDIT_ACTION)
        params = request.query_params
        rows = audit_log_of_study(
            user=request.user, study=study, event_type=params.get("event_type"), actor=params.get("actor")
        )
        rows = rows.order_by("-pk")  # the order `before` pages by (ids grow as rows are written)
        if before := params.get("before"):
            rows = rows.filter(pk__lt=whole_number(before, "before"))
        limit = min(whole_number(params.get("limit") or str(AUDIT_PAGE), "limit"), AUDIT_PAGE)
        return Response(s.AuditEntrySerializer([audit_row(row) for row in rows[:limit]], many=True).data)


class StudyMembersApi(APIView):
    """A study's members and their roles: GET for members who may analyse, POST {username, role} to add one
    or change a role (owners). Members are edited with the study (its admin page's inline), so they take
    the study's model permissions."""

    throttle_scope = "admin"  # docs/api.md, "Request rates"
    permission_classes = [ModelPermissionsByAction]
    required_permissions = {":GET": ["studies.view_study"], ":POST": ["studies.change_study"]}

    @extend_schema(responses=s.MembershipSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        study = _member_study(request, slug, StudyAction.ANALYSE)
        return Response(_members(study))

    @extend_schema(request=s.MembershipSerializer, responses=s.MembershipSerializer(many=True))
    def post(self, request: Request, slug: str) -> Response:
        study = _member_study(request, slug, StudyAction.SEE)
        body = s.MembershipSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = _member_user(body.validated_data["username"])
        membership_set_as(
            by=request.user, study=study, user=user, role=body.validated_data["role"], origin=AuditOrigin.ADMIN_API
        )
        return Response(_members(study))


class StudyMemberApi(APIView):
    """DELETE ends one membership (owners; idempotent; never the last owner's)."""

    throttle_scope = "admin"  # docs/api.md, "Request rates"
    permission_classes = [ModelPermissionsByAction]
    required_permissions = {":DELETE": ["studies.change_study"]}

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        study = _member_study(request, slug, StudyAction.SEE)
        membership_remove_as(by=request.user, study=study, user=_member_user(username), origin=AuditOrigin.ADMIN_API)
        return Response(status=status.HTTP_204_NO_CONTENT)


def whole_number(value: str, field: str) -> int:
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 2**63 - 1:
        raise ApplicationError(f"{field} must be a whole number of at least 1.", field=field)
    return int(value)


def _member_study(request: Request, slug: str, action: StudyAction) -> Study:
    study = get_object_or_404(
        studies_for(user=request.user, action=StudyAction.SEE, queryset=Study.objects.all()), slug=slug
    )
    require_role(request, study, action)
    return study


def _members(study: Study) -> Any:
    rows = study.memberships.select_related("user").order_by("user__username")
    return s.MembershipSerializer([{"username": m.user.username, "role": m.role} for m in rows], many=True).data


def _member_user(username: str) -> Any:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ApplicationError(f"No user named {username!r}.", field="username")
    return user
