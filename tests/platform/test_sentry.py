"""Error reports (config/sentry.py) reach a Sentry server from a failing view and a failing task, with the
invitation token that was in the address and in the error scrubbed out. The server is a stand-in on this
machine that keeps the envelopes the SDK sends."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client

from config.sentry import sentry_init

TOKEN = "inv-4f9c2d7e1b8a6f3c"


@pytest.fixture
def sentry_standin() -> Iterator[list[bytes]]:
    envelopes: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding == "br":
                import brotli  # type: ignore[import-not-found]

                body = brotli.decompress(body)
            envelopes.append(body)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sentry_init(dsn=f"http://public@127.0.0.1:{server.server_port}/1", environment="test", traces_sample_rate=0.0)
    try:
        yield envelopes
    finally:
        import sentry_sdk

        sentry_sdk.get_client().close(timeout=2)
        sentry_sdk.init(dsn=None)  # reports off again for the other tests
        server.shutdown()


def _flush() -> None:
    import sentry_sdk

    sentry_sdk.flush(timeout=5)


@pytest.mark.django_db
def test_a_failing_view_is_reported_without_the_token(sentry_standin: list[bytes], settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.platform.boom_urls"
    client = Client(raise_request_exception=False)
    assert client.get(f"/join/{TOKEN}/boom/?PROLIFIC_PID=someone-123").status_code == 500
    _flush()
    payload = b"".join(sentry_standin)
    assert b"a view failed on /join/[redacted]/" in payload
    assert TOKEN.encode() not in payload
    assert b"someone-123" not in payload


@pytest.mark.django_db
def test_a_failing_task_is_reported_without_the_token(sentry_standin: list[bytes]) -> None:
    from config.celery import app

    @app.task(name="tests.platform.failing_task")
    def failing_task(token: str) -> None:
        raise ValueError(f"a task failed on /join/{token}/")

    with pytest.raises(ValueError, match="a task failed"):
        failing_task.apply(args=[TOKEN])
    _flush()
    payload = b"".join(sentry_standin)
    assert b"a task failed on /join/[redacted]/" in payload
    assert b"tests.platform.failing_task" in payload
    assert TOKEN.encode() not in payload
