"""Researcher API: the comparison table, background jobs (exports, reports, stress tests) and scoring runs."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import services
from analysis.models import ResearchJob
from analysis.permissions import IsResearcher
from analysis.selectors import comparison_rows
from analysis.serializers import job_json
from annotation.models import Study
from kernel.storable import json_problem
from scoring.services import scoring_run_start


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

    permission_classes = [IsResearcher]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        return Response({"study": study.slug, "rows": comparison_rows(study=study)})


class JobsApi(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(responses={200: list[dict]})  # a list of jobs (the schema said one object: the fuzzer saw)
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        return Response([job_json(job) for job in study.research_jobs.all()[:100]])

    @extend_schema(request=JobCreateSerializer, responses={201: dict})
    def post(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        body = JobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.research_job_start(
            study=study, kind=body.validated_data["kind"], options=body.validated_data["options"], by=request.user
        )
        job.refresh_from_db()
        return Response(job_json(job), status=status.HTTP_201_CREATED)


class JobApi(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(job_json(get_object_or_404(ResearchJob, pk=job_id)))


class ScoringRunsApi(APIView):
    permission_classes = [IsResearcher]

    @extend_schema(request=ScoringRunSerializer, responses={201: dict})
    def post(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        body = ScoringRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = scoring_run_start(study=study, by=request.user, **body.validated_data)
        run.refresh_from_db()
        return Response(
            {"id": run.pk, "status": run.status, "total": run.total, "done": run.done, "metrics": run.metrics},
            status=status.HTTP_201_CREATED,
        )
