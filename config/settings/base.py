"""Settings every environment shares, read from the environment in one place (django-environ).

Embedded defaults run the whole platform on one machine with no servers: an SQLite file and
kombu's filesystem transport for the Celery broker. `local.py` (management commands, `bin/demo`)
and `production.py` (gunicorn, Celery) add what differs; `test.py` is the test suite's.
"""

import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from config.environment import Env, read_env_file

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"

env = Env()  # django-environ, strict about booleans, numbers, JSON, URLs and list items (config/environment.py)
read_env_file(BASE_DIR)  # .env (ENV_FILE), under what the environment sets; the same for every entry point

# local.py and production.py decide DEBUG and SECRET_KEY and the security settings that follow from DEBUG.
DEBUG = False
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "studies",
    "annotation",
    "corpus",
    "scoring",
    "analysis",
    "django_prometheus",  # request and database metrics (config/monitoring.py, docs/deploy.md "Monitoring")
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "kernel.request_id.RequestIdMiddleware",  # X-Request-ID in, out and on every log line (kernel/request_id.py)
    # Content-Security-Policy on every response, /healthz/'s too (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "config.health.HealthzMiddleware",  # /healthz/ on any host name, before ALLOWED_HOSTS (config/health.py)
    "config.monitoring.MetricsMiddleware",  # /metrics likewise, with METRICS_TOKEN (config/monitoring.py)
    "django.middleware.security.SecurityMiddleware",
    "kernel.middleware.RejectUnstorableInputMiddleware",  # NUL in a path, query or header: 400, not a 500
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "annotation.middleware.StudyLanguageMiddleware",  # annotator pages in the study's language (docs/languages.md)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
# A connection is health-checked before a request (or task) uses it: one the server ended (a restart) is
# replaced instead of failing the first request that meets it. With the pool, the pool checks it on handing it out.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# django-prometheus's PostgreSQL wrapper counts statements and errors (it works with the pool below); METRICS_DB=false
# keeps Django's own.
if env.bool("METRICS_DB", default=True) and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "django_prometheus.db.backends.postgresql"
# PostgreSQL connections come from a pool in each process (Django's, psycopg_pool; docs/deploy.md, "Database
# connections"): a request or task takes one for its duration and gives it back, so a process holds at most
# DATABASE_POOL_MAX_SIZE connections however many threads it runs, and the server's total is the sum over
# processes. Give a web process as many as its threads (GUNICORN_THREADS, 4) and a Celery process 2 (a task
# and its lease heartbeat). A request waits up to DATABASE_POOL_TIMEOUT_S for one (all in use, or the server
# restarting) before it is answered 503 (kernel/unavailable.py); idle ones above DATABASE_POOL_MIN_SIZE close
# after DATABASE_POOL_MAX_IDLE_S. DATABASE_POOL=false: a connection per thread kept CONN_MAX_AGE seconds (60),
# for PgBouncer in transaction mode in front of the server instead.
DATABASE_POOL = env.bool("DATABASE_POOL", default=True) and DATABASES["default"]["ENGINE"].endswith("postgresql")
if DATABASE_POOL:
    if env.int("CONN_MAX_AGE", default=0) or DATABASES["default"].get("CONN_MAX_AGE"):
        raise ImproperlyConfigured(
            "CONN_MAX_AGE must be 0 (or unset) with DATABASE_POOL: the pool keeps the connections open itself. "
            "Set DATABASE_POOL=false to keep a connection per thread instead."
        )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASE_POOL_OPTIONS = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=4),
        "timeout": env.float("DATABASE_POOL_TIMEOUT_S", default=5.0),
        "max_idle": env.float("DATABASE_POOL_MAX_IDLE_S", default=300.0),
    }
    if not 0 <= DATABASE_POOL_OPTIONS["min_size"] <= DATABASE_POOL_OPTIONS["max_size"] >= 1:
        raise ImproperlyConfigured(
            f"DATABASE_POOL_MIN_SIZE ({DATABASE_POOL_OPTIONS['min_size']}) must be 0 or more and at most "
            f"DATABASE_POOL_MAX_SIZE ({DATABASE_POOL_OPTIONS['max_size']}), which must be 1 or more."
        )
    if DATABASE_POOL_OPTIONS["timeout"] <= 0 or DATABASE_POOL_OPTIONS["max_idle"] <= 0:
        raise ImproperlyConfigured("DATABASE_POOL_TIMEOUT_S and DATABASE_POOL_MAX_IDLE_S must be above 0 (seconds).")
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = DATABASE_POOL_OPTIONS
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
# The database out of reach (a restart): pages and the API answer 503 with this Retry-After (kernel/unavailable.py).
DATABASE_UNAVAILABLE_RETRY_AFTER_S = env.int("DATABASE_UNAVAILABLE_RETRY_AFTER_S", default=2)
if DATABASE_UNAVAILABLE_RETRY_AFTER_S < 1:
    raise ImproperlyConfigured(
        f"DATABASE_UNAVAILABLE_RETRY_AFTER_S must be 1 or more (seconds), not {DATABASE_UNAVAILABLE_RETRY_AFTER_S}"
    )
