"""Settings for the test suite: real PostgreSQL and Redis on this machine, eager tasks by default."""

import os
from pathlib import Path

# Never a developer's .env (docker compose's, from platform/env.example: Redis on the host "redis", DEBUG=false):
# read, it failed every test that touches the cache. The environment alone overrides what follows (bin/test).
os.environ.setdefault("ENV_FILE", os.devnull)
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("SESSION_COOKIE_SECURE", "false")
os.environ.setdefault("CSRF_COOKIE_SECURE", "false")
os.environ.setdefault("MANIFEST_STATIC", "false")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
# The API's request rates are off: the fuzzer and the journeys send one account's requests far faster than a
# person does. tests/security/test_headers_and_limits.py sets low rates to see the 429s.
for _scope in ("ANNOTATOR", "RESEARCH", "ADMIN"):
    os.environ.setdefault(f"API_THROTTLE_{_scope}", "off")

from config.settings.production import *  # noqa: E402,F403
from config.settings.production import STATIC_ROOT  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]

Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing

# bin/test runs the suite in parallel (pytest-xdist): test processes gw0, gw1, ... share the Redis databases
# of CELERY_BROKER_URL and TEST_WORKER_BROKER_URL, so each one's Celery keys (queues, unacked messages,
# bindings, fanout channels) start with its own prefix, and a test that flushes its broker
# (tests/integration/worker.py) deletes only that prefix's keys. The Celery workers a test starts inherit
# PYTEST_XDIST_WORKER (or PYTEST_VERSION), and so the prefix. Empty for bench/. Only Redis reads the option
# (a test process on Redis may send to a worker on RabbitMQ: tests/integration).
# A plain pytest run (one process: pytest sets PYTEST_VERSION) gets "pytest:", so no test run ever flushes
# a whole Redis database it shares with someone else; bench/ scripts run outside pytest with no prefix.
if os.environ.get("PYTEST_XDIST_WORKER"):
    TEST_REDIS_KEY_PREFIX = f"{os.environ['PYTEST_XDIST_WORKER']}:"
elif os.environ.get("PYTEST_VERSION"):
    TEST_REDIS_KEY_PREFIX = "pytest:"
else:
    TEST_REDIS_KEY_PREFIX = ""
if TEST_REDIS_KEY_PREFIX:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **(globals().get("CELERY_BROKER_TRANSPORT_OPTIONS") or {}),
        "global_keyprefix": TEST_REDIS_KEY_PREFIX,
    }
