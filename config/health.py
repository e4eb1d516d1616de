"""The health endpoint a load balancer or container health check calls: /healthz/ answers on any host name.

A health check calls the server by an address of its own (127.0.0.1, a container name), which ALLOWED_HOSTS
rightly refuses (400 DisallowedHost), and over plain HTTP, which SECURE_SSL_REDIRECT sends to https. So
HealthzMiddleware, first in MIDDLEWARE, answers that one path before anything reads the Host header; every
other path still goes through ALLOWED_HOSTS and the HTTPS redirect. It says only that the process serves
requests and reaches its database: nothing a caller could learn from it but that."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

PATH = "/healthz/"


def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # noqa: BLE001 - whatever the database raises, the answer is "not healthy"
        return JsonResponse({"status": "database unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


class HealthzMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == PATH and request.method in ("GET", "HEAD"):
            return healthz(request)
        return self.get_response(request)
