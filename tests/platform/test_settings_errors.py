"""A deployment's environment is read strictly: a value that would silently change what runs (a boolean typo
that turns the HTTPS redirect off, a list item with a space, a URL that is not Redis, an empty bucket, a cache
alias that does not exist) or that is not of its kind (a word for a number, JSON that does not parse, a
database or cache URL of no known kind, a log level) stops the process at start-up with a message naming the
variable, and the spellings people write (TRUE, yes, off, 1e3, an empty value for the default) are read as
meant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.support.redis_server import redis_server
from tests.support.zygote import start_up, zygote_for

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys, django
django.setup()
from django.conf import settings
out = {name: getattr(settings, name) for name in json.loads(sys.argv[1])}
if len(sys.argv) > 2:
    from django.test import Client
    client = Client(raise_request_exception=False)
    out["status"] = {host: client.get("/accounts/login/", HTTP_HOST=host).status_code for host in json.loads(sys.argv[2])}
print(json.dumps(out, default=str))
"""


def production_env(**env: str) -> dict[str, str]:
    """The required settings of a production start-up, and `env`."""
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "ENV_FILE": str(REPO / "no-such.env"),
        "SECRET_KEY": "a-test-secret-key-that-is-long-enough-for-the-checks-0123456789",
        "DATABASE_URL": "sqlite:///:memory:",
        "CELERY_BROKER_URL": "memory://",
        **env,
    }


def probe(names: list[str], hosts: list[str] | None = None) -> list[str]:
    return [sys.executable, "-c", PROBE, json.dumps(names), *([json.dumps(hosts)] if hosts else [])]


def start(names: list[str], hosts: list[str] | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """A production process's start-up (settings and apps) with only `env` beyond the required settings:
    forked from a zygote that imported the libraries ahead (tests/support/zygote.py; a fresh start-up shows
    the same, test_a_start_up_forked_from_the_zygote_shows_what_a_fresh_one_shows)."""
    return start_up(probe(names, hosts), cwd=REPO, env=production_env(**env), timeout=120)


def settings_of(names: list[str], hosts: list[str] | None = None, **env: str) -> dict[str, object]:
    done = start(names, hosts, **env)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def refused(**env: str) -> str:
    done = start([], **env)
    assert done.returncode != 0, f"started with {env}: {done.stdout}"
    return done.stderr.strip().splitlines()[-1]


GUNICORN = [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi", "-c", "platform/gunicorn.conf.py"]


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (
            probe(["ALLOWED_HOSTS", "SECURE_SSL_REDIRECT"], ["eval.example.org", "other.example.org"]),
            production_env(ALLOWED_HOSTS="eval.example.org, www.example.org ,", MANIFEST_STATIC="false"),
        ),
        (probe([]), production_env(AXES_ENABLED="Tru")),
        ([*GUNICORN, "--check-config"], production_env(GUNICORN_WORKERS="four")),
        (
            [sys.executable, "manage.py", "check", "--deploy"],
            {key: value for key, value in production_env(ENV_FILE=os.devnull).items() if key != "PYTHONPATH"},
        ),
    ],
    ids=["settings-and-requests", "refused", "gunicorn", "manage-py"],
)
def test_a_start_up_forked_from_the_zygote_shows_what_a_fresh_one_shows(argv: list[str], env: dict[str, str]) -> None:
    fresh = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    forked = start_up(argv, cwd=REPO, env=env, timeout=120)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_case_the_zygote_cannot_start_as_a_fresh_process_would_is_refused() -> None:
    # openai read OPENAI_LOG when the zygote imported it: a child would log as the zygote's environment said
    # (start_up then starts a zygote of that environment's own).
    zygote = zygote_for(production_env(), REPO)
    with pytest.raises(ValueError, match="OPENAI_LOG was read when openai"):
        zygote.run(probe([]), cwd=REPO, env=production_env(OPENAI_LOG="debug"), timeout=120)


@pytest.mark.parametrize(
    ("name", "typo"),
    [("SECURE_SSL_REDIRECT", "ture"), ("SESSION_COOKIE_SECURE", "yess"), ("AXES_ENABLED", "Tru")],
)
def test_a_boolean_typo_stops_start_up_naming_the_variable(name: str, typo: str) -> None:
    message = refused(**{name: typo})
    assert f"{name} must be true or false" in message and repr(typo) in message


