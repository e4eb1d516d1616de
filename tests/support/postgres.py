"""A PostgreSQL server of a test's own (`initdb` into a temporary folder, `pg_ctl` on a free loopback port), so a
test can stop and start it while requests flow: the machine's server (5432) is shared and never restarted.

    with postgres_cluster() as cluster:
        cluster.url             # postgres://postgres@127.0.0.1:<port>/satisfy
        cluster.stop(); cluster.start()
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DATABASE = "satisfy"


def postgres_bin() -> Path | None:
    """The newest server binaries under /usr/lib/postgresql/*/bin, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user() -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its programs as the postgres user."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@dataclass
class Cluster:
    bin: Path
    folder: Path
    port: int
    max_connections: int = 100

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def _run(self, *argv: str, timeout: float = 60) -> None:
        subprocess.run([*_as_server_user(), *argv], check=True, timeout=timeout, capture_output=True, cwd=self.folder)

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        """Start the server and wait until it accepts connections (pg_ctl -w)."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.folder} "
            f"-c max_connections={self.max_connections} -c fsync=off -c full_page_writes=off"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options,
            "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop it as a restart does (fast: open connections are ended, clients see them break)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def psql(self, sql: str, *, database: str = DATABASE) -> str:
        """One statement's rows, tab-separated, one per line."""
        result = subprocess.run(
            [str(self.bin / "psql"), "-X", "-At", "-F", "\t", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", "-d", database, "-c", sql],
            check=True, timeout=30, capture_output=True, text=True,
        )  # fmt: skip
        return result.stdout.strip()


@contextmanager
def postgres_cluster(*, max_connections: int = 100) -> Iterator[Cluster]:
    """A fresh server with an empty database `satisfy`, stopped and removed when the block ends. Its folder is
    a new one under the system's temporary folder: the server's user must be able to reach it (pytest's
    tmp_path is private to root)."""
    binaries = postgres_bin()
    if binaries is None:
        raise RuntimeError("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin")
    folder = Path(tempfile.mkdtemp(prefix="satisfy-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    cluster = Cluster(bin=binaries, folder=folder, port=free_port(), max_connections=max_connections)
    cluster.init()
    cluster.start()
    try:
        cluster.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        yield cluster
    finally:
        if cluster.running():
            try:
                cluster.stop()
            except subprocess.SubprocessError:
                subprocess.run(
                    [*_as_server_user(), str(binaries / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "stop"],
                    timeout=30, capture_output=True, check=False,
                )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
