"""The API's documentation page (Swagger UI, from drf-spectacular's sidecar files) under the site's
Content-Security-Policy (docs/permissions.md, "Headers and limits").

drf-spectacular's split view serves Swagger UI's start-up script as a second request to the same URL, so the
page runs only script files. Redoc is not offered: its bundle adds style elements before any nonce can be
given to it and loads its logo from a CDN, both of which the policy refuses; /api/redoc/ sends to this page."""

from __future__ import annotations

from drf_spectacular.views import SpectacularSwaggerSplitView


class SwaggerView(SpectacularSwaggerSplitView):
    template_name = "api_docs/swagger_ui.html"  # drf-spectacular's, with its inline <style> in static/css
