"""The API: the whole annotator flow (own data only, others' is 404) and the admin operations."""

from __future__ import annotations

from django.contrib.auth import update_session_auth_hash
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, status, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api import serializers as s
from annotation.models import Candidate, Match, Participation, Query
from annotation.selectors.generation import candidates_failed
from annotation.selectors.participation import participation_own
from annotation.selectors.prewritten import study_has_prewritten
from annotation.selectors.quality import participation_quality
from annotation.selectors.query import query_of_annotator
from annotation.selectors.study import study_progress
from annotation.selectors.tournament import match_current_shown
from annotation.services.generation import candidate_retry, candidates_retry_failed
from annotation.services.participation import (
    invitation_join,
    participation_finish,
    participation_resume_link_replace,
    participation_screen,
    study_participants_counted,
)
from annotation.services.persona import persona_save
from annotation.services.prewritten import Columns, prewritten_import, prewritten_query_next
from annotation.services.quality import check_warning, participation_exclude, participation_include
from annotation.services.query import query_discard, query_resend, query_submit
from annotation.services.tournament import bracket_settle, judgment_record_as, match_mark_shown
from kernel.exceptions import ApplicationError
from studies.api import serializers as study_s
from studies.api.views import ModelPermissionsByAction, StudyScopedViewSet, require_role
from studies.links import PROLIFIC_SUFFIX, open_link
from studies.models_audit import AuditOrigin
from studies.selectors.membership import StudyAction, scoped_to_studies


class InvitationAcceptApi(APIView):
    """Accept an invitation: creates (201) or returns (200) the caller's participation, with an API token.
    Idempotent, also for two accepts by one account at the same moment.

    It never signs a browser in (no login CSRF: a page on another site that makes a visitor's browser post
    here cannot replace that visitor's session). Browsers join through the invitation page, which has CSRF;
    a caller signed in by session must send the CSRF token like every session request to the API (else
    403, nothing changed), and gets its participation's API token back."""

    throttle_scope = "annotator"  # docs/api.md, "Request rates"
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        request=s.AcceptInvitationSerializer, responses={200: s.ParticipationSerializer, 201: s.ParticipationSerializer}
    )
    def post(self, request: Request, token: str) -> Response:
        body = s.AcceptInvitationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = request.user if request.user.is_authenticated else None
        # One transaction with the token: an accept that fails at its last write leaves the invitation unused,
        # so the annotator can send it again (a single-use link would otherwise be spent with no token given).
        with transaction.atomic():
            participation, created = invitation_join(
                token=token, annotator=user, consent=body.validated_data["consent"]
            )
            if created and user is None:
                # The account was made by this accept: it has no token yet (one insert, not get_or_create's four).
                token_obj = Token.objects.create(user=participation.annotator)
            else:
                token_obj, _ = Token.objects.get_or_create(user=participation.annotator)
        # A participation this accept created has no persona yet: nothing to read.
        data = s.participation_body(participation, with_persona=not created)
        data["token"] = token_obj.key
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _own_participation(request: Request, pk: int) -> Participation:
    return participation_own(annotator=request.user, participation_id=int(pk))


def _own_query(request: Request, pk: int) -> Query:
    return get_object_or_404(
        Query.objects.select_related("participation__study"), pk=pk, participation__annotator=request.user
    )


def _own_query_shown(request: Request, pk: int) -> Query:
    """The caller's question as the status poll shows it (`s.QUERY_SHOWN`): the participation and study
    that `_own_query` joins in whole are only the ownership filter here, and the poll is the hottest read."""
    query = query_of_annotator(annotator=request.user, query_id=int(pk), fields=s.QUERY_SHOWN)
    if query is None:
        raise Http404
    return query


