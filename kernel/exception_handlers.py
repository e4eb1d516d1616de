"""One handler maps domain errors and DRF errors to `{"message": ..., "extra": {...}}` responses."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from kernel.exceptions import ApplicationError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        extra = dict(exc.extra)
        if exc.field:
            extra.setdefault("fields", {exc.field: [exc.message]})
        return Response({"message": exc.message, "extra": extra}, status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = response.data
        fields = detail if isinstance(detail, dict) else {"non_field_errors": detail}
        response.data = {"message": "Validation error", "extra": {"fields": fields}}
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        response.data = {"message": str(detail), "extra": {}}
    return response
