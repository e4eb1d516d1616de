"""One handler maps domain errors and DRF errors to `{"message": ..., "extra": {...}}` responses (and the database
out of reach to a 503 with Retry-After: kernel/unavailable.py); the URLconf's 404 handler answers a path under
/api/ that no view matches in the same shape."""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from kernel import unavailable
from kernel.exceptions import ApplicationError


def error_body(message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's error shape: `{"message": ..., "extra": {...}}`."""
    return {"message": message, "extra": dict(extra or {})}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if unavailable.database_unavailable(exc):
        # A database blip: try again shortly (kernel/unavailable.py), not a 500.
        return Response(unavailable.api_body(), status=503, headers={"Retry-After": str(unavailable.retry_after_s())})
    if isinstance(exc, ApplicationError):
        extra = dict(exc.extra)
        if exc.field:
            extra.setdefault("fields", {exc.field: [exc.message]})
        return Response(error_body(exc.message, extra), status=exc.status)
    if isinstance(exc, DjangoValidationError):
        # A model's full_clean() or a validator run inside a service: bad input, a 400 with its fields, never a 500
        # (HackSoft's handler does the same).
        exc = exceptions.ValidationError(as_serializer_error(exc))
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
        response.data = error_body("Validation error", {"fields": fields})
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        # Past a request rate (docs/api.md, "Request rates"): DRF's Retry-After header, and the same in the body.
        wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
        response.data = error_body(str(detail), {"retry_after_s": math.ceil(wait)} if wait is not None else None)
    return response


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """`handler404`: a URL no view matches (`/api/v1/nonexistent/`, a non-numeric id) is the API's JSON 404 under
    /api/, as a DRF view's own 404 is, and Django's 404 page everywhere else."""
    if request.path_info.startswith("/api/"):
        return JsonResponse(error_body(str(exceptions.NotFound.default_detail)), status=404)
    return defaults.page_not_found(request, exception)
