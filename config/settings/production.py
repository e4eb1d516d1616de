"""Production: what gunicorn and the Celery worker load. Safe defaults; SECRET_KEY must be set.

`python manage.py check --deploy` is clean with DEBUG=false, SECRET_KEY, DATABASE_URL,
CELERY_BROKER_URL and ALLOWED_HOSTS set (`platform/env.example`).
"""

import environ

from config.settings.base import *  # noqa: F403
from config.settings.base import STORAGES, env

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="insecure-dev-key-change-me" if DEBUG else "")
if not SECRET_KEY:
    raise environ.ImproperlyConfigured("Set SECRET_KEY (or DEBUG=true for the embedded development default).")

# Safe production defaults; DEBUG=true relaxes them.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)

if not DEBUG and env.bool("MANIFEST_STATIC", default=True):
    STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
