"""A path under /api/ that no view matches is the API's JSON 404 (docs/api.md: errors are always
`{"message": ..., "extra": ...}`); anywhere else it is Django's 404 page. Tests run with DEBUG off, as production."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nonexistent/",
        "/api/v1/matches/abc/",
        "/api/v1/research/jobs/abc/",
        "/api/v1/admin/failed-candidates/x/",
    ],
)
def test_an_unknown_api_path_is_a_json_404_in_the_api_error_shape(settings, path):
    assert settings.DEBUG is False
    response = Client().get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"message": "Not found.", "extra": {}}


def test_an_unknown_page_outside_the_api_is_still_the_html_404_page(settings):
    assert settings.DEBUG is False
    for path in ("/no-such-page/", "/research/no-such-page/", "/apiary/"):
        response = Client().get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"].startswith("text/html"), path