class ParticipationViewSet(viewsets.GenericViewSet):
    throttle_scope = "annotator"  # docs/api.md, "Request rates"
    lookup_value_regex = r"\d+"  # a non-numeric id in the path is a 404, never a ValueError
    serializer_class = s.ParticipationSerializer
    queryset = Participation.objects.none()  # the schema's path types; requests use get_queryset

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Participation.objects.filter(annotator=self.request.user).select_related("study", "annotator")

    @extend_schema(responses=s.ParticipationSerializer(many=True))
    def list(self, request: Request) -> Response:
        return Response(s.ParticipationSerializer(self.get_queryset(), many=True).data)

    @extend_schema(responses=s.ParticipationSerializer)
    def retrieve(self, request: Request, pk: int) -> Response:
        return Response(s.participation_body(_own_participation(request, pk)))

    @extend_schema(request=s.ScreeningAnswerSerializer, responses=s.ParticipationSerializer)
    @action(detail=True, methods=["post"])
    def screening(self, request: Request, pk: int) -> Response:
        """Answer the study's screening question (shown as `screening` on the participation), which comes
        before the persona. An answer outside the accepted ones ends the participation as screened out
        (`screened_out_at`, `screen_out_reason = screening`): still a 200, the body says so. The same answer
        again returns the participation as it stands; a different one is a 409, as is an answer where the
        question is not asked (see `participation_screen`); an answer not among the choices is a 400."""
        participation = _own_participation(request, pk)
        body = s.ScreeningAnswerSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        participation = participation_screen(participation=participation, answer=body.validated_data["answer"])
        return Response(s.participation_body(participation))

    @extend_schema(request=s.PersonaSerializer, responses=s.PersonaSerializer)
    @action(detail=True, methods=["put"])
    def persona(self, request: Request, pk: int) -> Response:
        participation = _own_participation(request, pk)
        body = s.PersonaSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        persona = persona_save(participation=participation, data=body.validated_data)
        return Response(s.persona_body(persona))

    @extend_schema(request=s.QueryCreateSerializer, responses={201: s.QuerySerializer})
    @action(detail=True, methods=["post"])
    def queries(self, request: Request, pk: int) -> Response:
        participation = _own_participation(request, pk)
        body = s.QueryCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if study_has_prewritten(study=participation.study):
            raise ApplicationError("This study shows pre-written items: ask for the next item instead.", status=409)
        query = query_submit(participation=participation, **body.validated_data)
        return Response(s.query_body(query), status=status.HTTP_201_CREATED)

    @extend_schema(request=s.NextItemSerializer, responses={201: s.QuerySerializer})
    @action(detail=True, methods=["post"], url_path="next-item")
    def next_item(self, request: Request, pk: int) -> Response:
        """A study of pre-written outputs: the next item as a question, its comparisons ready at once (the same
        client token again answers the same question, 200)."""
        participation = _own_participation(request, pk)
        if not study_has_prewritten(study=participation.study):
            raise ApplicationError("This study has no pre-written items: ask a question instead.", status=409)
        body = s.NextItemSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token = body.validated_data["client_token"]
        existed = bool(token) and participation.queries.filter(client_token=token).exists()
        query = prewritten_query_next(participation=participation, client_token=token)
        return Response(s.query_body(query), status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.ParticipationSerializer)
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: int) -> Response:
        """Finish, or stop early: an open question is set aside. With fewer ranked questions than the
        study's `min_ranked_questions` the stop is recorded (`stopped_at`) and no completion code is issued;
        a paused or closed study refuses with 409 (see `participation_finish`)."""
        participation = participation_finish(participation=_own_participation(request, pk))
        return Response(s.participation_body(participation))

    @extend_schema(request=None, responses=s.ParticipationSerializer)
    @action(detail=True, methods=["post"], url_path="resume-link")
    def resume_link(self, request: Request, pk: int) -> Response:
        """Replace the participant's resume link: the participation comes back with the new `resume_url`; the
        old link opens nothing from now on, and every other browser signed in as this participant is signed
        out (an API token keeps working). Refused for a preview or a password account (403), and once the
        participation has ended or its study is closed (410)."""
        participation = participation_resume_link_replace(participation=_own_participation(request, pk))
        if request.auth is None:  # signed in by its session (not a token): that session stays signed in
            update_session_auth_hash(request._request, participation.annotator)
        return Response(s.participation_body(participation))


class QueryViewSet(viewsets.GenericViewSet):
    throttle_scope = "annotator"  # docs/api.md, "Request rates"
    lookup_value_regex = r"\d+"  # a non-numeric id in the path is a 404, never a ValueError
    serializer_class = s.QuerySerializer
    queryset = Query.objects.none()

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Query.objects.filter(participation__annotator=self.request.user)

    @extend_schema(responses=s.QuerySerializer)
    def retrieve(self, request: Request, pk: int) -> Response:
        return Response(s.query_body(_own_query_shown(request, pk)))

    @extend_schema(responses={200: s.MatchSerializer, 204: None})
    @action(detail=True, methods=["get"], url_path="current-match")
    def current_match(self, request: Request, pk: int) -> Response:
        """The next match to answer; 204 when there is none (still generating, or ranked)."""
        # The match with its query, participation and study in one read; the query alone only without one.
        match = match_current_shown(annotator=request.user, query_id=int(pk))
        if match is None:
            # Someone else's question is a 404; of one's own only the key and status are read.
            query = get_object_or_404(Query.objects.only("pk", "status"), pk=pk, participation__annotator=request.user)
            # Ready with nothing to answer: settled (its next match made, or ranked), so a client polling this
            # sees the match or the question's new status instead of 204 for ever.
            if query.status != Query.Status.READY or not bracket_settle(query_id=query.pk):
                return Response(status=status.HTTP_204_NO_CONTENT)
            match = match_current_shown(annotator=request.user, query_id=query.pk)
            if match is None:
                return Response(status=status.HTTP_204_NO_CONTENT)
        # Like the comparison page: refused (403, nothing recorded) while the study is not open.
        match_mark_shown(match=match, participation=match.bracket.query.participation)
        return Response(s.match_body(match))

    @extend_schema(request=None, responses=s.QuerySerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: int) -> Response:
        """Try again: failed work is retried, stuck work is sent to the queue again."""
        return Response(s.query_body(query_resend(query=_own_query(request, pk))))

    @extend_schema(request=None, responses=s.QuerySerializer)
    @action(detail=True, methods=["post"])
    def discard(self, request: Request, pk: int) -> Response:
        """Set the question aside (failed, or still being prepared); it does not count toward the limit."""
        return Response(s.query_body(query_discard(query=_own_query(request, pk))))


