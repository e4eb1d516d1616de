#!/usr/bin/env python
"""Recycling benchmark: real gunicorn (platform/gunicorn.conf.py) on a PostgreSQL server of its own, its workers
recycled every `--max-requests` requests, under sequential (kept-alive and new-connection) and concurrent
requests; prints each phase's latencies (median, p95, max), how many took longer than 1 s, and the recycles.
Target: none failed, none slower than 1 s. Run from the repository root: `.venv/bin/python bench/recycle.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


from tests.support.site import send_requests, site_on_own_database  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-requests", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="per phase (concurrent: per client)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients in the last phase")
    args = parser.parse_args()
    failed = 0
    with site_on_own_database() as site:
        site.start_server(GUNICORN_WORKERS=str(args.workers), GUNICORN_MAX_REQUESTS=str(args.max_requests))
        print(f"{'phase':<22} {'requests':>8} {'failed':>6} {'>1 s':>5} {'median':>8} {'p95':>8} {'max':>8}")
        for phase in ("sequential kept-alive", "sequential new conn", "concurrent"):
            answers: list[tuple[int | str, float]] = []
            if phase == "concurrent":
                threads = [
                    threading.Thread(
                        target=send_requests,
                        kwargs={"site": site, "requests": args.requests, "keep_alive": True, "into": answers},
                    )
                    for _ in range(args.clients)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                send_requests(site, requests=args.requests, keep_alive=phase.endswith("kept-alive"), into=answers)
            seconds = sorted(s for _, s in answers)
            bad = sum(outcome != 200 for outcome, _ in answers)
            failed += bad
            p95 = seconds[int(0.95 * (len(seconds) - 1))]
            print(
                f"{phase:<22} {len(answers):>8} {bad:>6} {sum(s > 1 for s in seconds):>5} "
                f"{statistics.median(seconds) * 1000:>6.0f}ms {p95 * 1000:>6.0f}ms {seconds[-1] * 1000:>6.0f}ms"
            )
        site.stop_server()
        print(f"recycles: {site.log.read_text().count('Autorestarting worker')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
