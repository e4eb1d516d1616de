#!/bin/sh
# The one periodic scheduler of a deployment: it only sends the sweeper tasks; the workers run them.
# Run exactly one of these however many workers and hosts there are (a second one waits: kernel/beat_lock.py).
set -e
# The same settings as every other process of the host (.env under the environment: platform/celery-worker.sh).
cd "$(dirname "$0")/.."
eval "$("${PYTHON:-python}" -m config.environment)"
# The schedule file: var/ of the project (the compose file's beat volume in the image); its folder is made here,
# so a beat started outside a container does not stop on a folder that is not there.
schedule="${CELERY_BEAT_SCHEDULE_FILE:-var/celerybeat-schedule}"
mkdir -p "$(dirname "$schedule")"
exec celery -A config beat \
  --loglevel="${CELERY_LOGLEVEL:-INFO}" \
  --schedule="$schedule"
