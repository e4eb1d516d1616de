"""A local S3: moto in server mode, a process speaking the real S3 protocol over HTTP on a free loopback port."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region_name": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """A moto S3 server; yields its endpoint URL."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def bucket_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=CREDENTIALS["access_key"],
        aws_secret_access_key=CREDENTIALS["secret_key"],
        region_name=CREDENTIALS["region_name"],
    )