# Background work with results dear to store (a scoring chunk's judged scores) keeps trying to store them this long
# while the database is out of reach, rather than failing and asking the judges again (kernel.db.database_retried).
DATABASE_RETRY_WITHIN_S = env.float("DATABASE_RETRY_WITHIN_S", default=120.0)
if DATABASE_RETRY_WITHIN_S < 0:
    raise ImproperlyConfigured(f"DATABASE_RETRY_WITHIN_S must be 0 or more (seconds), not {DATABASE_RETRY_WITHIN_S:g}")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the web server and the worker write the same file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The languages a study can be run in (Study.language); annotator pages are translated, research and admin
# pages stay English. Adding one: docs/languages.md.
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.str("STATIC_ROOT", default=str(VAR_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"
MEDIA_ROOT = env.str("MEDIA_ROOT", default=str(VAR_DIR / "media"))
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Research outputs (exports, reports, stress results; docs/backends.md, "Object storage"): workers write a job's
# files to a temporary folder and upload them here, and downloads stream from here, so web servers and workers
# need share no disk. The embedded default is the folder MEDIA_ROOT/research; RESEARCH_STORAGE=s3 uses any
# S3-compatible store through django-storages. RESEARCH_DOWNLOAD_REDIRECT sends downloads to a presigned URL
# (valid AWS_QUERYSTRING_EXPIRE seconds) instead of streaming them through the web server.
RESEARCH_STORAGE = env.str("RESEARCH_STORAGE", default="local")
if RESEARCH_STORAGE == "s3":
    from botocore.config import Config as BotocoreConfig

    STORAGES["research"] = {
        "BACKEND": "kernel.storage.ResearchS3Storage",
        "OPTIONS": {
            "bucket_name": env.str("AWS_STORAGE_BUCKET_NAME", default="").strip(),
            "endpoint_url": env.str("AWS_S3_ENDPOINT_URL", default="") or None,
            # The address browsers use for presigned downloads, when the one above is internal (kernel/storage.py).
            "public_endpoint_url": env.str("AWS_S3_PUBLIC_ENDPOINT_URL", default="") or None,
            # Every key of this deployment starts with it: deployments sharing a bucket each keep (and sweep)
            # only their own files. Empty: keys at the bucket's top (check --deploy warns).
            "location": env.str("RESEARCH_STORAGE_PREFIX", default="").strip("/"),
            "access_key": env.str("AWS_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("AWS_SECRET_ACCESS_KEY", default="") or None,
            "region_name": env.str("AWS_S3_REGION_NAME", default="") or None,
            "querystring_expire": env.int("AWS_QUERYSTRING_EXPIRE", default=300),
            "file_overwrite": True,
            # A store that hangs costs one time-out, not as long as it hangs; botocore's standard retries take
            # the transient errors (throttling, 5xx, dropped connections) with backoff.
            "client_config": BotocoreConfig(
                connect_timeout=env.float("AWS_S3_CONNECT_TIMEOUT_S", default=5.0),
                read_timeout=env.float("AWS_S3_READ_TIMEOUT_S", default=30.0),
                retries={"max_attempts": env.int("AWS_S3_MAX_ATTEMPTS", default=5), "mode": "standard"},
            ),
        },
    }
    if not STORAGES["research"]["OPTIONS"]["bucket_name"]:
        raise ImproperlyConfigured("RESEARCH_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME, the bucket's name.")
elif RESEARCH_STORAGE == "local":
    STORAGES["research"] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}  # under MEDIA_ROOT
else:
    raise ImproperlyConfigured(f"RESEARCH_STORAGE must be local or s3, not {RESEARCH_STORAGE!r}")
RESEARCH_DOWNLOAD_REDIRECT = env.bool("RESEARCH_DOWNLOAD_REDIRECT", default=False)
# A research job whose upload the store failed with a transient fault (no answer past the time-outs above, a 5xx,
# throttling) starts again after this many seconds, then twice as many, up to its cap of starts (analysis/tasks.py).
RESEARCH_STORAGE_RETRY_S = env.float("RESEARCH_STORAGE_RETRY_S", default=30.0)
if RESEARCH_STORAGE_RETRY_S < 0:
    raise ImproperlyConfigured(f"RESEARCH_STORAGE_RETRY_S must be 0 or more seconds, not {RESEARCH_STORAGE_RETRY_S:g}")

# Sign-in and who may reach what (docs/permissions.md). Researchers sign in at /accounts/login/ without being
# staff. Settings that reach outside a study are bounded here: a system's model server must be one of these
# hosts (Django ALLOWED_HOSTS patterns: ".example.org" for subdomains), and a corpus file must lie under
# CORPUS_ROOT (the bundled demo corpus is always allowed).
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "analysis:studies"
LOGOUT_REDIRECT_URL = "login"
CORPUS_ROOT = env.str("CORPUS_ROOT", default=str(VAR_DIR / "corpora"))
# The local corpus's search (docs/backends.md, "A local corpus"): "fts", the database's full-text search, or
# "bm25", BM25 over an index that import_corpus writes into CORPUS_INDEX_DIR (one folder per host, or a shared
# volume every web and worker host mounts).
CORPUS_SEARCH = env.str("CORPUS_SEARCH", default="fts")
if CORPUS_SEARCH not in ("fts", "bm25"):
    raise ImproperlyConfigured(f"CORPUS_SEARCH must be fts or bm25, not {CORPUS_SEARCH!r}")
CORPUS_INDEX_DIR = env.str("CORPUS_INDEX_DIR", default=str(VAR_DIR / "corpus-index"))
# By default the hosts of the operator's own model servers (LLM_BASE_URL and every replica in LLM_BASE_URLS)
# and this machine.
_operator_model_hosts = [
    urlsplit(u.strip()).hostname
    for u in [env.str("LLM_BASE_URL", default=""), *env.str("LLM_BASE_URLS", default="").split(",")]
    if u.strip()
]
MODEL_SERVER_ALLOWED_HOSTS = env.list(
    "MODEL_SERVER_ALLOWED_HOSTS",
    default=list(dict.fromkeys(h for h in (*_operator_model_hosts, "localhost", "127.0.0.1", "::1") if h)),
)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Content-Security-Policy (django-csp; docs/permissions.md, "Headers and limits"): a page runs only the scripts
# and styles of this site's own files, loads nothing from elsewhere, and no other site may frame it. No
# 'unsafe-inline': templates carry no <script> body, no on*= handler and no <style> or style= (static/js,
# static/css). img-src allows data: for the icons Django's admin and Swagger UI draw in their stylesheets.
# A research report opened in the browser has a policy of its own (RESEARCH_FILE_CSP below). The API's
# documentation is Swagger UI with its script as a file (config/api_docs.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "manifest-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    },
}
# A research job's HTML report or SVG figure opened in the browser (analysis/views.py) is a document this
# platform wrote, with its styles inline: the report is one self-contained file, so that a download reads the
# same offline, and matplotlib's SVG styles every line and bar in a style= attribute. It gets a policy of its
# own: no script of any kind and nothing loaded from anywhere (default-src 'none'), no form; only its own
# inline styles and data: images. Study text in it is escaped; and with nothing to load and no script there is
# nothing an injected style could send anywhere. The sandbox gives it an opaque origin besides: no cookie, no
# request as the site. Its allow-scripts permits no script (default-src 'none' refuses every one); without it
# Chromium runs no JavaScript in the page at all, DevTools' included, and checkers driven through DevTools
# (axe-core in tests/e2e) wait forever for their timers.
RESEARCH_FILE_CSP = {
    "default-src": ["'none'"],
    "style-src": ["'unsafe-inline'"],
    "img-src": ["data:"],
    "form-action": ["'none'"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
    "sandbox": ["allow-scripts"],
}


def _request_rate(name: str, default: str) -> str | None:
    """An API request rate (docs/api.md, "Request rates"): requests per second, minute, hour or day, as DRF
    writes it ("300/minute"), or "off"; anything else stops start-up naming the variable. DRF itself reads only
    the first letter of the period ("300/mo" would be 300 a minute) and fails on a word with a ValueError."""
    value = env.str(name, default="").strip() or default
    if value.lower() == "off":
        return None
    match = re.fullmatch(r"(\d+)/(second|minute|hour|day)", value)
    if not match or int(match.group(1)) < 1:
        raise ImproperlyConfigured(
            f"{name} must be a number of requests (at least 1) per second, minute, hour or day, such as "
            f"{default}, or off; not {value!r}"
        )
    return value


# API request rates by scope (kernel.throttling.ScopedRateThrottle; each API view names its scope). A caller
# past the rate gets 429 with Retry-After. The defaults are far above what a study makes anyone send
# (docs/api.md says why): they stop a script hammering the API, never a person or a researcher's client.
API_THROTTLE_RATES = {
    "annotator": _request_rate("API_THROTTLE_ANNOTATOR", "300/minute"),
    "research": _request_rate("API_THROTTLE_RESEARCH", "300/minute"),
    "admin": _request_rate("API_THROTTLE_ADMIN", "300/minute"),
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "kernel.authentication.TokenAuthentication",  # DRF's, its read written out (kernel/authentication.py)
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "kernel.exception_handlers.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["kernel.throttling.ScopedRateThrottle"],
    "DEFAULT_THROTTLE_RATES": API_THROTTLE_RATES,
    # DRF's JSON parser with a depth limit and no unstorable strings (kernel/parsers.py); forms as DRF's.
    "DEFAULT_PARSER_CLASSES": [
        "kernel.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Satisfy: human evaluation of summaries",
    "DESCRIPTION": "API for the annotator journey (studies, persona, queries, generation status, tournament matches) and for researchers.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "StudyStatusEnum": "studies.models.Study.Status",
        "MatchStatusEnum": "annotation.models.Match.Status",
        "QueryStatusEnum": "annotation.models.Query.Status",
        "ChoiceEnum": "annotation.models.Judgment.Choice",
    },
}

# Celery. The embedded default is kombu's filesystem transport: a real broker that needs no server.
# Empty (a `.env` line `CELERY_BROKER_URL=`) is unset, as an empty DATABASE_URL is: Celery would otherwise take
# its own default, a RabbitMQ on localhost, and every question would wait for a broker that is not there.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "filesystem://"
BROKER_DIR = Path(env.str("BROKER_DIR", default=str(VAR_DIR / "broker")))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}  # a broker's own, below
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Redis hands an unacknowledged message out again after its visibility timeout even when its worker is
    # alive, and a redelivered task may take over running work (kernel.leases): so the timeout must outlast
    # the longest task (a research job's 3,700 s hard limit). A dead worker's work does not wait for it:
    # the sweepers send it again once its lease lapses (docs/backends.md, "Sweepers").
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("REDIS_VISIBILITY_TIMEOUT_S", default=2 * 3600)}
elif CELERY_BROKER_URL.startswith(("amqp://", "amqps://", "pyamqp://")):
    # RabbitMQ closes the channel of a consumer that holds an unacknowledged message longer than its
    # consumer_timeout (30 min by default), and with late acks a task holds its message while it runs: so,
    # as with Redis, the timeout must outlast the longest task. RabbitMQ 3.12+ takes it per queue from
    # x-consumer-timeout (set below); older servers need `consumer_timeout = 7200000` in rabbitmq.conf
    # (docs/deploy.md, "Brokers"). Heartbeats notice a dead connection; publisher confirms mean a task
    # that `delay` returned for is on the broker. Queues are classic, durable.
    CELERY_BROKER_HEARTBEAT = env.int("AMQP_HEARTBEAT_S", default=60)
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
CELERY_RESULT_BACKEND = None
# Celery's Django fixup closes the database connection (in a prefork pool process, its whole pool) before and
# after every task unless told to reuse it; config/celery.py gives it back as Django does around a request
# instead (to the pool, or kept CONN_MAX_AGE), so the fixup's own recycling is pushed out of the way (it closes
# after 2 x this many tasks per process).
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker whose broker consumer stops for good (an error Celery does not recover from) exits within seconds, so that
# its supervisor starts it again, instead of living on deaf until its running tasks end (config/celery.py).
CELERY_WORKER_CONSUMER = "config.celery:ExitingConsumer"
CELERY_TASK_DEFAULT_QUEUE = "default"
# Queues (docs/deploy.md, "Queues"). Annotator-facing work goes to two queues: a question's retrieval to
# RETRIEVAL_QUEUE, its generations and their sweeper to ANNOTATOR_QUEUE, so that a retrieval never waits behind
# generations held by a slow model server (issue 30: retrievals waited behind hanging generations). Research work (scoring chunks, research jobs: reports, exports, stress tests, and their
# sweepers) to RESEARCH_QUEUE, so a study-wide scoring run never stands between an annotator and the
# comparison. CELERY_TASK_ROUTES (JSON: {"task name": {"queue": "name"}}) replaces the whole table. A worker
# consumes the queues in CELERY_QUEUES (platform/celery-worker.sh): all of them by default (bin/demo, one
# worker), one per worker in a deployment (docker-compose.yml: worker-annotator, worker-retrieval, worker-research).
ANNOTATOR_QUEUE = env.str("ANNOTATOR_QUEUE", default="annotator")
RETRIEVAL_QUEUE = env.str("RETRIEVAL_QUEUE", default="retrieval")
RESEARCH_QUEUE = env.str("RESEARCH_QUEUE", default="research")
CELERY_TASK_ROUTES = env.json(
    "CELERY_TASK_ROUTES",
    default={
        "annotation.tasks.retrieve_query": {"queue": RETRIEVAL_QUEUE},
        "annotation.tasks.generate_candidate": {"queue": ANNOTATOR_QUEUE},
        "annotation.tasks.sweep_generation": {"queue": ANNOTATOR_QUEUE},
        "scoring.tasks.score_chunk": {"queue": RESEARCH_QUEUE},
        "scoring.tasks.sweep_scoring_runs": {"queue": RESEARCH_QUEUE},
        "analysis.tasks.run_research_job": {"queue": RESEARCH_QUEUE},
        "analysis.tasks.sweep_research_jobs": {"queue": RESEARCH_QUEUE},
        "analysis.tasks.sweep_research_storage": {"queue": RESEARCH_QUEUE},
    },
)
if not (
    isinstance(CELERY_TASK_ROUTES, dict)
    and all(isinstance(r, dict) and isinstance(r.get("queue"), str) and r["queue"] for r in CELERY_TASK_ROUTES.values())
):
    raise ImproperlyConfigured(
        'CELERY_TASK_ROUTES must be a JSON object {"task name": {"queue": "name"}, ...}, not '
        f"{env.str('CELERY_TASK_ROUTES')!r}"
    )
