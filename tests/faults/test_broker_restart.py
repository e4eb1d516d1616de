"""A Redis broker killed and back empty 10 s later (the field test's restart, bench/field.py) while a worker has a
summary in flight and a process free: the worker takes new work once Redis is back (kombu's Redis channel patched,
config/celery.py), and a worker whose consumer the restart kills anyway (kombu as released) exits within seconds,
for its supervisor to start it again. Real workers, a redis-server of the test's own."""

from __future__ import annotations

import pytest

from tests.faults import scenarios
from tests.faults.scenarios import Rig
from tests.faults.test_faults import check
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.worker, pytest.mark.timeout(240)]


def test_a_worker_with_a_summary_in_flight_takes_new_work_within_a_minute_of_the_broker_being_back(
    restart_rig: Rig, own_redis: RedisServer
) -> None:
    check(scenarios.broker_restart_with_a_summary_in_flight(restart_rig, own_redis))


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_worker_whose_consumer_the_broker_restart_stopped_exits_at_once_and_its_restart_catches_up(
    restart_rig: Rig, own_redis: RedisServer, pool: str
) -> None:
    check(scenarios.consumer_stopped_by_a_broker_restart(restart_rig, own_redis, pool=pool))
