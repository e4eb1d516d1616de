"""The site's addresses and one view that fails, for the error-report test (tests/platform/test_sentry.py)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import urlpatterns as site


def boom(request: HttpRequest, token: str) -> HttpResponse:
    raise RuntimeError(f"a view failed on /join/{token}/")


urlpatterns = [path("join/<str:token>/boom/", boom), *site]
