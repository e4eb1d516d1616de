"""config/celery.py patches one method of kombu's Redis transport (a channel closed after its connection kills a
worker's consumer on a broker restart). These tests fail when kombu changes, so that whoever upgrades it looks
again: does the release fix it (then drop the patch), does the patch still fit the code it wraps? The behaviour
itself is tested on real workers and a real Redis restart (tests/faults/test_broker_restart.py)."""

from __future__ import annotations

import inspect

import kombu
from celery.worker.consumer import Consumer
from kombu import Connection
from kombu.transport import redis as kombu_redis

import config.celery
from config.celery import app


def test_the_patch_is_on_the_kombu_release_it_was_written_for() -> None:
    assert kombu.__version__ == "5.7.0", (
        f"kombu {kombu.__version__}: see whether it still builds a closed channel's pool from "
        "`self.connection.client` (config/celery.py), then drop the patch or move this pin"
    )


def test_kombu_still_reads_the_broker_from_the_transport_that_close_detaches() -> None:
    # The method the patch wraps reads the broker's address where kombu's close clears it...
    assert "conninfo = self.connection.client" in inspect.getsource(config.celery._KOMBU_CONNPARAMS)
    assert "self._transport.client = None" in inspect.getsource(Connection._do_close_transport)
    # ...and a channel's close drops its pools before putting its unacknowledged messages back, so that the
    # restore builds a new pool through that method.
    close = inspect.getsource(kombu_redis.Channel.close)
    assert close.index("self._disconnect_pools()") < close.index("super().close()")


def test_every_redis_channel_and_every_worker_gets_the_workaround() -> None:
    assert kombu_redis.Channel._connparams is config.celery._connparams_after_close
    consumer = app.conf.worker_consumer
    assert consumer == "config.celery:ExitingConsumer"
    assert issubclass(config.celery.ExitingConsumer, Consumer)
