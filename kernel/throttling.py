"""Login throttling (django-axes): the client address the deployment sees, and the lockout page.

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
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """The client address for throttling (AXES_CLIENT_IP_CALLABLE)."""
    remote: str | None = request.META.get("REMOTE_ADDR")
    proxies = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0))
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