def test_the_usual_spellings_of_a_boolean_are_read_as_meant_and_empty_means_the_default() -> None:
    values = settings_of(
        ["SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "AXES_ENABLED", "RESEARCH_DOWNLOAD_REDIRECT"],
        SECURE_SSL_REDIRECT="",  # the default: on in production
        SESSION_COOKIE_SECURE=" TRUE ",
        AXES_ENABLED="off",
        RESEARCH_DOWNLOAD_REDIRECT="Yes",
    )
    assert values == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "AXES_ENABLED": False,
        "RESEARCH_DOWNLOAD_REDIRECT": True,
    }


def test_a_space_after_a_comma_in_allowed_hosts_still_lets_the_second_host_in() -> None:
    values = settings_of(
        ["MODEL_SERVER_ALLOWED_HOSTS"],
        ["eval.example.org", "www.example.org", "other.example.org"],
        ALLOWED_HOSTS="eval.example.org, www.example.org ,",
        MODEL_SERVER_ALLOWED_HOSTS="vllm.internal, .models.example.org",
        SECURE_SSL_REDIRECT="false",
        MANIFEST_STATIC="false",  # no collected static files here
    )
    assert values["status"] == {"eval.example.org": 200, "www.example.org": 200, "other.example.org": 400}
    assert values["MODEL_SERVER_ALLOWED_HOSTS"] == ["vllm.internal", ".models.example.org"]


def test_research_yield_url_off_turns_yielding_off_and_a_url_that_is_not_redis_is_refused() -> None:
    assert settings_of(["RESEARCH_YIELD_URL"], RESEARCH_YIELD_URL="off") == {"RESEARCH_YIELD_URL": ""}
    message = refused(RESEARCH_YIELD_URL="local")
    assert "RESEARCH_YIELD_URL must be a Redis URL" in message and "'local'" in message


def test_s3_storage_without_a_bucket_name_is_refused() -> None:
    # platform/env.example ships the line empty.
    message = refused(RESEARCH_STORAGE="s3", AWS_STORAGE_BUCKET_NAME="")
    assert "RESEARCH_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME" in message


def test_a_batch_size_under_one_is_refused() -> None:
    assert "METRICS_BATCH_SIZE must be at least 1, not 0" in refused(METRICS_BATCH_SIZE="0")


def test_a_heartbeat_no_more_frequent_than_the_lease_is_refused() -> None:
    message = refused(BACKGROUND_LEASE_S="5", BACKGROUND_HEARTBEAT_S="10")
    assert "BACKGROUND_HEARTBEAT_S (10) must be above 0 and under BACKGROUND_LEASE_S (5)" in message


def test_a_sweep_interval_of_zero_and_a_late_banner_sooner_than_a_sweep_are_refused() -> None:
    # With 0, celery beat sent the sweepers on every tick: some 600 messages a second to the broker.
    assert "SWEEP_INTERVAL_S must be above 0 (seconds between sweeps), not 0" in refused(SWEEP_INTERVAL_S="0")
    assert "SWEEP_INTERVAL_S must be above 0" in refused(SWEEP_INTERVAL_S="-10")
    message = refused(SWEEPER_LATE_AFTER_S="5")
    assert "SWEEPER_LATE_AFTER_S (5) must be above SWEEP_INTERVAL_S (10)" in message
    assert settings_of(["SWEEP_INTERVAL_S"], SWEEP_INTERVAL_S="2.5") == {"SWEEP_INTERVAL_S": 2.5}


def test_a_cache_alias_that_caches_does_not_define_is_refused_naming_the_setting() -> None:
    assert "OPENALEX_CACHE_ALIAS names the cache 'shared'" in refused(OPENALEX_CACHE_ALIAS="shared")
    assert "LLM_CACHE_ALIAS names the cache 'llm'" in refused(LLM_CACHE="cache", LLM_CACHE_ALIAS="llm")
    # Only read when the LLM cache is the shared one.
    assert settings_of(["LLM_CACHE_ALIAS"], LLM_CACHE="dir", LLM_CACHE_ALIAS="llm") == {"LLM_CACHE_ALIAS": "llm"}
    assert settings_of(["OPENALEX_CACHE_ALIAS"], OPENALEX_CACHE_ALIAS="default") == {"OPENALEX_CACHE_ALIAS": "default"}


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("CONN_MAX_AGE", "abc", "CONN_MAX_AGE must be a whole number, not 'abc'"),
        ("LLM_SEED", "x", "LLM_SEED must be a whole number, not 'x'"),
        ("BACKGROUND_LEASE_S", "fifteen", "BACKGROUND_LEASE_S must be a number (such as 10 or 0.5), not 'fifteen'"),
        ("AXES_COOLOFF_MINUTES", "nan", "AXES_COOLOFF_MINUTES must be a number"),
        ("CELERY_TASK_ROUTES", "{bad", "CELERY_TASK_ROUTES is not valid JSON"),
        (
            "CELERY_TASK_ROUTES",
            '{"annotation.tasks.retrieve_query": "annotator"}',
            "CELERY_TASK_ROUTES must be a JSON object",
        ),
        ("DATABASE_URL", "postgress://satisfy:s3cret@db:5432/satisfy", "DATABASE_URL must be a database URL"),
        ("DATABASE_URL", "satisfy:s3cret@db:5432/satisfy", "DATABASE_URL must be a database URL"),
        ("CACHE_URL", "reddis://:s3cret@cache:6379/1", "CACHE_URL must be a cache URL"),
        ("CACHE_URL", "redis//:s3cret@cache:6379/1", "CACHE_URL must be a cache URL"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not 'LOUD'"),
    ],
)
def test_a_value_that_is_not_of_its_kind_stops_start_up_naming_the_variable(
    name: str, value: str, expected: str
) -> None:
    message = refused(**{name: value})
    assert expected in message, message
    assert "s3cret" not in message  # a refused URL is not echoed: it may hold a password


