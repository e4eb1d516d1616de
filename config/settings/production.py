"""Production: what gunicorn and the Celery worker load. Safe defaults; SECRET_KEY must be set, and not to a
placeholder.

`python manage.py check --deploy` is clean with DEBUG=false, SECRET_KEY, DATABASE_URL,
CELERY_BROKER_URL, CACHE_URL and ALLOWED_HOSTS set (`platform/env.example`).
"""

from urllib.parse import unquote, urlsplit

import environ

from config.settings.base import *  # noqa: F403
from config.settings.base import STORAGES, env

DEBUG = env.bool("DEBUG", default=False)

# SECRET_KEY signs sessions, password-reset links and CSRF tokens, and keys the crowd pseudonyms
# (docs/crowd.md): a key anyone can read in this repository lets them sign in as anyone. Start-up refuses
# platform/env.example's placeholder, any "change me" text, Django's startproject keys, and keys too short or
# too plain to guess hard (Django's own rule in `check --deploy`, W009: 50 characters, 5 different ones).
GENERATE_SECRET_KEY = 'python -c "import secrets; print(secrets.token_urlsafe(50))"'  # noqa: S105  # a command
PLACEHOLDER_WORDS = ("change-me", "changeme", "change_me", "replace-me", "replaceme", "your-secret", "placeholder")


def _placeholder(value: str) -> bool:
    """A value written to be replaced: platform/env.example's, or any "change me" text."""
    lowered = value.strip().lower()
    return any(word in lowered for word in PLACEHOLDER_WORDS)


def _secret_key_problem(key: str) -> str:
    """Why `key` may not sign a production session ("" when it may)."""
    if not key.strip():
        return "is empty"
    if _placeholder(key):
        return "is a placeholder (platform/env.example's, or another 'change me' text)"
    if key.startswith("django-insecure-"):
        return "is a key Django's startproject wrote (django-insecure-...), meant for development only"
    if len(key) < 50:
        return f"is {len(key)} characters long; it must be at least 50"
    if len(set(key)) < 5:
        return "has fewer than 5 different characters"
    return ""


_key = env.str("SECRET_KEY", default="")
if not _key and DEBUG:
    SECRET_KEY = "insecure-dev-key-change-me"  # noqa: S105  # DEBUG=true with no key: the development default
elif not _key:
    raise environ.ImproperlyConfigured(
        f"Set SECRET_KEY (or DEBUG=true for the embedded development default). Generate one with: {GENERATE_SECRET_KEY}"
    )
elif _problem := _secret_key_problem(_key):
    raise environ.ImproperlyConfigured(
        f"SECRET_KEY {_problem}: this server refuses to start with it. Set SECRET_KEY to a new random value of at "
        f"least 50 characters, generated with: {GENERATE_SECRET_KEY}"
    )
else:
    SECRET_KEY = _key


# The other secrets platform/env.example names: a placeholder in any of them stops start-up too. (The
# password in a server's URL, so that a placeholder left in DATABASE_URL is caught as well as SECRET_KEY's.)
def _url_password(url: str) -> str:
    try:
        return unquote(urlsplit(url).password or "")
    except ValueError:  # not a URL the settings could use either; base.py or the client names that problem
        return ""


_URLS = ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")
_secrets = {f"The password in {name}": _url_password(env.str(name, default="")) for name in _URLS}
_secrets |= {name: env.str(name, default="") for name in ("LLM_API_KEY", "AWS_SECRET_ACCESS_KEY", "OPENALEX_API_KEY")}
for _what, _value in _secrets.items():
    if _placeholder(_value):
        raise environ.ImproperlyConfigured(
            f"{_what} is a placeholder (a 'change me' text): set the real one. A new random one can be generated "
            f"with: {GENERATE_SECRET_KEY}"
        )

# Safe production defaults; DEBUG=true relaxes them.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)

if not DEBUG and env.bool("MANIFEST_STATIC", default=True):
    STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
