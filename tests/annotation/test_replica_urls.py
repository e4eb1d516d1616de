"""A system's base_url may list replicas of one model: every one is checked like a single address."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from generation.openai_chat import OpenAIChatGeneration
from generation.registry import get_generation_backend
from studies.models import Study


def openai_backend(options: dict[str, Any]) -> OpenAIChatGeneration:
    """The backend as a study system gets it: configured from the deployment's settings (generation.settings)."""
    backend = get_generation_backend("openai", options)
    assert isinstance(backend, OpenAIChatGeneration)
    return backend


pytestmark = pytest.mark.django_db


def _systems(base_url: object) -> list[dict]:
    return [
        {
            "label": f"s{i}",
            "model_name": f"m{i}",
            "condition": "generic",
            "generation_backend": "openai",
            "backend_settings": {"base_url": base_url},
        }
        for i in range(2)
    ]


@pytest.fixture
def admin() -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", password="pw"))
    return client


def test_every_replica_must_be_on_an_allowed_host(admin: APIClient, settings) -> None:
    settings.MODEL_SERVER_ALLOWED_HOSTS = ["gpu1.lab", "gpu2.lab"]
    body = {"slug": "replicas", "title": "Replicas"}
    sneaky = _systems(["http://gpu1.lab:8000/v1", "http://169.254.169.254/latest"])
    refused = admin.post("/api/v1/admin/studies/", {**body, "systems": sneaky}, format="json")
    assert refused.status_code == 400
    assert "host '169.254.169.254' is not allowed" in refused.json()["extra"]["fields"]["systems"][0]
    not_a_url = admin.post(
        "/api/v1/admin/studies/", {**body, "systems": _systems(["http://gpu1.lab/v1", 7])}, format="json"
    )
    assert not_a_url.status_code == 400 and "http:// or https://" in not_a_url.json()["message"]
    assert not Study.objects.filter(slug="replicas").exists()

    both = _systems(["http://gpu1.lab:8000/v1", "http://gpu2.lab:8000/v1"])
    created = admin.post("/api/v1/admin/studies/", {**body, "systems": both}, format="json")
    assert created.status_code == 201, created.json()


def test_a_list_a_comma_separated_string_and_one_url_configure_the_client(settings) -> None:
    settings.LLM_BASE_URLS = ""
    one = openai_backend({"base_url": "http://a:1/v1"}).config_for("m")
    assert (one.base_url, one.replicas) == ("http://a:1/v1", ("http://a:1/v1",))
    listed = openai_backend({"base_url": ["http://a:1/v1", "http://b:1/v1"]}).config_for("m")
    assert listed.replicas == ("http://a:1/v1", "http://b:1/v1")
    settings.LLM_BASE_URLS = "http://c:1/v1, http://d:1/v1"
    assert openai_backend({}).config_for("m").replicas == ("http://c:1/v1", "http://d:1/v1")


def test_the_operators_own_replicas_are_allowed_by_default(tmp_path) -> None:
    """Without MODEL_SERVER_ALLOWED_HOSTS, the hosts of LLM_BASE_URL and of every LLM_BASE_URLS replica are
    allowed (settings are read once at start-up, so a fresh process reads them)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "MODEL_SERVER_ALLOWED_HOSTS"}
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "LLM_BASE_URL": "http://gpu0.lab:8000/v1",
        "LLM_BASE_URLS": "http://gpu1.lab:8000/v1, http://gpu2.lab:8001/v1",
    }
    code = "import django; django.setup(); from django.conf import settings; print(settings.MODEL_SERVER_ALLOWED_HOSTS)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == "['gpu0.lab', 'gpu1.lab', 'gpu2.lab', 'localhost', '127.0.0.1', '::1']"


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        (["[fd00::5]"], "http://[fd00::5]:8000/v1"),  # Django's spelling, as in ALLOWED_HOSTS
        (["localhost", "127.0.0.1", "::1"], "http://[::1]:8000/v1"),  # the default's spelling
    ],
)
def test_an_ipv6_model_server_is_allowed_in_either_spelling(admin: APIClient, settings, allowed, url) -> None:
    settings.MODEL_SERVER_ALLOWED_HOSTS = allowed
    body = {"slug": "ipv6", "title": "IPv6"}
    other = admin.post("/api/v1/admin/studies/", {**body, "systems": _systems("http://[fd00::6]/v1")}, format="json")
    assert other.status_code == 400
    assert "host 'fd00::6' is not allowed" in other.json()["extra"]["fields"]["systems"][0]
    created = admin.post("/api/v1/admin/studies/", {**body, "systems": _systems(url)}, format="json")
    assert created.status_code == 201, created.json()
