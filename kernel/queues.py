"""How many messages wait in each Celery queue, read from the broker when asked (the /metrics scrape, the
study health panel): Redis and the filesystem transport count a queue's list (every priority level of it),
RabbitMQ answers a passive declare."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def queue_depths(app: Any) -> dict[str, int | None]:
    """Queue name -> messages waiting (not those a worker holds); None for a queue the broker could not count."""
    names = [queue.name for queue in app.conf.task_queues or []] or [app.conf.task_default_queue]
    depths: dict[str, int | None] = dict.fromkeys(names)
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
            channel = connection.channel()
            try:
                for name in names:
                    depths[name] = _depth(connection, channel, name)
                    if depths[name] is None and not hasattr(channel, "_size"):
                        channel = connection.channel()  # a failed passive declare closes an AMQP channel
            finally:
                try:
                    channel.close()
                except Exception:  # noqa: BLE001, S110 - closing a broken channel
                    pass
    except Exception as error:  # noqa: BLE001 - a broker out of reach shows as unknown, not as an error
        logger.warning("queue depths not read from the broker: %r", error)
    return depths


def _depth(connection: Any, channel: Any, name: str) -> int | None:
    if hasattr(channel, "_size"):  # kombu's virtual transports (Redis, filesystem): every priority level
        try:
            return int(channel._size(name))
        except Exception:  # noqa: BLE001
            return None
    try:
        return int(channel.queue_declare(queue=name, passive=True).message_count)
    except Exception as error:  # noqa: BLE001 - not declared yet (no worker ever started for it): nothing waits
        return 0 if "NOT_FOUND" in str(error) else None
