"""The API's one exception handler: a Django ValidationError raised while serving a request is a 400 with its
fields, in the API's error shape, never a 500."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from studies.models import PromptTemplate

pytestmark = pytest.mark.django_db


class CleansATemplate(APIView):
    """What a service does when it validates a model before saving it."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    def post(self, request):  # type: ignore[no-untyped-def]
        template = PromptTemplate(name="not a slug!", version=1, body="{query}", persona_block="-")
        template.full_clean()
        return Response({"saved": True})


class RaisesAPlainOne(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    def post(self, request):  # type: ignore[no-untyped-def]
        raise ValidationError("The window closed at noon.")


def test_a_model_validation_error_is_a_400_naming_the_field():
    response = CleansATemplate.as_view()(APIRequestFactory().post("/api/v1/x/", {}, format="json"))
    assert response.status_code == 400
    assert response.data["message"] == "Validation error"
    assert set(response.data["extra"]["fields"]) == {"name"}
    assert "slug" in str(response.data["extra"]["fields"]["name"][0]).lower()


def test_a_validation_error_without_a_field_is_a_400_too():
    response = RaisesAPlainOne.as_view()(APIRequestFactory().post("/api/v1/x/", {}, format="json"))
    assert response.status_code == 400
    assert response.data["extra"]["fields"] == {"non_field_errors": ["The window closed at noon."]}
