"""The production web server (gunicorn with platform/gunicorn.conf.py) on a PostgreSQL server of its own
(tests/support/postgres.py): migrated, with the demo study seeded, so a test can stop the database or make
gunicorn recycle its workers while real HTTP requests flow. Test settings (eager tasks: a question's
summaries are written inside the request, no Celery worker needed)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.postgres import Cluster, free_port, postgres_cluster

REPO = Path(__file__).resolve().parents[2]
GUNICORN_CONF = REPO / "platform" / "gunicorn.conf.py"
BIN = Path(sys.executable).parent


@dataclass
class Site:
    cluster: Cluster
    env: dict[str, str]
    folder: Path
    invitation: str = ""
    port: int = 0
    server: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log: Path = field(default_factory=Path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *argv: str) -> str:
        result = subprocess.run(
            [str(BIN / "python"), "manage.py", *argv], cwd=REPO, env=self.env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(argv)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def start_server(self, **settings: str) -> None:
        """Start gunicorn (`settings`: GUNICORN_* and other environment) and wait until /healthz/ answers 200."""
        self.stop_server()
        self.starts += 1
        self.port = free_port()
        self.log = self.folder / f"gunicorn-{self.starts}.log"
        env = {**self.env, "GUNICORN_BIND": f"127.0.0.1:{self.port}", "GUNICORN_WORKERS": "2", **settings}
        with self.log.open("wb") as log:
            self.server = subprocess.Popen(
                [str(BIN / "gunicorn"), "-c", str(GUNICORN_CONF), "config.wsgi:application"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/healthz/", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"gunicorn did not answer within 120 s:\n{self.log_tail()}")

    def stop_server(self) -> None:
        if self.server is None:
            return
        if self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)
            try:
                self.server.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait(timeout=10)
        self.server = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_for_database(self, *, timeout: float = 60) -> None:
        """Until /healthz/ (which reads the database) answers 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz/", timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"the site did not reach its database again within {timeout} s:\n{self.log_tail()}")


@contextmanager
def site_on_own_database() -> Iterator[Site]:
    """A migrated, seeded database on a server of its own, and the settings to run the site against it; start
    gunicorn with `site.start_server()`. Everything is stopped and removed when the block ends."""
    folder = Path(tempfile.mkdtemp(prefix="satisfy-site-"))
    with postgres_cluster() as cluster:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": cluster.url,
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "ENV_FILE": os.devnull,
            "PYTHONPATH": str(REPO),
            "STATIC_ROOT": str(folder / "static"),  # served by WhiteNoise, as in the image (collectstatic)
        }
        site = Site(cluster=cluster, env=env, folder=folder)
        try:
            site.manage("migrate", "--noinput")
            site.manage("collectstatic", "--noinput")
            out = site.manage("seed_demo", "--uses", "50", "--admin-password-file", str(folder / "admin-password"))
            found = re.search(r"/join/([^/\s]+)/", out)
            if not found:
                raise RuntimeError(f"seed_demo printed no invitation link:\n{out}")
            site.invitation = found.group(1)
            yield site
        finally:
            site.stop_server()
            shutil.rmtree(folder, ignore_errors=True)


def send_requests(site: Site, *, requests: int, keep_alive: bool, into: list[tuple[int | str, float]]) -> None:
    """Alternate the home page and /healthz/ ``requests`` times, on one kept-alive connection or a new one each,
    appending (status or error name, seconds) per request: what a worker recycle costs the requests around it
    (tests/faults/test_web_worker_recycling.py, bench/recycle.py)."""
    with httpx.Client(base_url=site.url, timeout=60) as client:
        for number in range(requests):
            path = "/healthz/" if number % 2 else "/"
            started = time.monotonic()
            try:
                response = client.get(path) if keep_alive else httpx.get(f"{site.url}{path}", timeout=60)
                outcome: int | str = response.status_code
            except httpx.HTTPError as error:
                outcome = type(error).__name__
            into.append((outcome, time.monotonic() - started))