# Every queue a route names: a worker started without -Q (bin/demo, CELERY_QUEUES unset) consumes them all.
# On RabbitMQ 3.12+ x-consumer-timeout lets a task hold its message this long (see "amqp" above); the
# other transports ignore queue arguments, so every process declares the queues alike.
AMQP_CONSUMER_TIMEOUT_MS = env.int("AMQP_CONSUMER_TIMEOUT_MS", default=2 * 3600 * 1000)
_QUEUE_ARGUMENTS = {"x-consumer-timeout": AMQP_CONSUMER_TIMEOUT_MS}
# The annotator queue serves a question's generations before the next retrieval (kernel/tasks.py,
# OrderedTask); RabbitMQ orders by priority only on a queue declared with x-max-priority (two levels). A
# RabbitMQ queue declared before 2026-12-02 without it must be deleted once (docs/deploy.md, "Brokers").
_PRIORITY_QUEUES = {ANNOTATOR_QUEUE: {"x-max-priority": 1}}
CELERY_TASK_QUEUES = [
    Queue(
        name, Exchange(name), routing_key=name, queue_arguments={**_QUEUE_ARGUMENTS, **_PRIORITY_QUEUES.get(name, {})}
    )
    for name in sorted({CELERY_TASK_DEFAULT_QUEUE, *(r["queue"] for r in CELERY_TASK_ROUTES.values())})
]
# A scoring run keeps at most this many chunks queued or running at once; each counted chunk sends the
# next, so a run over a whole study never floods the broker (scoring/services.py).
RESEARCH_MAX_INFLIGHT_CHUNKS = env.int("RESEARCH_MAX_INFLIGHT_CHUNKS", default=8)
# Research work yields to annotator work on its host (kernel/yielding.py): the annotator tasks
# (ANNOTATOR_TASKS) mark themselves in flight in Redis under RESEARCH_YIELD_HOST, and scoring chunks and
# research jobs pause between rows while a mark is there, for at most RESEARCH_YIELD_MAX_PAUSE_S in total per
# task. Turn it off where research workers have hosts of their own. RESEARCH_YIELD_URL: a Redis (default: the
# broker's, else CACHE_URL's; "off": no yielding, as RESEARCH_YIELDS_TO_ANNOTATORS=false). Workers that share a host must share RESEARCH_YIELD_HOST
# (containers have host names of their own: docker-compose.yml sets one for both).
ANNOTATOR_TASKS = ("annotation.tasks.retrieve_query", "annotation.tasks.generate_candidate")
RESEARCH_YIELDS_TO_ANNOTATORS = env.bool("RESEARCH_YIELDS_TO_ANNOTATORS", default=True)
RESEARCH_YIELD_HOST = env.str("RESEARCH_YIELD_HOST", default="") or socket.gethostname()
RESEARCH_YIELD_MAX_PAUSE_S = env.float("RESEARCH_YIELD_MAX_PAUSE_S", default=10.0)
# Every task declares its own time limits and retries (annotation/tasks.py, scoring/tasks.py,
# analysis/tasks.py); the retry arithmetic is in docs/backends.md ("Retries and time limits").
#
# Background work always ends. Running work holds a lease that a heartbeat renews every
# BACKGROUND_HEARTBEAT_S while it runs; a worker that dies stops renewing it, and the sweepers
# (run every SWEEP_INTERVAL_S by the one beat process per deployment: platform/celery-beat.sh,
# the beat service in docker-compose.yml, its own process in bin/demo) send the work again once
# the lease has expired. Worst case from a killed worker to its work running again:
# BACKGROUND_LEASE_S + SWEEP_INTERVAL_S = 25 s; for work it held without a lease (a retry's countdown, a message
# not yet started: Redis keeps those unacknowledged until its visibility timeout), SWEEP_INTERVAL_S after a worker
# is back (kernel.tasks.worker_started). The admin shows a banner, and the error log a line,
# when no sweeper has run for SWEEPER_LATE_AFTER_S.
# Each attempt's soft time limit (the retry arithmetic is in annotation/tasks.py and docs/backends.md).
GENERATION_SOFT_TIME_LIMIT_S = env.int("GENERATION_SOFT_TIME_LIMIT_S", default=240)
RETRIEVAL_SOFT_TIME_LIMIT_S = env.int("RETRIEVAL_SOFT_TIME_LIMIT_S", default=60)
BACKGROUND_LEASE_S = env.float("BACKGROUND_LEASE_S", default=15.0)
BACKGROUND_HEARTBEAT_S = env.float("BACKGROUND_HEARTBEAT_S", default=5.0)
# One beat per deployment (kernel/beat_lock.py): a second one waits, checking for the lock this often, and
# takes over within this many seconds of the first one stopping.
BEAT_LOCK_POLL_S = env.float("BEAT_LOCK_POLL_S", default=5.0)
if BEAT_LOCK_POLL_S <= 0:
    raise ImproperlyConfigured(f"BEAT_LOCK_POLL_S ({BEAT_LOCK_POLL_S:g}) must be above 0")