class MatchViewSet(viewsets.GenericViewSet):
    throttle_scope = "annotator"  # docs/api.md, "Request rates"
    lookup_value_regex = r"\d+"  # a non-numeric id in the path is a 404, never a ValueError
    serializer_class = s.MatchSerializer
    queryset = Match.objects.none()

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Match.objects.filter(bracket__query__participation__annotator=self.request.user)

    @extend_schema(responses=s.MatchSerializer)
    def retrieve(self, request: Request, pk: int) -> Response:
        """A match; fetching a pending one records when it was shown, like the comparison page, and is
        refused like it (403, nothing recorded) while the study is paused or closed."""
        match = get_object_or_404(
            self.get_queryset().select_related("left", "right", "judgment", "bracket__query__participation__study"),
            pk=pk,
        )
        if match.status == Match.Status.PENDING:
            match_mark_shown(match=match, participation=match.bracket.query.participation)
        return Response(s.match_body(match))

    @extend_schema(request=s.ChoiceSerializer, responses={200: s.JudgmentSerializer, 409: dict})
    @action(detail=True, methods=["post"])
    def choice(self, request: Request, pk: int) -> Response:
        """Answer the match named in the path: left, right, neither, or tie where the study allows ties,
        with an optional comment where the study collects them. Any pending match of one's own may be
        answered (a later round's match exists only once both its entrants are known, and the matches of one
        round are independent, so two answered at the same moment both count). Repeating the same answer is
        harmless; a different answer to an answered match is 409 with the recorded choice."""
        body = s.ChoiceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        named = body.validated_data.get("match")
        if named is not None and named != int(pk):
            raise ApplicationError(
                f"This answer names match {named} but was sent to match {pk}. Nothing was recorded.",
                field="match",
                status=409,
            )
        # Ownership is checked in the service's locked read: nothing is read before it.
        started = timezone.now()
        judgment = judgment_record_as(
            annotator=request.user,
            match_id=int(pk),
            choice=body.validated_data["choice"],
            comment=body.validated_data["comment"],
        )
        notice = check_warning(judgment=judgment, since=started)
        return Response(s.judgment_body(judgment, notice=notice))


# --- admin -----------------------------------------------------------------------------------------
# Who may call these is docs/permissions.md's table: a Django model permission for the action (view
# permissions for reads) and, for the study it touches, a membership whose role allows it; superusers pass
# both. A study the caller is no member of is 404 (lists leave it out); a role too low for the action, 403.