def test_a_number_in_a_form_python_reads_is_read_as_written_and_empty_means_the_default() -> None:
    # django-environ read 1e3 as 13 (it drops what is not a digit, a comma or a point) and '' as an error.
    values = settings_of(
        ["BACKGROUND_LEASE_S", "SWEEP_INTERVAL_S", "DATABASES", "LLM_SEED"],
        BACKGROUND_LEASE_S="1e3",
        SWEEP_INTERVAL_S=" 2.5 ",
        CONN_MAX_AGE="",
        LLM_SEED="",
    )
    assert values["BACKGROUND_LEASE_S"] == 1000.0 and values["SWEEP_INTERVAL_S"] == 2.5
    assert values["DATABASES"]["default"]["CONN_MAX_AGE"] == 0  # SQLite's, whatever CONN_MAX_AGE says
    assert values["LLM_SEED"] is None


def gunicorn_check(**env: str) -> subprocess.CompletedProcess[str]:
    """gunicorn's start-up with the web container's config (platform/gunicorn.conf.py), up to serving."""
    return start_up([*GUNICORN, "--check-config"], cwd=REPO, env=production_env(**env), timeout=120)


def test_gunicorn_refuses_a_worker_count_that_is_not_a_number_and_takes_an_empty_one_as_the_default() -> None:
    done = gunicorn_check(GUNICORN_WORKERS="four")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == "GUNICORN_WORKERS must be a whole number, not 'four'"
    for name in ("GUNICORN_WORKERS", "GUNICORN_THREADS", "GUNICORN_TIMEOUT", "GUNICORN_BIND"):
        done = gunicorn_check(**{name: ""})  # as `GUNICORN_WORKERS=` in an env file
        assert done.returncode == 0, done.stderr[-2000:]


def test_the_test_settings_read_no_env_file_that_the_checkout_holds(tmp_path: Path) -> None:
    # A checkout with docker compose's .env (cp platform/env.example .env): the settings package, copied so that
    # its .env is this test's and not the shared checkout's.
    shutil.copytree(REPO / "config", tmp_path / "config", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "platform" / "env.example", tmp_path / ".env")
    probe = (
        "from django.conf import settings; print(settings.CACHES['default']['BACKEND'], settings.RESEARCH_YIELD_URL)"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    cache, yield_url = done.stdout.split()
    assert cache == "django.core.cache.backends.locmem.LocMemCache"  # not the .env's redis://redis:6379/1
    assert "redis:6379" not in yield_url


def test_an_empty_broker_url_is_the_embedded_broker_not_celerys_rabbitmq_on_localhost() -> None:
    # A `.env` line `CELERY_BROKER_URL=` read as a URL left Celery on its own default (amqp://localhost), which
    # no host runs: every question then waited for a broker that was not there.
    assert settings_of(["CELERY_BROKER_URL"], CELERY_BROKER_URL="")["CELERY_BROKER_URL"] == "filesystem://"


def test_check_deploy_says_when_a_host_runs_on_the_embedded_database_or_broker() -> None:
    """On one host of several, the embedded SQLite file and filesystem broker keep that host's answers and tasks
    where no other host sees them, and a cache in each process's memory counts the API's request rates per
    process; production settings still start on them (a fresh clone), so `check --deploy` names all three, and
    says nothing of them once the shared servers are set (platform/env.example's settings)."""
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "ENV_FILE": os.devnull,
        "SECRET_KEY": "a-test-secret-key-that-is-long-enough-for-the-checks-0123456789",
    }
    argv = [sys.executable, "manage.py", "check", "--deploy"]
    embedded = start_up(argv, cwd=REPO, env=env, timeout=120)
    assert embedded.returncode == 0, embedded.stderr
    assert "(satisfy.W001) The database is the SQLite file" in embedded.stderr
    assert "(satisfy.W002) The task broker is a folder on this host" in embedded.stderr
    assert "(satisfy.W003) The default cache is in each process's own memory" in embedded.stderr
    shared = {
        **env,
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/8",
        "CACHE_URL": "redis://127.0.0.1:6379/8",
    }
    served = start_up(argv, cwd=REPO, env=shared, timeout=120)
    said = served.stdout + served.stderr
    assert served.returncode == 0 and not [code for code in ("W001", "W002", "W003") if f"satisfy.{code}" in said], said


