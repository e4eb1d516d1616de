"""Login throttling (django-axes) and the API's request rates (DRF): the client address the deployment sees,
the lockout page, and the throttle the API views name their scope for.

Behind a reverse proxy every request comes from the proxy's address, so a lockout by username and IP
would lock a username out for everyone. With `TRUSTED_PROXY_COUNT` trusted proxies in front of the app
(0 by default: the socket's address is the client's), the client is the address the outermost trusted
proxy appended to X-Forwarded-For: entries further left are the client's own claim and are not trusted.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework import throttling
from rest_framework.settings import api_settings


def client_ip(request: HttpRequest) -> str | None:
    """The client address for throttling (AXES_CLIENT_IP_CALLABLE)."""
    remote: str | None = request.META.get("REMOTE_ADDR")
    proxies = int(settings.TRUSTED_PROXY_COUNT)
    if proxies <= 0:
        return remote
    header: str = request.META.get("HTTP_X_FORWARDED_FOR") or ""
    forwarded = [part.strip() for part in header.split(",") if part.strip()]
    if len(forwarded) < proxies:
        return forwarded[0] if forwarded else remote
    return forwarded[-proxies]


def lockout_response(request: HttpRequest, original_response: Any = None, credentials: Any = None) -> HttpResponse:
    """A plain page (429, with Retry-After) that says when to try again (AXES_LOCKOUT_CALLABLE)."""
    cool_off = settings.AXES_COOLOFF_TIME
    seconds = int(cool_off.total_seconds()) if isinstance(cool_off, timedelta) else None
    response = render(
        request,
        "lockout.html",
        {
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "minutes": math.ceil(seconds / 60) if seconds else None,
        },
        status=settings.AXES_HTTP_RESPONSE_CODE,
    )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


class ScopedRateThrottle(throttling.ScopedRateThrottle):
    """DRF's scoped throttle (a view's `throttle_scope`, its rate in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
    docs/api.md "Request rates"), with two differences. The rate is read at each request, not once when DRF's
    class is imported, so a changed setting applies. A caller who is not signed in is counted by the client
    address that login throttling uses (`client_ip`, TRUSTED_PROXY_COUNT): DRF's own reading takes the whole
    X-Forwarded-For header, which a client writes itself and so could change at every request. The counts
    live in the default cache (CACHE_URL), which every web process must share: `check --deploy` warns of a
    cache in one process's memory (satisfy.W003)."""

    def get_rate(self) -> str | None:
        rates = api_settings.DEFAULT_THROTTLE_RATES
        if self.scope not in rates:
            raise ImproperlyConfigured(f"No request rate is set for the API throttle scope {self.scope!r}.")
        rate = rates[self.scope]
        return None if rate is None else str(rate)

    def get_ident(self, request: Any) -> str:
        return client_ip(request) or ""