if not 0 < BACKGROUND_HEARTBEAT_S < BACKGROUND_LEASE_S:
    raise ImproperlyConfigured(
        f"BACKGROUND_HEARTBEAT_S ({BACKGROUND_HEARTBEAT_S:g}) must be above 0 and under BACKGROUND_LEASE_S "
        f"({BACKGROUND_LEASE_S:g}): a lease renewed less often than it lasts lapses while its work still runs, "
        "and the sweeper sends the work again."
    )
SWEEP_INTERVAL_S = env.float("SWEEP_INTERVAL_S", default=10.0)
if SWEEP_INTERVAL_S <= 0:
    # Celery beat sends a task whose interval is 0 on every tick: some 600 sweeps a second to the broker.
    raise ImproperlyConfigured(f"SWEEP_INTERVAL_S must be above 0 (seconds between sweeps), not {SWEEP_INTERVAL_S:g}")
SWEEPER_LATE_AFTER_S = env.float("SWEEPER_LATE_AFTER_S", default=120.0)
if SWEEPER_LATE_AFTER_S <= SWEEP_INTERVAL_S:
    raise ImproperlyConfigured(
        f"SWEEPER_LATE_AFTER_S ({SWEEPER_LATE_AFTER_S:g}) must be above SWEEP_INTERVAL_S ({SWEEP_INTERVAL_S:g}): "
        "the admin's banner would say the sweepers stopped between any two sweeps."
    )
