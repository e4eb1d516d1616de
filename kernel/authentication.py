"""The API's token authentication: DRF's, with its one read written out as SQL.

Every annotator request through the API authenticates by token, so DRF's `select_related("user").get(key=...)`
is compiled by the ORM on every status poll, match and answer. The statement below is the same read (the token
and its user, every column, by key), held to DRF's in tests/kernel/test_authentication.py."""

from __future__ import annotations

import functools
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework import authentication
from rest_framework.authtoken.models import Token

from kernel.rows import RowShape, column, instances_from_row, model_columns, select_list


@functools.cache
def _token_shape() -> RowShape:
    user = get_user_model()
    return [(Token, "t", model_columns(Token)), (user, "u", model_columns(user))]


@functools.cache
def _token_read_sql() -> str:
    q = connection.ops.quote_name
    user = get_user_model()
    # Names from the models' metadata; the key is a bound parameter.
    return (
        f"SELECT {select_list(_token_shape())} FROM {q(Token._meta.db_table)} t"  # noqa: S608
        f" INNER JOIN {q(user._meta.db_table)} u ON u.{column(user, cast(Any, user._meta.pk).name)} = t.{column(Token, 'user')}"
        f" WHERE t.{column(Token, 'key')} = %s"
    )


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, as DRF's TokenAuthentication (the same header parsing, answers and
    messages), reading the token and its user in one written statement."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        with connection.cursor() as cursor:
            cursor.execute(_token_read_sql(), [key])
            row = cursor.fetchone()
        if row is not None:
            token, user = instances_from_row(row, _token_shape())
            if user.is_active:
                token.user = user
                return user, token
        # No such token, or an inactive account: DRF's own read refuses it, in its words and languages.
        return cast(tuple[Any, Token], super().authenticate_credentials(key))
