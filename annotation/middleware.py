"""Annotator pages in their study's language: every page of the annotator routes (`annotation:*`), its
notices and its 400/403/404/500 pages are rendered with the study's `language` active. Research and admin
pages, and the API, stay in the default language (docs/languages.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import translation

from annotation.selectors.study import study_language
from kernel.unavailable import database_unavailable

# Each study's language as this process last read it (by slug), for the pages it renders while the database is
# out of reach; bounded, the oldest forgotten first.
_last_known: dict[str, str] = {}
_LAST_KNOWN_MAX = 1000
_last_known_lock = threading.Lock()  # gunicorn's threads share it


def _remember(slug: str, language: str) -> None:
    if _last_known.get(slug) == language:
        return
    with _last_known_lock:
        _last_known.pop(slug, None)
        if len(_last_known) >= _LAST_KNOWN_MAX:
            _last_known.pop(next(iter(_last_known)))
        _last_known[slug] = language


class StudyLanguageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Activation is per thread: whatever a view activated ends with its request, so the next request
        # served by this thread (a researcher's page, say) starts in the default language again.
        try:
            response = self.get_response(request)
            language = getattr(request, "study_language", None)
            if language:
                response.headers.setdefault("Content-Language", language)
            return response
        finally:
            translation.deactivate()

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], view_args: Any, view_kwargs: dict[str, Any]
    ) -> None:
        match = request.resolver_match
        if match is None or match.namespace != "annotation":
            return
        token = view_kwargs.get("token")
        # The same URL keyword names three secrets: an invitation's, an open link's and a resume link's.
        by_route = {"open-join": {"open_link_token": token}, "resume": {"resume_token": token}}
        slug = view_kwargs.get("slug")
        try:
            language = study_language(slug=slug, **by_route.get(match.url_name or "", {"invitation_token": token}))
        except Exception as error:
            if not database_unavailable(error):
                raise
            # The database out of reach: the "one moment" page (kernel/unavailable.py) is still in the study's
            # language, as this process last read it, or else in the browser's.
            language = _last_known.get(slug or "") or translation.get_language_from_request(request)
            translation.activate(language)
            raise
        if slug and language:
            _remember(slug, language)
        if language:
            translation.activate(language)
            request.study_language = language  # type: ignore[attr-defined]
            request.LANGUAGE_CODE = language