# Work whose message was lost. The sweepers send again, at their next run, work still waiting for a worker
# that was sent before the broker last started (a Redis restarted without persistence forgets its queues:
# kernel.tasks.broker_started_at). Brokers that cannot say when they started, and messages lost otherwise,
# fall back on these windows (docs/backends.md, "Sweepers"): a queued summary or research job is sent again
# once it has waited SWEEP_REQUEUE_QUEUED_AFTER_S; a retrieval once it has waited SWEEP_RETRIEVAL_REQUEUE_AFTER_S,
# and it fails after SWEEP_RETRIEVAL_DEADLINE_S; a scoring run no chunk has counted for SWEEP_SCORING_WINDOW_S
# has its unfinished chunks sent again. Sending again what was merely waiting is harmless (every task claims
# its row under a lease), but it lengthens a long queue: the windows stay above the longest expected wait.
SWEEP_REQUEUE_QUEUED_AFTER_S = env.float("SWEEP_REQUEUE_QUEUED_AFTER_S", default=600.0)
SWEEP_RETRIEVAL_REQUEUE_AFTER_S = env.float("SWEEP_RETRIEVAL_REQUEUE_AFTER_S", default=300.0)
SWEEP_RETRIEVAL_DEADLINE_S = env.float("SWEEP_RETRIEVAL_DEADLINE_S", default=600.0)
SWEEP_SCORING_WINDOW_S = env.float("SWEEP_SCORING_WINDOW_S", default=120.0)
for _name in (
    "SWEEP_REQUEUE_QUEUED_AFTER_S",
    "SWEEP_RETRIEVAL_REQUEUE_AFTER_S",
    "SWEEP_RETRIEVAL_DEADLINE_S",
    "SWEEP_SCORING_WINDOW_S",
):
    if globals()[_name] <= 0:
        raise ImproperlyConfigured(f"{_name} must be above 0 seconds, not {globals()[_name]:g}")
