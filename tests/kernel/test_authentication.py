"""The API's token authentication (kernel/authentication.py) reads the token and its user in one written
statement (`kernel.queries.token_with_user`): it must load what DRF's ORM read loads, answer a wrong, missing
or inactive account as DRF does, and an annotator's API request must reach their own data through it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import authentication as drf
from rest_framework import exceptions
from rest_framework.authtoken.models import Token
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from kernel.authentication import TokenAuthentication

pytestmark = pytest.mark.django_db


def columns(instance: object) -> dict[str, object]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_the_token_and_its_user_are_what_drf_reads_in_one_statement() -> None:
    user = get_user_model().objects.create_user(
        username="ana", email="ana@example.org", first_name="Ana", last_name="Lima", password="x-long-password-1"
    )
    token = Token.objects.create(user=user)

    theirs_user, theirs_token = drf.TokenAuthentication().authenticate_credentials(token.key)
    with CaptureQueriesContext(connection) as ctx:
        ours_user, ours_token = TokenAuthentication().authenticate_credentials(token.key)
        # Everything an API view reads of them is loaded: no statement after the one.
        assert ours_token.user is ours_user
        assert columns(ours_user) == columns(theirs_user)
        assert columns(ours_token) == columns(theirs_token)
    assert len(ctx.captured_queries) == 1
    assert ours_user.is_authenticated and ours_user.pk == user.pk
    assert ours_user.check_password("x-long-password-1")


def test_a_wrong_key_and_an_inactive_account_are_refused_with_drfs_words() -> None:
    user = get_user_model().objects.create_user(username="bo")
    token = Token.objects.create(user=user)
    for key in ("0" * 40, token.key[:-1], ""):
        with pytest.raises(exceptions.AuthenticationFailed) as ours:
            TokenAuthentication().authenticate_credentials(key)
        with pytest.raises(exceptions.AuthenticationFailed) as theirs:
            drf.TokenAuthentication().authenticate_credentials(key)
        assert str(ours.value.detail) == str(theirs.value.detail) == "Invalid token."
    user.is_active = False
    user.save()
    with pytest.raises(exceptions.AuthenticationFailed) as ours:
        TokenAuthentication().authenticate_credentials(token.key)
    assert str(ours.value.detail) == "User inactive or deleted."


def test_the_api_answers_by_token_through_it() -> None:
    from tests.annotation.factories import StudyFactory, join

    study = StudyFactory()
    participation = join(study)
    token = Token.objects.create(user=participation.annotator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    own = client.get(f"/api/v1/participations/{participation.pk}/")
    assert own.status_code == 200 and own.json()["id"] == participation.pk
    client.credentials(HTTP_AUTHORIZATION="Token " + "f" * 40)
    refused = client.get(f"/api/v1/participations/{participation.pk}/")
    # 403, not 401: session authentication comes first and names no scheme to retry with (DRF's rule).
    assert refused.status_code == 403 and refused.json()["message"] == "Invalid token."
    assert TokenAuthentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES
    assert drf.TokenAuthentication not in api_settings.DEFAULT_AUTHENTICATION_CLASSES
