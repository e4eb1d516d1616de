"""The API's token authentication: DRF's, with its one read written out (`kernel.queries.token_with_user`)."""

from __future__ import annotations

from typing import Any, cast

from rest_framework import authentication
from rest_framework.authtoken.models import Token

from kernel.queries import token_with_user


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, as DRF's TokenAuthentication (the same header parsing, answers and
    messages), reading the token and its user in one written statement."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        token = token_with_user(key=key)
        if token is not None and token.user.is_active:
            return token.user, token
        # No such token, or an inactive account: DRF's own read refuses it, in its words and languages.
        return cast(tuple[Any, Token], super().authenticate_credentials(key))