if SWEEP_RETRIEVAL_DEADLINE_S <= SWEEP_RETRIEVAL_REQUEUE_AFTER_S:
    raise ImproperlyConfigured(
        f"SWEEP_RETRIEVAL_DEADLINE_S ({SWEEP_RETRIEVAL_DEADLINE_S:g}) must be above SWEEP_RETRIEVAL_REQUEUE_AFTER_S "
        f"({SWEEP_RETRIEVAL_REQUEUE_AFTER_S:g}): a lost retrieval would fail before it is ever sent again."
    )
# The waiting page's deadline: past it the annotator is told, in plain words, what is happening and may
# try again, set the question aside or stop the study (annotation/selectors/query.py says why 120 s).
ANNOTATION_WAIT_DEADLINE_S = env.int("ANNOTATION_WAIT_DEADLINE_S", default=120)
CELERY_BEAT_SCHEDULE = {
    "sweep-generation": {"task": "annotation.tasks.sweep_generation", "schedule": SWEEP_INTERVAL_S},
    "sweep-scoring-runs": {"task": "scoring.tasks.sweep_scoring_runs", "schedule": SWEEP_INTERVAL_S},
    "sweep-research-jobs": {"task": "analysis.tasks.sweep_research_jobs", "schedule": SWEEP_INTERVAL_S},
    # Files in the research storage that no job lists (deleted jobs and studies, failed attempts).
    "sweep-research-storage": {"task": "analysis.tasks.sweep_research_storage", "schedule": 3600.0},
}

