"""gunicorn recycling its workers (max_requests) while requests flow: real gunicorn with
platform/gunicorn.conf.py, its workers made to recycle every few dozen requests. A recycle must cost no request
an error or a wait: before, a recycled worker took 3-6 s to exit (its database pool's threads, then the
interpreter tearing down memory shared with the master) and the master replaces a worker only once it has
exited, so when the workers recycled together nothing accepted for seconds (and, in the field, requests waited
for graceful_timeout). Timings per request are in bench/recycle.py; this test counts."""

from __future__ import annotations

import threading

import pytest

from tests.support.site import Site, send_requests

pytestmark = [pytest.mark.timeout(600)]

# Far above a request's time on a busy 2-core host (0.3 s), far below what one recycle cost before (3-6 s) and
# the 30 s graceful_timeout: a request this slow waited for a worker to go or to come.
STALLED_S = 3.0


def test_workers_recycled_every_few_dozen_requests_fail_and_stall_no_request(own_site: Site) -> None:
    own_site.start_server(GUNICORN_WORKERS="2", GUNICORN_MAX_REQUESTS="20")
    answers: list[tuple[int | str, float]] = []
    send_requests(own_site, requests=100, keep_alive=True, into=answers)
    send_requests(own_site, requests=60, keep_alive=False, into=answers)
    threads = [
        threading.Thread(
            target=send_requests, kwargs={"site": own_site, "requests": 30, "keep_alive": True, "into": answers}
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    own_site.stop_server()

    recycled = own_site.log.read_text().count("Autorestarting worker")
    failed = [outcome for outcome, _ in answers if outcome != 200]
    stalled = sorted(round(seconds, 2) for _, seconds in answers if seconds >= STALLED_S)
    slower_than_1s = sum(seconds > 1 for _, seconds in answers)
    print(f"{len(answers)} requests, {recycled} recycles, {slower_than_1s} slower than 1 s, stalled: {stalled}")
    assert len(answers) == 280
    assert recycled >= 8, own_site.log_tail()  # 280 requests over 2 workers recycling after 20 to 30 each
    assert failed == []
    assert stalled == []