# Under the study's admin paths, /admin/studies/<slug>/...: studies/api/views.py serves the study's design there.
class StudyParticipationsAdminViewSet(StudyScopedViewSet):
    """A study's participations, for its researchers: progress per participation, manual exclusions, and the open
    link with the participants it counts; and, for its owners, the import of pre-written outputs."""

    required_permissions = {
        "progress": ["studies.view_study", "annotation.view_participation"],
        # A manual exclusion is a research decision on the data, not an edit of the participation: the read
        # permission with an owner's or researcher's role (docs/permissions.md).
        "exclusion": ["studies.view_study", "annotation.view_participation"],
        "open_link": ["studies.view_study", "studies.view_invitation"],
        "outputs": ["studies.view_study", "studies.change_study"],
        "metadata": ["studies.view_study"],  # OPTIONS
    }

    @extend_schema(responses=study_s.OpenLinkSerializer)
    @action(detail=True, methods=["get"], url_path="open-link")
    def open_link(self, request: Request, slug: str) -> Response:
        """The study's open link for recruiting platforms (docs/crowd.md), for those who may see invitations."""
        study = self.get_object()
        require_role(request, study, StudyAction.ANALYSE)
        link = open_link(study)
        body = {
            "enabled": study.open_link_enabled,
            "link": link,
            "prolific_link": link + PROLIFIC_SUFFIX if link else "",
            "participant_cap": study.participant_cap,
            "expires_at": study.open_link_expires_at,
            "participants": study_participants_counted(study=study),
        }
        return Response(study_s.OpenLinkSerializer(body).data)

    @extend_schema(request=s.OutputsImportSerializer, responses=s.OutputsImportResultSerializer)
    @action(detail=True, methods=["post"])
    def outputs(self, request: Request, slug: str) -> Response:
        """Import pre-written items and outputs (owners): {"format": "csv"|"jsonl", "content": the file's text,
        "columns": {"item": ..., ...}}, or the file as multipart `file`. As `manage.py import_outputs`: all or
        nothing, idempotent, and a bad file is a 400 naming each line and field in `extra.problems`."""
        study = self.get_object()
        require_role(request, study, StudyAction.MANAGE)
        body = s.OutputsImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        content: bytes | str = data["file"].read() if data.get("file") is not None else data.get("content", "")
        columns = Columns(**{**Columns().__dict__, **data.get("columns", {})})
        result = prewritten_import(study=study, data=content, format=data["format"], columns=columns)
        return Response(s.OutputsImportResultSerializer({**result.__dict__, "changed": result.changed}).data)

    @extend_schema(responses=s.ProgressSerializer(many=True))
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, slug: str) -> Response:
        return Response(s.ProgressSerializer(study_progress(study=self.get_object()), many=True).data)

    @extend_schema(request=s.ExclusionSerializer, responses=s.QualitySerializer)
    @action(detail=True, methods=["post"], url_path=r"participations/(?P<code>[A-Z0-9]{1,16})/exclusion")
    def exclusion(self, request: Request, slug: str, code: str) -> Response:
        """{"reason": ...}: exclude the participation from the analysis; {"excluded": false}: undo. Idempotent."""
        study = self.get_object()
        participation = get_object_or_404(Participation.objects.select_related("study"), study=study, code=code)
        body = s.ExclusionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["excluded"]:
            participation_exclude(
                participation=participation,
                reason=body.validated_data.get("reason", ""),
                by=request.user,
                origin=AuditOrigin.ADMIN_API,
            )
        else:
            participation_include(participation=participation, by=request.user, origin=AuditOrigin.ADMIN_API)
        (quality,) = participation_quality(study=study, code=code)
        return Response(s.QualitySerializer(quality.to_dict()).data)


class FailedCandidateAdminViewSet(viewsets.ReadOnlyModelViewSet):
    """Failed generation jobs, with their reasons (researchers and owners of their study), and retry (owners)."""

    throttle_scope = "admin"  # docs/api.md, "Request rates"
    lookup_value_regex = r"\d+"  # a non-numeric id in the path is a 404, never a ValueError

    permission_classes = [ModelPermissionsByAction]
    required_permissions = {
        "list": ["annotation.view_candidate"],
        "retrieve": ["annotation.view_candidate"],
        "retry": ["annotation.view_candidate", "annotation.change_candidate"],
        "retry_all": ["annotation.view_candidate", "annotation.change_candidate"],
        "metadata": ["annotation.view_candidate"],  # OPTIONS
    }
    serializer_class = s.AdminCandidateSerializer
    queryset = Candidate.objects.none()

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return scoped_to_studies(
            candidates_failed(), user=self.request.user, action=StudyAction.ANALYSE, path="query__participation__study"
        )

    @extend_schema(request=None, responses=s.AdminCandidateSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: int) -> Response:
        candidate = get_object_or_404(
            scoped_to_studies(
                Candidate.objects.select_related("query__participation__study"),
                user=request.user,
                action=StudyAction.SEE,
                path="query__participation__study",
            ),
            pk=pk,
        )
        require_role(request, candidate.query.participation.study, StudyAction.MANAGE)
        return Response(
            s.AdminCandidateSerializer(
                candidate_retry(candidate=candidate, by=request.user, origin=AuditOrigin.ADMIN_API)
            ).data
        )

    @extend_schema(request=None, responses={200: dict})
    @action(detail=False, methods=["post"], url_path="retry-all")
    def retry_all(self, request: Request) -> Response:
        """Queue every failed generation again of the studies the caller owns (optionally one: ?study=SLUG)."""
        failed = scoped_to_studies(
            candidates_failed(), user=request.user, action=StudyAction.MANAGE, path="query__participation__study"
        )
        if slug := request.query_params.get("study"):
            failed = failed.filter(query__participation__study__slug=slug)
        return Response(
            {"queued": candidates_retry_failed(queryset=failed, by=request.user, origin=AuditOrigin.ADMIN_API)}
        )
