"""The web health check passes with platform/env.example (ALLOWED_HOSTS=eval.example.org, HTTPS redirect on):
/healthz/ answers on any host name and over plain HTTP, and nothing else is loosened."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.db import connection

REPO = Path(__file__).resolve().parents[2]

# Settings loaded from env.example exactly as the containers load .env; only the database is this test's.
PROBE = r"""
import json, sys, django
django.setup()
from django.test import Client
client = Client(raise_request_exception=False)
out = {}
for name, path, host in json.loads(sys.argv[1]):
    response = client.get(path, HTTP_HOST=host)
    out[name] = [response.status_code, response.get("Location", "")]
print(json.dumps(out))
"""


def probe(requests: list[tuple[str, str, str]], **env: str) -> dict[str, list[object]]:
    s = connection.settings_dict
    database = f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    child_env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE", "ALLOWED_HOSTS"}}
    child_env |= {
        "ENV_FILE": str(REPO / "platform" / "env.example"),
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DATABASE_URL": database,
        "PYTHONPATH": str(REPO),
        **env,
    }
    for key in ("SECURE_SSL_REDIRECT", "DEBUG", "SECRET_KEY", "CELERY_BROKER_URL", "CACHE_URL"):
        child_env.pop(key, None)  # env.example's values, not the test run's
    child_env["CACHE_URL"] = "locmemcache://"
    # A generated key, as docs/deploy.md asks of every deployment: env.example's placeholder is refused at start-up.
    child_env["SECRET_KEY"] = secrets.token_urlsafe(50)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(requests)],
        cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def compose_health_host() -> str:
    test = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["web"]["healthcheck"]["test"]
    assert "http://127.0.0.1:8000/healthz/" in " ".join(test)
    return "127.0.0.1:8000"  # the Host header urllib sends for that URL


@pytest.mark.django_db(transaction=True)
def test_the_compose_health_check_passes_with_env_example_and_allowed_hosts_still_hold() -> None:
    host = compose_health_host()
    got = probe(
        [
            ("health", "/healthz/", host),
            ("health-container-name", "/healthz/", "web:8000"),
            ("other-page-wrong-host", "/accounts/login/", host),
            ("other-page-right-host-plain-http", "/accounts/login/", "eval.example.org"),
        ]
    )
    assert got["health"] == [200, ""]
    assert got["health-container-name"] == [200, ""]
    assert got["other-page-wrong-host"][0] == 400  # DisallowedHost: ALLOWED_HOSTS not weakened
    assert got["other-page-right-host-plain-http"] == [301, "https://eval.example.org/accounts/login/"]


@pytest.mark.django_db(transaction=True)
def test_the_health_check_fails_when_the_database_is_unreachable() -> None:
    got = probe([("health", "/healthz/", "127.0.0.1:8000")], DATABASE_URL="postgres://nobody@127.0.0.1:1/none")
    assert got["health"][0] == 503
