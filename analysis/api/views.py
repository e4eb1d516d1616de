"""Researcher API: the comparison table, background jobs (exports, reports, stress tests), their files and
scoring runs. Every study is scoped to the caller's memberships (analysis/permissions.py): another study
is 404, a role too low for the action is 403."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, renderers, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import services
from analysis.downloads import stored_file_response
from analysis.models import ResearchJob
from analysis.permissions import IsResearcher, research_job, research_job_file, research_study
from analysis.selectors import comparison_rows_kept
from analysis.serializers import job_json
from kernel.storable import json_problem
from scoring.services import scoring_run_start
from studies.models_audit import AuditOrigin
from studies.selectors.membership import StudyAction

T = TypeVar("T")


def _scoped(lookup: Callable[[], T]) -> T:
    """Run a permission lookup, keeping its message in the API's error shape."""
    try:
        return lookup()
    except Http404 as error:
        raise exceptions.NotFound(str(error) or "Not found.") from error
    except DjangoPermissionDenied as error:
        raise exceptions.PermissionDenied(str(error) or None) from error


class JobCreateSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ResearchJob.Kind.choices)
    options = serializers.DictField(required=False, default=dict)

    def validate_options(self, value: dict[str, Any]) -> dict[str, Any]:
        # Stored as jsonb: no NUL or lone surrogate in a string or key, no infinity, no runaway nesting.
        if problem := json_problem(value, where="options"):
            raise serializers.ValidationError(f"{problem[0].upper()}{problem[1:]}.")
        return value


class ScoringRunSerializer(serializers.Serializer):
    metrics = serializers.ListField(child=serializers.CharField(), min_length=1)
    reference = serializers.ChoiceField(choices=["titles", "abstracts"], default="titles")
    source = serializers.ChoiceField(choices=["abstracts", "titles_and_abstracts"], default="abstracts")  # type: ignore[assignment]


class ComparisonsApi(APIView):
    """One row per answered match with both sides' metric scores (docs/comparison-table.md)."""

    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, slug: str) -> Response:
        study = _scoped(lambda: research_study(user=request.user, slug=slug))
        # ?exclude=checks,speed,manual (or none); default the study's rule. Attention checks are never rows.
        rows, exclusion = comparison_rows_kept(study=study, exclude=request.query_params.get("exclude"))
        return Response({"study": study.slug, "exclusion": exclusion, "rows": rows})


class JobsApi(APIView):
    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]

    @extend_schema(responses={200: list[dict]})  # a list of jobs (the schema said one object: the fuzzer saw)
    def get(self, request: Request, slug: str) -> Response:
        study = _scoped(lambda: research_study(user=request.user, slug=slug))
        return Response([job_json(job) for job in study.research_jobs.all()[:100]])

    @extend_schema(request=JobCreateSerializer, responses={201: dict, 200: dict})
    def post(self, request: Request, slug: str) -> Response:
        study = _scoped(lambda: research_study(user=request.user, slug=slug, action=StudyAction.ANALYSE))
        body = JobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job, created = services.research_job_request(
            study=study,
            kind=body.validated_data["kind"],
            options=body.validated_data["options"],
            by=request.user,
            origin=AuditOrigin.RESEARCH_API,
        )
        job.refresh_from_db()
        # The same job asked for again while it is queued or running: that job, 200 (a retry costs no run).
        return Response(job_json(job), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class JobApi(APIView):
    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(job_json(_scoped(lambda: research_job(user=request.user, job_id=job_id))))


class JobCancelApi(APIView):
    """Cancel a queued or running job (researchers who may analyse its study): the job, failed with who
    cancelled it; a finished one unchanged (idempotent)."""

    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, job_id: int) -> Response:
        job = _scoped(lambda: research_job(user=request.user, job_id=job_id, action=StudyAction.ANALYSE))
        return Response(
            job_json(services.research_job_cancel(job=job, by=request.user, origin=AuditOrigin.RESEARCH_API))
        )


class ScoringRunsApi(APIView):
    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]

    @extend_schema(request=ScoringRunSerializer, responses={201: dict})
    def post(self, request: Request, slug: str) -> Response:
        study = _scoped(lambda: research_study(user=request.user, slug=slug, action=StudyAction.ANALYSE))
        body = ScoringRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = scoring_run_start(study=study, by=request.user, origin=AuditOrigin.RESEARCH_API, **body.validated_data)
        run.refresh_from_db()
        return Response(
            {"id": run.pk, "status": run.status, "total": run.total, "done": run.done, "metrics": run.metrics},
            status=status.HTTP_201_CREATED,
        )


class AnyFileRenderer(renderers.BaseRenderer):
    """Lets a download be asked for with any Accept header (`text/csv`, `application/octet-stream`): the
    file is sent as it is; an error is still the usual JSON body."""

    media_type = "*/*"
    format = "file"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return data if isinstance(data, bytes) else json.dumps(data).encode()


class JobFileApi(APIView):
    """Download one output file of a finished job (an export, the report): `Authorization: Token KEY`."""

    throttle_scope = "research"  # docs/api.md, "Request rates"
    permission_classes = [IsResearcher]
    renderer_classes = [renderers.JSONRenderer, AnyFileRenderer]

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 404: dict})
    def get(self, request: Request, job_id: int, name: str) -> HttpResponseBase:
        storage, key = _scoped(lambda: research_job_file(user=request.user, job_id=job_id, name=name))
        response = _scoped(lambda: stored_file_response(storage, key, name, as_attachment=True))
        services.research_job_file_downloaded(
            job_id=job_id, name=name, by=request.user, origin=AuditOrigin.RESEARCH_API
        )
        return response