def test_check_deploy_says_when_the_brokers_redis_would_lose_queued_tasks(tmp_path: Path) -> None:
    """Issue 31: a Redis broker without persistence loses its queued messages on a restart; `check --deploy`
    says so until append-only persistence is on, and names a broker it cannot reach."""
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "ENV_FILE": os.devnull,
        "SECRET_KEY": "a-test-secret-key-that-is-long-enough-for-the-checks-0123456789",
        "DATABASE_URL": os.environ["DATABASE_URL"],
    }
    argv = [sys.executable, "manage.py", "check", "--deploy"]
    with redis_server(tmp_path) as broker:  # started with --save "" --appendonly no, as the machine's
        run = start_up(argv, cwd=REPO, env=env | {"CELERY_BROKER_URL": broker.url}, timeout=120)
        assert run.returncode == 0, run.stderr
        assert "(satisfy.W006) The broker's Redis keeps queued tasks in memory only" in run.stderr
        redis.Redis.from_url(broker.url).config_set("appendonly", "yes")
        run = start_up(argv, cwd=REPO, env=env | {"CELERY_BROKER_URL": broker.url}, timeout=120)
        assert run.returncode == 0 and "satisfy.W006" not in run.stderr, run.stderr
        broker.stop()
        run = start_up(argv, cwd=REPO, env=env | {"CELERY_BROKER_URL": broker.url}, timeout=120)
        assert run.returncode != 0 and "(satisfy.E004) The broker cannot be reached" in run.stderr


def test_a_reply_size_cap_is_read_in_bytes_and_one_under_a_byte_or_not_a_number_is_refused() -> None:
    read = settings_of(
        ["MODEL_SERVER_MAX_RESPONSE_BYTES", "OPENALEX_MAX_RESPONSE_BYTES"],
        MODEL_SERVER_MAX_RESPONSE_BYTES="1048576",
        OPENALEX_MAX_RESPONSE_BYTES="",
    )
    assert read == {"MODEL_SERVER_MAX_RESPONSE_BYTES": 1048576, "OPENALEX_MAX_RESPONSE_BYTES": 32 * 1024 * 1024}
    message = refused(MODEL_SERVER_MAX_RESPONSE_BYTES="0")
    assert "MODEL_SERVER_MAX_RESPONSE_BYTES must be a number of bytes, at least 1, not 0" in message
    assert "OPENALEX_MAX_RESPONSE_BYTES must be a whole number, not '32MB'" in refused(
        OPENALEX_MAX_RESPONSE_BYTES="32MB"
    )


POSTGRES = "postgres://satisfy@127.0.0.1:5432/satisfy"


def test_postgresql_connections_come_from_a_pool_sized_by_the_environment() -> None:
    database = settings_of(["DATABASES"], DATABASE_URL=POSTGRES, DATABASE_POOL_MAX_SIZE="2")["DATABASES"]
    default = database["default"]  # type: ignore[index]
    assert default["CONN_MAX_AGE"] == 0
    assert default["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 2, "timeout": 5.0, "max_idle": 300.0}
    off = settings_of(["DATABASES"], DATABASE_URL=POSTGRES, DATABASE_POOL="false")["DATABASES"]
    assert "pool" not in off["default"].get("OPTIONS", {}) and off["default"]["CONN_MAX_AGE"] == 60  # type: ignore[index]


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"CONN_MAX_AGE": "60"}, "CONN_MAX_AGE must be 0"),
        ({"DATABASE_POOL_MAX_SIZE": "0"}, "DATABASE_POOL_MAX_SIZE (0)"),
        ({"DATABASE_POOL_MIN_SIZE": "5", "DATABASE_POOL_MAX_SIZE": "4"}, "DATABASE_POOL_MIN_SIZE (5)"),
        ({"DATABASE_POOL_TIMEOUT_S": "0"}, "DATABASE_POOL_TIMEOUT_S"),
        ({"DATABASE_UNAVAILABLE_RETRY_AFTER_S": "0"}, "DATABASE_UNAVAILABLE_RETRY_AFTER_S"),
        ({"DATABASE_RETRY_WITHIN_S": "-1"}, "DATABASE_RETRY_WITHIN_S"),
    ],
)
def test_a_pool_setting_that_cannot_work_stops_start_up_naming_it(env: dict[str, str], names: str) -> None:
    assert names in refused(DATABASE_URL=POSTGRES, **env)


