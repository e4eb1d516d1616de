"""One worker process for the cluster-limit tests: THREADS threads, each sending CALLS chat calls.

    python -m tests.modelserver._limit_worker BASE_URLS REDIS_URL PREFIX LIMIT THREADS CALLS LEASE_S

BASE_URLS is comma-separated (replicas). Prints one line per finished call ("ok" or the error).
"""

from __future__ import annotations

import sys
import threading

from modelserver import ChatClient, ChatConfig, LLMError
from modelserver.limits import RedisLeaseLimiter


def main() -> None:
    urls, redis_url, prefix, limit, threads, calls, lease_s = sys.argv[1:8]
    replicas = tuple(urls.split(","))
    limiter = RedisLeaseLimiter(redis_url, lease_s=float(lease_s), prefix=prefix)
    config = ChatConfig(
        base_url=replicas[0],
        base_urls=replicas,
        model="standin-model",
        concurrency=int(limit),
        timeout=60.0,
        max_retries=0,
    )
    client = ChatClient(config, limiter=limiter)
    lock = threading.Lock()

    def run(worker: int) -> None:
        for n in range(int(calls)):
            try:
                client.complete([{"role": "user", "content": f"w{worker} call {n}"}], use_cache=False)
                line = "ok"
            except LLMError as exc:
                line = f"error {exc.reason}"
            with lock:
                print(line, flush=True)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(int(threads))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


if __name__ == "__main__":
    main()
