"""Settings for a fault-suite worker: the test settings plus Celery task annotations from the
environment, because the tasks' time limits are fixed in their decorators and no setting shortens
them. FAULTS_TASK_ANNOTATIONS='{"annotation.tasks.generate_candidate": {"soft_time_limit": 2}}'.

FAULTS_KOMBU_AS_RELEASED=1 gives the worker kombu's Redis channel as released, without config/celery.py's
patch, so that a broker restart can kill its consumer for real (tests/faults/test_broker_restart.py)."""

import json
import os
from typing import Any

from celery.signals import worker_init
from kombu.transport import redis as kombu_redis

from config.settings.test import *  # noqa: F403

CELERY_TASK_ANNOTATIONS = {
    **(globals().get("CELERY_TASK_ANNOTATIONS") or {}),
    **json.loads(os.environ.get("FAULTS_TASK_ANNOTATIONS", "{}")),
}


@worker_init.connect(weak=False)
def _kombu_as_released(**kwargs: Any) -> None:
    # At the worker's start, when config/celery.py has surely patched kombu (the settings may load before it does).
    if os.environ.get("FAULTS_KOMBU_AS_RELEASED") == "1":
        patched = kombu_redis.Channel._connparams
        kombu_redis.Channel._connparams = getattr(patched, "__wrapped__", patched)
