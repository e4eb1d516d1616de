"""The settings' reader of the environment: django-environ, strict where its leniency turns a typo into a
different deployment. django-environ reads any word it does not know as false (SECURE_SSL_REDIRECT=ture turns
the HTTPS redirect off, AXES_ENABLED=Tru login throttling) and keeps the spaces around a list's commas
(ALLOWED_HOSTS="a.org, b.org" refuses b.org). Here an unknown boolean stops start-up naming the variable, an
empty one means its default, and list items are stripped."""

from __future__ import annotations

import builtins
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

TRUE = frozenset({"true", "yes", "on", "1", "y"})
FALSE = frozenset({"false", "no", "off", "0", "n"})


class Env(environ.Env):
    def bool(self, var: str, default: Any = environ.Env.NOTSET) -> bool:
        raw = self.ENVIRON.get(var)
        if raw is None or not raw.strip():
            if default is self.NOTSET:
                raise ImproperlyConfigured(f"Set the {var} environment variable (true or false).")
            return builtins.bool(default)
        word = raw.strip().lower()
        if word in TRUE:
            return True
        if word in FALSE:
            return False
        raise ImproperlyConfigured(f"{var} must be true or false (or 1/0, yes/no, on/off), not {raw!r}")

    def list(self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET) -> builtins.list[Any]:
        values = super().list(var, cast=cast, default=default)
        return [v.strip() if isinstance(v, str) else v for v in values if not (isinstance(v, str) and not v.strip())]
