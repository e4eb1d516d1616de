#!/usr/bin/env python
"""Scale-out of the backends (issue 13): parts (1), (2) and (4); part (3) is bench/scale.py's.

(1) generation throughput with 1, 2 and 4 client processes (each CLIENT_THREADS threads, the shared Redis
    limiter, a limit high enough not to bind) against the OpenAI-compatible stand-in with a fixed delay,
    beside the ideal (calls x delay / (processes x threads));
(2) an export written by a "worker" process with its own MEDIA_ROOT into S3-compatible storage (moto in server
    mode) and downloaded by this process (another MEDIA_ROOT) through the download view's code path
    (`analysis.downloads.stored_file_response`), bytes compared;
(4) the peak concurrency the stand-in sees from 3 processes x 4 threads against a limit of 4.

Run from the repository root with Redis up: `.venv/bin/python bench/scale_backends.py [--long]`
(REDIS_URL, default redis://127.0.0.1:6379/14). bench/scale.py imports `run()` and prints `table(rows)`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CLIENT_THREADS = 4


def _workers(urls: str, redis_url: str, prefix: str, *, limit: int, processes: int, calls: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [urls, redis_url, prefix, str(limit), str(CLIENT_THREADS), str(calls), "30"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.modelserver._limit_worker", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    lines: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode:
            raise SystemExit(f"a client process failed:\n{err}")
        lines += out.splitlines()
    return lines


def throughput(redis_url: str, *, delay: float, calls: int) -> list[dict[str, Any]]:
    from tests.support.openai_standin import openai_standin

    rows = []
    for processes in (1, 2, 4):
        with openai_standin(delay=delay) as server:
            total = processes * CLIENT_THREADS * calls
            # Timed at the server, from the first request in to the last answer out: process start-up is not
            # generation (a worker starts once and then serves for hours).
            seen: dict[str, float] = {}

            def watch(server: Any = server, total: int = total, seen: dict[str, float] = seen) -> None:
                while "last" not in seen:
                    now = time.perf_counter()
                    if server.completions and "first" not in seen:
                        seen["first"] = now
                    if server.completions >= total and server.in_flight == 0:
                        seen["last"] = now
                    time.sleep(0.002)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            lines = _workers(
                server.base_url, redis_url, f"bench:{uuid.uuid4().hex}", limit=64, processes=processes, calls=calls
            )
            watcher.join(timeout=5)
            wall = seen.get("last", time.perf_counter()) - seen.get("first", 0.0)
            ok = lines.count("ok")
            ideal = calls * delay  # every thread's calls back to back
            rows.append(
                {
                    "part": "1 throughput",
                    "case": f"{processes} proc x {CLIENT_THREADS} thr, {total} calls, delay {delay:g}s",
                    "measured": f"{ok / wall:.1f} calls/s ({wall:.2f}s, first request to last answer)",
                    "target": f"ideal {total / ideal:.1f} calls/s ({ideal:.2f}s)",
                    "ok": ok == total,
                }
            )
    return rows


def peak(redis_url: str, *, delay: float, calls: int) -> dict[str, Any]:
    from tests.support.openai_standin import openai_standin

    with openai_standin(delay=delay) as server:
        lines = _workers(server.base_url, redis_url, f"bench:{uuid.uuid4().hex}", limit=4, processes=3, calls=calls)
        return {
            "part": "4 peak concurrency",
            "case": f"3 proc x {CLIENT_THREADS} thr, limit 4, {len(lines)} calls",
            "measured": f"peak {server.peak_in_flight} in flight",
            "target": "<= 4 (and = 4)",
            "ok": server.peak_in_flight == 4 and lines.count("ok") == len(lines),
        }


_WRITER = """
import os, sys, django
django.setup()
from django.core.files.base import ContentFile
from django.core.files.storage import storages
payload = open(sys.argv[1], "rb").read()
storage = storages["research"]
storage.save(sys.argv[2], ContentFile(payload))
print(os.environ["MEDIA_ROOT"])
"""


def object_storage(*, megabytes: int) -> dict[str, Any]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    s3_env = {
        "RESEARCH_STORAGE": "s3",
        "AWS_STORAGE_BUCKET_NAME": "bench-research",
        "AWS_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_S3_REGION_NAME": "us-east-1",
    }
    try:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=s3_env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=s3_env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        ).create_bucket(Bucket="bench-research")
        with tempfile.TemporaryDirectory() as tmp:
            export = Path(tmp) / "comparisons.csv"
            row = "match,annotator,left_system,right_system,choice\n"
            with export.open("w") as fh:
                while fh.tell() < megabytes * 1024 * 1024:
                    fh.write(row)
            key = f"research/job-bench-{uuid.uuid4().hex[:8]}/comparisons.csv"
            env = {
                **os.environ,
                **s3_env,
                "PYTHONPATH": str(REPO),
                "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.test"),
                "MEDIA_ROOT": str(Path(tmp) / "worker-media"),
            }
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", _WRITER, str(export), key], env=env, check=True, cwd=REPO)
            written = time.perf_counter() - started

            os.environ.update(s3_env, MEDIA_ROOT=str(Path(tmp) / "web-media"))
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
            import django

            django.setup()
            from django.core.files.storage import storages

            from analysis.downloads import stored_file_response

            started = time.perf_counter()
            response = stored_file_response(storages["research"], key, "comparisons.csv", as_attachment=True)
            body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
            read = time.perf_counter() - started
            same = hashlib.sha256(body).digest() == hashlib.sha256(export.read_bytes()).digest()
            no_shared_disk = not (Path(tmp) / "web-media").exists()
        return {
            "part": "2 object storage",
            "case": f"{megabytes} MiB export, worker and web on separate MEDIA_ROOTs",
            "measured": f"upload {written:.2f}s (incl. start-up), download {read:.2f}s "
            f"({megabytes / read:.0f} MiB/s), bytes {'equal' if same else 'DIFFER'}",
            "target": "bytes equal, no shared disk",
            "ok": same and no_shared_disk,
        }
    finally:
        server.stop()


def run(*, long: bool = False, redis_url: str | None = None) -> list[dict[str, Any]]:
    url = redis_url or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/14")
    calls = 10 if long else 3
    rows = throughput(url, delay=0.2, calls=calls)
    rows.append(object_storage(megabytes=64 if long else 4))
    rows.append(peak(url, delay=0.1, calls=calls))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = ("part", "case", "measured", "target", "ok")
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = [" | ".join(c.ljust(width[c]) for c in cols), "-+-".join("-" * width[c] for c in cols)]
    lines += [" | ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="more calls and a 64 MiB export")
    parser.add_argument("--redis-url", default=None, help="Redis for the shared limit (env REDIS_URL)")
    args = parser.parse_args()
    rows = run(long=args.long, redis_url=args.redis_url)
    print(table(rows))
    if not all(r["ok"] for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
