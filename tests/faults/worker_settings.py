"""Settings for a fault-suite worker: the test settings plus Celery task annotations from the
environment, because the tasks' time limits are fixed in their decorators and no setting shortens
them. FAULTS_TASK_ANNOTATIONS='{"annotation.tasks.generate_candidate": {"soft_time_limit": 2}}'."""

import json
import os

from config.settings.test import *  # noqa: F403

CELERY_TASK_ANNOTATIONS = {
    **(globals().get("CELERY_TASK_ANNOTATIONS") or {}),
    **json.loads(os.environ.get("FAULTS_TASK_ANNOTATIONS", "{}")),
}
