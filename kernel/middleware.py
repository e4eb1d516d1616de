"""Refuse, before any view runs, a request whose path, query string, headers or cookies cannot be stored."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from kernel.storable import unstorable_text


def _problem(request: HttpRequest) -> str | None:
    if problem := unstorable_text(request.path):
        return f"The address {problem}."
    for key, values in request.GET.lists():
        for text in (key, *values):
            if problem := unstorable_text(text):
                return f"The query parameter {key!r} {problem}."
    for name, value in request.META.items():
        if name.startswith("HTTP_") and isinstance(value, str) and (problem := unstorable_text(value)):
            return f"The {name[5:].replace('_', '-').title()} header {problem}."
    return None


class RejectUnstorableInputMiddleware:
    """A NUL character (or lone surrogate) in a path, query string, header or cookie is a 400 naming the
    part, never a database error: every lookup by slug, token, id, session key or API token would carry it
    into PostgreSQL, which refuses NUL in text. Bodies are checked where they are parsed (kernel.parsers,
    DRF's and Django's form fields)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = _problem(request)
        if problem is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"message": problem, "extra": {}}, status=400)
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
