"""The database out of reach for a moment (a restart, a failover, a pool with no connection to give): a 503 with
Retry-After instead of a 500. Annotator and research pages get a short "one moment" page that tries again by
itself; the API and JSON callers get the API's error body. Nothing is written by this answer: a write that met
the fault was rolled back with its transaction, and the page sends again only writes that are idempotent."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.utils.translation import gettext as _
from django.views import defaults

# Raised by the driver where Django does not wrap it (psycopg's own, psycopg_pool's PoolTimeout is one).
try:
    from psycopg import InterfaceError as DriverInterfaceError
    from psycopg import OperationalError as DriverOperationalError
except ImportError:  # pragma: no cover - SQLite-only installs
    DriverOperationalError = DriverInterfaceError = OperationalError  # type: ignore[misc,assignment]

UNAVAILABLE = (OperationalError, InterfaceError, DriverOperationalError, DriverInterfaceError)

# Annotator writes the page may send again by itself: each names what it writes (a choice names its match, a
# question carries its client_token), so a second send of one that did reach the database changes nothing.
RESENDABLE_POSTS = frozenset({"annotation:compare", "annotation:ask"})


def database_unavailable(error: BaseException | None) -> bool:
    """Whether `error`, or an exception it was raised from, says the database could not be reached or the
    connection broke (Django's OperationalError/InterfaceError, psycopg's, a pool's time-out)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UNAVAILABLE):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def retry_after_s() -> int:
    return int(settings.DATABASE_UNAVAILABLE_RETRY_AFTER_S)


def message() -> str:
    return _("The study is busy for a moment. Please wait: this page tries again by itself.")


def api_body() -> dict[str, Any]:
    """The API's error body for it: `{"message": ..., "extra": {"retry_after": seconds}}`."""
    return {
        "message": "The database is unavailable for a moment; send the request again.",
        "extra": {"retry_after": retry_after_s()},
    }


def api_response() -> HttpResponse:
    response = JsonResponse(api_body(), status=503)
    response["Retry-After"] = str(retry_after_s())
    return response


def _wants_json(request: HttpRequest) -> bool:
    if request.path_info.startswith("/api/"):
        return True
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def _resend_form(request: HttpRequest) -> list[tuple[str, str]] | None:
    """The posted fields to send again, for an idempotent annotator write; None for anything else."""
    if request.method != "POST":
        return None
    match = getattr(request, "resolver_match", None)
    if match is None or match.view_name not in RESENDABLE_POSTS:
        return None
    try:
        return [(key, value) for key, values in request.POST.lists() for value in values]
    except Exception:  # noqa: BLE001 - a body that cannot be read again is not sent again
        return None


def page_response(request: HttpRequest) -> HttpResponse:
    """The "one moment" page. Rendered without the request's context processors: they read the session and the
    messages, which are in the database that is not there."""
    seconds = retry_after_s()
    resend = _resend_form(request)
    context = {
        "message": message(),
        "retry_after": seconds,
        # GET and HEAD load the page again; an idempotent POST is sent again; any other write is not.
        "reload": request.method in ("GET", "HEAD"),
        "resend": resend,
        "action": request.get_full_path(),
    }
    response = HttpResponse(loader.render_to_string("one_moment.html", context), status=503)
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


def response_for(request: HttpRequest) -> HttpResponse:
    return api_response() if _wants_json(request) else page_response(request)


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    """`handler500`: Django calls it while handling the exception (in a view or in any middleware), so the
    exception is the one being handled. The database out of reach: the 503 of this module; anything else:
    Django's own 500 page."""
    if database_unavailable(sys.exception()):
        return response_for(request)
    return defaults.server_error(request, template_name)
