"""Invitation tokens never reach a log: Django's request warnings for a join link that is wrong, expired
or used up, the accept API's, and gunicorn's access log of the real server with the project's config."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from kernel.logging import redact
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import StudyFactory

REPO = Path(__file__).resolve().parents[2]


def test_redact_replaces_the_token_of_every_token_bearing_url():
    # Worked by hand from annotation/urls.py and annotation/api/urls.py.
    assert redact("Not Found: /join/AbC-12_x/") == "Not Found: /join/[redacted]/"
    assert redact('"POST /api/v1/invitations/tok3n/accept/ HTTP/1.1" 410') == (
        '"POST /api/v1/invitations/[redacted]/accept/ HTTP/1.1" 410'
    )
    assert redact("https://eval.example.org/join/abc?x=1") == "https://eval.example.org/join/[redacted]?x=1"
    assert redact("/study/sleep/ask/") == "/study/sleep/ask/"
    # The admin's invitation search by token.
    assert redact("GET /admin/studies/invitation/?study__id__exact=2&q=tok3n HTTP/1.1") == (
        "GET /admin/studies/invitation/?study__id__exact=2&q=[redacted] HTTP/1.1"
    )
    assert redact("/admin/studies/study/?q=sleep") == "/admin/studies/study/?q=sleep"


@pytest.mark.django_db
def test_django_request_warnings_for_join_links_carry_no_token(caplog):
    study = StudyFactory(slug="logs")
    expired, used = invitation_create_bulk(study=study, count=2)
    expired.expires_at = timezone.now() - timedelta(days=1)
    expired.save(update_fields=["expires_at"])
    used.uses = used.max_uses
    used.save(update_fields=["uses"])
    unknown = "NotARealToken-0123456789abcdef"
    client = Client()
    with caplog.at_level(logging.INFO):
        assert client.get(f"/join/{unknown}/").status_code == 404
        assert client.get(f"/join/{expired.token}/").status_code == 410
        assert client.get(f"/join/{used.token}/").status_code == 410
        accepted = client.post(
            f"/api/v1/invitations/{expired.token}/accept/", {"consent": True}, content_type="application/json"
        )
        assert accepted.status_code == 410
    request_lines = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert len(request_lines) == 4  # each refusal was logged...
    assert "Not Found: /join/[redacted]/" in request_lines and "Gone: /join/[redacted]/" in request_lines
    for token in (unknown, expired.token, used.token):  # ...without its token
        assert token not in caplog.text


def test_the_runserver_log_carries_no_token(caplog):
    with caplog.at_level(logging.INFO, logger="django.server"):
        logging.getLogger("django.server").info('"%s" %s %s', "GET /join/s3cret-token/ HTTP/1.1", 404, 120)
    assert caplog.records[-1].getMessage() == '"GET /join/[redacted]/ HTTP/1.1" 404 120'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.django_db
def test_gunicorns_access_log_with_the_project_config_carries_no_token(tmp_path):
    """The real server: gunicorn with platform/gunicorn.conf.py on a free port, the test database behind it."""
    port = _free_port()
    access_log = tmp_path / "access.log"
    db = connection.settings_dict
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "1",
        "GUNICORN_ACCESSLOG": str(access_log),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "platform/gunicorn.conf.py", "config.wsgi"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    token = "Sup3rSecretInvitationToken_0123"
    try:
        # Booting Django on two loaded cores, about 2 s alone; the master also loads the URLconf and the templates
        # before its worker forks (config/warmup.py), 10 s more at a load average of 11.
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz/", timeout=5)
                break
            except OSError:  # refused while it binds, or a timeout while the worker imports Django
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.1)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/join/{token}/?utm=newsletter",
            headers={"Referer": f"http://127.0.0.1:{port}/join/{token}/"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 404
    finally:
        server.terminate()
        # What the logs hold is under test, not how fast the server stops: on a loaded CI host its graceful
        # shutdown (workers exit, then the master) took over 10 s.
        output = server.communicate(timeout=90)[0].decode()
    logged = access_log.read_text()
    assert 'GET /join/[redacted]/?utm=newsletter HTTP/1.1" 404 ' in logged  # the request was logged...
    assert token not in logged  # ...without its token, in the path, query or referer
    assert "Not Found: /join/[redacted]/" in output and token not in output  # nor in Django's warning
