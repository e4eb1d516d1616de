"""Settings for the test suite: real PostgreSQL and Redis on this machine, eager tasks by default."""

import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("SESSION_COOKIE_SECURE", "false")
os.environ.setdefault("CSRF_COOKIE_SECURE", "false")
os.environ.setdefault("MANIFEST_STATIC", "false")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")

from config.settings.production import *  # noqa: E402,F403
from config.settings.production import STATIC_ROOT  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]

Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
