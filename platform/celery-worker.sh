#!/bin/sh
# Celery worker for background generation: late acks, one task at a time per process.
exec celery -A config worker \
  --loglevel="${CELERY_LOGLEVEL:-INFO}" \
  --concurrency="${CELERY_CONCURRENCY:-4}" \
  --prefetch-multiplier=1 \
  -Q default \
  --beat --schedule=/tmp/celerybeat-schedule
