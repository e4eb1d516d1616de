#!/bin/sh
# The one periodic scheduler of a deployment: it only sends the sweeper tasks; the workers run them.
# Run exactly one of these however many workers and hosts there are.
exec celery -A config beat \
  --loglevel="${CELERY_LOGLEVEL:-INFO}" \
  --schedule="${CELERY_BEAT_SCHEDULE_FILE:-/app/var/celerybeat-schedule}"
