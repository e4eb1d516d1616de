"""A `redis-server` of the test's own on a free port, without persistence, that the test can stop and
start again: a broker (and model-server limiter) restart, as a deployment's Redis restarts.

    with redis_server() as server:
        server.url            # redis://127.0.0.1:<port>/0
        server.restart(down_s=2.0)   # every key is gone afterwards, as with a Redis without persistence

Never the machine's Redis: the port is one the kernel hands out free.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import require

READY_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        # Skipped on a developer's machine without it; CI, which starts the machine's redis-server, must have it.
        require(binary is not None, "redis-server is not installed (apt-get install redis-server)")
        assert binary is not None
        args = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(self.directory), "--protected-mode", "no", "--loglevel", "warning",
        ]  # fmt: skip
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} not ready after {READY_TIMEOUT_S:.0f}s")

    def stop(self) -> None:
        """SIGKILL: nothing is written anywhere, every message and lease is lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self, *, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
        self.restarts += 1


@contextmanager
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir(exist_ok=True)
    server = RedisServer(port=free_port(), directory=directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