# Login throttling (django-axes) for every password login: the admin's and any LoginView, since axes
# watches django.contrib.auth's authenticate(). AXES_FAILURE_LIMIT wrong passwords in a row for one
# username from one client address lock that pair out for AXES_COOLOFF_MINUTES (429, templates/lockout.html,
# which says when to try again); a later attempt during the lockout, even with the right password, is refused
# and restarts the wait; a successful login resets the count. Behind a reverse proxy set TRUSTED_PROXY_COUNT
# to the number of trusted proxies so the client address comes from X-Forwarded-For (kernel/throttling.py;
# off by default, when the socket's address is the client's). Unlock: `manage.py axes_reset` or the admin.
INSTALLED_APPS += ["axes"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("AXES_COOLOFF_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # every failed login, for the admin's audit (axes' access failure log)
# No log of successful logins: every annotator is signed in when joining, and a pseudonymous study must not
# keep their IP address.
AXES_DISABLE_ACCESS_LOG = True
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "kernel.throttling.client_ip"
AXES_LOCKOUT_CALLABLE = "kernel.throttling.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429

# Shared cache (OpenAlex answers, etc.): set CACHE_URL=redis://host:6379/1 so web and workers share it.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}

# Real backends (docs/backends.md). Each study system may override these in its backend settings.
LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="EMPTY")
LLM_TEMPERATURE = env.float("LLM_TEMPERATURE", default=0.0)
LLM_MAX_TOKENS = env.int("LLM_MAX_TOKENS", default=1024)
LLM_SEED = env.int("LLM_SEED", default=None)
# One answer's wait; it must stay under the generation task's soft time limit (annotation/tasks.py).
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=120.0)
LLM_CONCURRENCY = env.int("LLM_CONCURRENCY", default=4)
# A response cache keyed by the whole request (off unless set): reruns of a study cost nothing.
LLM_CACHE_DIR = env.str("LLM_CACHE_DIR", default="") or None
# Model servers across processes and hosts (docs/backends.md, "Model servers (limits, replicas, caches)").
# LLM_BASE_URLS: replicas of one model, comma-separated (a system's base_url may be a list too); each replica
# gets at most LLM_CONCURRENCY calls at once from the whole deployment when MODEL_SERVER_LIMIT_URL names a
# Redis (by default the broker's or the cache's Redis, if either is Redis; "local" keeps the limit per process).
# LLM_CACHE: "dir" (LLM_CACHE_DIR, one host), "cache" (CACHES[LLM_CACHE_ALIAS], shared by every worker) or "off".
# METRICS_DEVICE: auto (cuda, else mps, else cpu) | cpu | cuda | cuda:N; METRICS_BATCH_SIZE for embeddings
# and BERTScore (docs/backends.md, "Accelerators").
LLM_BASE_URLS = env.str("LLM_BASE_URLS", default="")
_redis_default = next(
    (u for u in (CELERY_BROKER_URL, env.str("CACHE_URL", default="")) if u.startswith(("redis://", "rediss://"))), ""
)


def _redis_url_or(name: str, value: str, *, off: str, meaning: str) -> str:
    """A setting that names a Redis, or says `off` (then empty); anything else stops start-up naming it."""
    value = value.strip()
    if value == off:
        return ""
    if value and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(
            f"{name} must be a Redis URL (redis://, rediss:// or unix://) or {off!r} ({meaning}), not {value!r}"
        )
    return value


MODEL_SERVER_LIMIT_URL = _redis_url_or(
    "MODEL_SERVER_LIMIT_URL",
    env.str("MODEL_SERVER_LIMIT_URL", default="").strip() or _redis_default,
    off="local",
    meaning="a limit per process",
)
RESEARCH_YIELD_URL = _redis_url_or(
    "RESEARCH_YIELD_URL",
    env.str("RESEARCH_YIELD_URL", default="").strip() or _redis_default,
    off="off",
    meaning="research does not yield",
)
MODEL_SERVER_LEASE_S = env.float("MODEL_SERVER_LEASE_S", default=30.0)
# Lanes on one model server (docs/backends.md, "Lanes"): judges and stress-test rewrites hold at most this share
# of a server's LLM_CONCURRENCY slots (rounded down, at least 1) and none while an annotator's summary waits.
MODEL_SERVER_RESEARCH_SHARE = env.float("MODEL_SERVER_RESEARCH_SHARE", default=0.5)
if not 0 < MODEL_SERVER_RESEARCH_SHARE <= 1:
    raise ImproperlyConfigured(
        f"MODEL_SERVER_RESEARCH_SHARE must be more than 0 and at most 1, not {MODEL_SERVER_RESEARCH_SHARE!r}"
    )
LLM_CACHE = env.str("LLM_CACHE", default="dir")
if LLM_CACHE not in {"dir", "cache", "off"}:
    raise ImproperlyConfigured(f"LLM_CACHE must be dir, cache or off, not {LLM_CACHE!r}")
LLM_CACHE_ALIAS = env.str("LLM_CACHE_ALIAS", default="default")
LLM_CACHE_TTL = env.int("LLM_CACHE_TTL", default=None)


def _byte_cap(name: str, default: int) -> int:
    """A cap in bytes on the reply an external service may send (docs/backends.md, "Response size caps")."""
    value: int = env.int(name, default=default)
    if value < 1:
        raise ImproperlyConfigured(f"{name} must be a number of bytes, at least 1, not {value}")
    return value


# A chat completion is a few KiB: 8 MiB is far above any real reply and far below what troubles a worker.
MODEL_SERVER_MAX_RESPONSE_BYTES = _byte_cap("MODEL_SERVER_MAX_RESPONSE_BYTES", 8 * 1024 * 1024)
METRICS_DEVICE = env.str("METRICS_DEVICE", default="auto").strip().lower()
if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", METRICS_DEVICE):
    raise ImproperlyConfigured(f"METRICS_DEVICE must be auto, cpu, mps, cuda or cuda:N, not {METRICS_DEVICE!r}")
METRICS_BATCH_SIZE = env.int("METRICS_BATCH_SIZE", default=32)
if METRICS_BATCH_SIZE < 1:
    raise ImproperlyConfigured(f"METRICS_BATCH_SIZE must be at least 1, not {METRICS_BATCH_SIZE}")
