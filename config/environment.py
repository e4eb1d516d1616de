"""The settings' reader of the environment: django-environ, strict where its leniency turns a typo into a
different deployment. django-environ reads any word it does not know as false (SECURE_SSL_REDIRECT=ture turns
the HTTPS redirect off, AXES_ENABLED=Tru login throttling) and keeps the spaces around a list's commas
(ALLOWED_HOSTS="a.org, b.org" refuses b.org); it reads a decimal number by dropping what is not a digit
(BACKGROUND_LEASE_S=1e3 is 13) and stops on a word, invalid JSON or a database or cache URL of no known kind with
an error deep in Python or Django that does not name the variable (CONN_MAX_AGE=abc: "invalid literal for
int()"; DATABASE_URL=postgress://...: KeyError or "'postgress' isn't an available database backend"). Here each
of these stops start-up with a message naming the variable (never echoing a URL, which may hold a password), an
empty value means its default, and list items are stripped."""

from __future__ import annotations

import builtins
import json as jsonlib
import math
import os
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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

    def _raw(self, var: str, default: Any) -> str | None:
        """The variable's text, or None for its default (unset or empty); unset with no default stops start-up."""
        raw = self.ENVIRON.get(var)
        if raw is None or not raw.strip():
            if default is self.NOTSET:
                raise ImproperlyConfigured(f"Set the {var} environment variable.")
            return None
        return raw

    def int(self, var: str, default: Any = environ.Env.NOTSET) -> Any:
        raw = self._raw(var, default)
        if raw is None:
            return default
        try:
            return builtins.int(raw.strip())
        except ValueError:
            raise ImproperlyConfigured(f"{var} must be a whole number, not {raw!r}") from None

    def float(self, var: str, default: Any = environ.Env.NOTSET) -> Any:
        raw = self._raw(var, default)
        if raw is None:
            return default
        try:
            value = builtins.float(raw.strip())
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ImproperlyConfigured(f"{var} must be a number (such as 10 or 0.5), not {raw!r}")
        return value

    def json(self, var: str, default: Any = environ.Env.NOTSET) -> Any:
        raw = self._raw(var, default)
        if raw is None:
            return default
        try:
            return jsonlib.loads(raw)
        except ValueError as error:
            raise ImproperlyConfigured(f"{var} is not valid JSON ({error}): {raw!r}") from None

    def db_url(self, var: str = "DATABASE_URL", default: Any = environ.Env.NOTSET, engine: Any = None) -> Any:
        url = (self._raw(var, default) or default).strip()
        # django-environ takes a scheme it does not know for a module's name (postgress:// fails later, in Django).
        if engine is None and urlsplit(url).scheme not in self.DB_SCHEMES:
            raise ImproperlyConfigured(
                f"{var} must be a database URL such as postgres://user:password@host:5432/name or "
                f"sqlite:////absolute/path.sqlite3, not {_kind(url)}"
            )
        return self.db_url_config(url, engine=engine)

    db = db_url

    def cache_url(self, var: str = "CACHE_URL", default: Any = environ.Env.NOTSET, backend: Any = None) -> Any:
        url = (self._raw(var, default) or default).strip()
        try:
            return self.cache_url_config(url, backend=backend)
        except (ImproperlyConfigured, KeyError, ValueError):
            raise ImproperlyConfigured(
                f"{var} must be a cache URL such as redis://host:6379/1 or locmemcache://, not {_kind(url)}"
            ) from None

    cache = cache_url


def _kind(url: str) -> str:
    """What a refused URL is, without the URL itself: it may hold a password."""
    scheme = urlsplit(url).scheme if "://" in url else ""
    return f"a URL of kind {scheme + '://'!r}" if scheme else "a value without a scheme (the part before ://)"


def env_file_path(base_dir: Path) -> Path:
    """The `.env` the settings read: ENV_FILE, else `.env` in the project's folder."""
    return Path(os.environ.get("ENV_FILE") or base_dir / ".env")


def read_env_file(base_dir: Path) -> Path | None:
    """Put the `.env` file's variables into this process's environment, each only where the environment does not
    set it already (a variable set by the operator, compose or systemd wins). The one reader of `.env`: the
    settings call it, and so do the entry points that start before Django (platform/gunicorn.conf.py; the
    worker and beat scripts through `python -m config.environment`), so every process of a host runs on the same
    values (issue 31: a worker with CELERY_QUEUES only in .env consumed every queue)."""
    path = env_file_path(base_dir)
    if not path.is_file():
        return None
    Env.read_env(str(path))
    return path


def _shell_exports(base_dir: Path) -> str:
    """`export NAME='value'` for each variable `.env` adds to the environment, for a shell script to eval."""
    before = dict(os.environ)
    read_env_file(base_dir)
    lines = [f"export {name}={shlex.quote(value)}" for name, value in os.environ.items() if name not in before]
    return "\n".join(sorted(lines))


if __name__ == "__main__":  # python -m config.environment: the shell entry points' reading of .env
    print(_shell_exports(Path(__file__).resolve().parent.parent))
