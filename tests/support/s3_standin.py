"""A local S3: moto in server mode, a process speaking the real S3 protocol over HTTP on a free loopback port;
`S3StandIn` can be stopped and started again on its port (its buckets kept, as a restarted store keeps its disk)
and made to check keys; `StoreFront` stands before it and makes it hang or throttle."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import requests
from botocore.config import Config
from django.core.files.storage import storages
from moto.server import ThreadedMotoServer

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region_name": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3StandIn:
    """One moto S3 server on a port of its own, which a test may stop and start again (the buckets and objects are
    moto's, in this process: a store that comes back finds them)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: ThreadedMotoServer | None = None

    def start(self) -> S3StandIn:
        if self._server is None:
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
            self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Forget every bucket: moto keeps them in this process, where the next test's stand-in would find them."""
        requests.post(f"{self.endpoint}/moto-api/reset", timeout=10).raise_for_status()

    def check_keys(self, on: bool = True) -> None:
        """Make moto check every request's access key against its own IAM, where none exists: any key is unknown
        (InvalidAccessKeyId), as a wrong key is to a real store. Process-wide in moto: turn it off again."""
        requests.post(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0" if on else b"inf", timeout=10
        ).raise_for_status()


@contextlib.contextmanager
def s3_standin(*, bucket: str | None = None) -> Iterator[S3StandIn]:
    """A running S3StandIn (with an empty `bucket`, if named), stopped at the end with its key checks off and its
    buckets gone."""
    store = S3StandIn().start()
    try:
        if bucket:
            bucket_client(store.endpoint).create_bucket(Bucket=bucket)
        yield store
    finally:
        with contextlib.suppress(Exception):
            store.start().check_keys(on=False)
            store.reset()
        store.stop()


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """A moto S3 server; yields its endpoint URL."""
    with s3_standin() as store:
        yield store.endpoint


def use_s3(
    settings: Any,
    endpoint: str,
    *,
    bucket: str,
    prefix: str = "",
    public: str | None = None,
    credentials: dict[str, str] | None = None,
) -> None:
    """Point this process's research storage at the bucket (pytest-django's `settings`), as RESEARCH_STORAGE=s3
    does (config/settings/base.py), with short time-outs."""
    settings.STORAGES = {
        **settings.STORAGES,
        "research": {
            "BACKEND": "kernel.storage.ResearchS3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": endpoint,
                "public_endpoint_url": public,
                "location": prefix,
                "file_overwrite": True,
                "client_config": Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 2}),
                **(credentials or CREDENTIALS),
            },
        },
    }
    storages._storages.pop("research", None)  # the handler caches the instance per alias


def bucket_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=CREDENTIALS["access_key"],
        aws_secret_access_key=CREDENTIALS["secret_key"],
        region_name=CREDENTIALS["region_name"],
    )


SLOW_DOWN = (
    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
)
SLOW_DOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class StoreFront:
    """A TCP front on a port of its own for the store at `upstream_port`. Each connection it accepts is handled as
    `mode` says at that moment: "pass" (through to the store), "hang" (taken and read, never answered: a store that
    hangs) or "slowdown" (each request answered 503 SlowDown, as S3 throttles). `accepted` counts them by mode."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.mode = "pass"
        self.accepted: Counter[str] = Counter()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="store-front", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            mode = self.mode
            self.accepted[mode] += 1
            self._open.append(client)
            handler = {"pass": self._pass, "hang": self._hang, "slowdown": self._slow_down}[mode]
            threading.Thread(target=handler, args=(client,), daemon=True).start()

    def _pass(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
        except OSError:
            client.close()
            return
        self._open.append(upstream)
        upstream.settimeout(None)

        def pump(source: socket.socket, sink: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(65536):
                    sink.sendall(data)
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def _hang(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while client.recv(65536):  # until the client gives up and closes
                pass
        client.close()

    def _slow_down(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    break
                head += chunk
            client.sendall(SLOW_DOWN % (len(SLOW_DOWN_BODY), SLOW_DOWN_BODY))
        client.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.close()


@contextlib.contextmanager
def store_front(upstream_port: int) -> Iterator[StoreFront]:
    front = StoreFront(upstream_port)
    try:
        yield front
    finally:
        front.close()