# The LLM judge of scoring runs when a run names none (docs/metrics.md); the key is never stored with a run.
JUDGE_BASE_URL = env.str("JUDGE_BASE_URL", default="")
JUDGE_MODEL = env.str("JUDGE_MODEL", default="")
JUDGE_NAME = env.str("JUDGE_NAME", default="")
JUDGE_API_KEY = env.str("JUDGE_API_KEY", default="")
# The folder holding the factuality metrics' weights (BARTScore, MiniCheck, SummaC, AlignScore, UniEval), one
# subfolder per model (docs/metrics.md, "Factuality metrics"); empty: only the offline Hugging Face cache is
# searched. Nothing is ever downloaded at run time.
METRICS_WEIGHTS_DIR = env.str("METRICS_WEIGHTS_DIR", default="").strip()
OPENALEX_BASE_URL = env.str("OPENALEX_BASE_URL", default="https://api.openalex.org")
OPENALEX_MAILTO = env.str("OPENALEX_MAILTO", default="")
OPENALEX_API_KEY = env.str("OPENALEX_API_KEY", default="")
OPENALEX_TIMEOUT = env.float("OPENALEX_TIMEOUT", default=20.0)
# The retrieval task owns the retries (annotation/tasks.py); the client's own are off unless set.
OPENALEX_MAX_RETRIES = env.int("OPENALEX_MAX_RETRIES", default=0)
OPENALEX_BACKOFF_S = env.float("OPENALEX_BACKOFF_S", default=1.0)
OPENALEX_CACHE_TTL = env.int("OPENALEX_CACHE_TTL", default=7 * 24 * 3600)
OPENALEX_CACHE_ALIAS = env.str("OPENALEX_CACHE_ALIAS", default="default")
# A page of 200 works with abstracts and authorships is 1-3 MiB, but one paper by a physics collaboration (thousands
# of authors with their institutions) adds megabytes on its own: 32 MiB leaves room for several.
OPENALEX_MAX_RESPONSE_BYTES = _byte_cap("OPENALEX_MAX_RESPONSE_BYTES", 32 * 1024 * 1024)

# The legacy import (analysis.legacy_import): caps on what one archive may unpack to (docs/analysis.md).
LEGACY_IMPORT_MAX_MEMBER_BYTES = env.int("LEGACY_IMPORT_MAX_MEMBER_BYTES", default=64 * 1024 * 1024)
LEGACY_IMPORT_MAX_TOTAL_BYTES = env.int("LEGACY_IMPORT_MAX_TOTAL_BYTES", default=256 * 1024 * 1024)
LEGACY_IMPORT_MAX_ANNOTATIONS = env.int("LEGACY_IMPORT_MAX_ANNOTATIONS", default=200_000)

LOG_LEVEL = env.str("LOG_LEVEL", default="").strip().upper() or "INFO"
if LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {LOG_LEVEL!r}")
# Invitation tokens never reach a log (kernel/logging.py): Django's request and server loggers, and the
# console handler every other record goes through, replace a token in a URL by [redacted].
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_tokens": {"()": "kernel.logging.RedactTokensFilter"}},
    # The text lines are redacted whole, tracebacks included (a filter runs before the traceback is formatted).
    "formatters": {"text": {"()": "kernel.logging.RedactingFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact_tokens"], "formatter": "text"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "django.request": {"filters": ["redact_tokens"]},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False, "filters": ["redact_tokens"]},
    },
}

# Monitoring (docs/deploy.md, "Monitoring"). /metrics answers only `Authorization: Bearer METRICS_TOKEN` (404
# while unset: metrics off); a Celery worker serves its own on METRICS_PORT (0: none) with the same token.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_PORT = env.int("METRICS_PORT", default=0)
# The study health panel's and the admin index's alerts: a study whose summaries failed at this rate or more in
# the last hour, or whose annotators waited this long or longer for their first comparison (p95, last hour).
HEALTH_FAILURE_RATE_ALERT = env.float("HEALTH_FAILURE_RATE_ALERT", default=0.2)
HEALTH_WAIT_P95_ALERT_S = env.float("HEALTH_WAIT_P95_ALERT_S", default=60.0)
# Error reports (config/sentry.py): off unless SENTRY_DSN is set.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env.str("SENTRY_ENVIRONMENT", default="production")
SENTRY_TRACES_SAMPLE_RATE = env.float("SENTRY_TRACES_SAMPLE_RATE", default=0.0)
# LOG_FORMAT=json: one JSON object per line with the request id or Celery task id (kernel/request_id.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="text").strip().lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}")
LOGGING["filters"]["request_id"] = {"()": "kernel.request_id.RequestIdFilter"}
LOGGING["handlers"]["console"]["filters"] = ["redact_tokens", "request_id"]
LOGGING["loggers"]["django.server"]["filters"] = ["redact_tokens", "request_id"]
if LOG_FORMAT == "json":
    LOGGING["formatters"]["json"] = {"()": "kernel.request_id.JsonFormatter"}
    LOGGING["handlers"]["console"]["formatter"] = "json"
if SENTRY_DSN:
    from config.sentry import sentry_init

    sentry_init(dsn=SENTRY_DSN, environment=SENTRY_ENVIRONMENT, traces_sample_rate=SENTRY_TRACES_SAMPLE_RATE)