def _env_example() -> dict[str, str]:
    lines = (REPO / "platform" / "env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


GENERATE = 'python -c "import secrets; print(secrets.token_urlsafe(50))"'


def test_production_refuses_a_placeholder_secret_key_naming_it_and_how_to_make_one() -> None:
    """A key anyone can read (platform/env.example's, Django's startproject ones) or guess (short, plain) would
    let them sign a session as anyone: the server does not start, and says how to make a real key."""
    example = _env_example()["SECRET_KEY"]
    refusals = {
        example: "SECRET_KEY is a placeholder",
        "please-CHANGE-ME-" + "x" * 40: "SECRET_KEY is a placeholder",
        "django-insecure-" + "k3$v" * 12: "SECRET_KEY is a key Django's startproject wrote",
        "s3cr3t-but-short": "SECRET_KEY is 16 characters long; it must be at least 50",
        "ab" * 30: "SECRET_KEY has fewer than 5 different characters",
    }
    for key, reason in refusals.items():
        message = refused(SECRET_KEY=key)
        assert reason in message and GENERATE in message, (key, message)
    unset = refused(SECRET_KEY="")
    assert "Set SECRET_KEY" in unset and GENERATE in unset
    # A generated key starts; so does DEBUG=true without one (its embedded development key).
    assert settings_of(["DEBUG"], SECRET_KEY="Vq3-" + "f8Zr_0aLp" * 6) == {"DEBUG": False}
    assert settings_of(["DEBUG"], SECRET_KEY="", DEBUG="true") == {"DEBUG": True}


def test_production_refuses_a_placeholder_in_the_other_secrets() -> None:
    """A "change me" left in a server URL's password or an API key stops start-up naming which; the env.example
    values (the compose database's password, empty keys) start."""
    example = _env_example()
    # In compose the app's DATABASE_URL is the example's, or the bundled database's on its POSTGRES_PASSWORD.
    database_url = example.get("DATABASE_URL") or f"postgres://satisfy:{example['POSTGRES_PASSWORD']}@db:5432/satisfy"
    assert "change" not in database_url.lower()
    assert settings_of(["SECRET_KEY"], DATABASE_URL=database_url, LLM_API_KEY=example["LLM_API_KEY"])
    assert "The password in DATABASE_URL is a placeholder" in refused(
        DATABASE_URL="postgres://satisfy:change-me@db:5432/satisfy"
    )
    assert "The password in CELERY_BROKER_URL is a placeholder" in refused(
        CELERY_BROKER_URL="amqp://satisfy:CHANGEME@rabbitmq:5672/satisfy"
    )
    assert "AWS_SECRET_ACCESS_KEY is a placeholder" in refused(AWS_SECRET_ACCESS_KEY="your-secret-access-key")


def test_local_settings_start_without_a_secret_key() -> None:
    """bin/demo and manage.py on a fresh clone (config.settings.local) keep their throwaway key."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "ENV_FILE": os.devnull,
        "DATABASE_URL": "sqlite:///:memory:",
        "CELERY_BROKER_URL": "memory://",
    }
    code = "import django; django.setup(); from django.conf import settings; print(bool(settings.SECRET_KEY))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]


def test_api_request_rates_are_read_strictly() -> None:
    read = settings_of(["API_THROTTLE_RATES"], API_THROTTLE_RESEARCH="off", API_THROTTLE_ADMIN="20/second")
    assert read == {"API_THROTTLE_RATES": {"annotator": "300/minute", "research": None, "admin": "20/second"}}
    # DRF reads "300/mo" as 300 a minute and "lots/minute" as a crash at the first request.
    for rate in ("300/mo", "lots/minute", "0/minute", "300"):
        message = refused(API_THROTTLE_ANNOTATOR=rate)
        assert "API_THROTTLE_ANNOTATOR must be a number of requests" in message and repr(rate) in message, message
