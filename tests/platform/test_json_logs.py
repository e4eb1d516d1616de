"""LOG_FORMAT=json: one JSON object per log line, carrying the request's id (the one the proxy sent in
X-Request-ID, echoed back, or a new one) with invitation tokens still redacted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

REPO = Path(__file__).resolve().parents[2]
TOKEN = "inv-7d1e5c3b9a2f4e6d"

SCRIPT = f"""
import django
django.setup()
from django.test import Client
client = Client()
client.get("/join/{TOKEN}/no/such/page/", HTTP_X_REQUEST_ID="proxy-id-42")
client.get("/join/{TOKEN}/no/such/page/either/")
"""


def test_json_log_lines_carry_the_request_id_and_no_token() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "LOG_FORMAT": "json",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    not_found = [line for line in lines if line.get("logger") == "django.request"]
    assert len(not_found) == 2, done.stderr[-2000:]
    assert not_found[0]["request_id"] == "proxy-id-42"
    assert len(not_found[1]["request_id"]) == 32 and not_found[1]["request_id"] != "proxy-id-42"
    assert not_found[0]["level"] == "WARNING" and "/join/[redacted]/" in not_found[0]["message"]
    assert TOKEN not in done.stderr


@pytest.mark.django_db
def test_the_request_id_is_echoed_back_or_made() -> None:
    client = Client()
    assert client.get("/accounts/login/", HTTP_X_REQUEST_ID="proxy-id-42")["X-Request-ID"] == "proxy-id-42"
    made = client.get("/accounts/login/", HTTP_X_REQUEST_ID="not an id; DROP")["X-Request-ID"]
    assert made != "not an id; DROP" and len(made) == 32


TRACEBACK_SCRIPT = f"""
import logging, django
django.setup()
try:
    raise RuntimeError("could not send https://eval.example.org/join/{TOKEN}/ to the mailer")
except RuntimeError:
    logging.getLogger("annotation").exception("invitation e-mail failed")
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_traceback_in_the_log_carries_no_token(log_format: str) -> None:
    """A filter sees a record's message, not the traceback formatted after it: an exception whose text holds an
    invitation link must still reach the log redacted, in either format."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "LOG_FORMAT": log_format}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", TRACEBACK_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "invitation e-mail failed" in done.stderr and "Traceback" in done.stderr
    assert "/join/[redacted]/ to the mailer" in done.stderr
    assert TOKEN not in done.stderr
