#!/bin/sh
# Celery worker for background generation: late acks, one task at a time per process.
# The periodic sweepers run from one beat process per deployment (platform/celery-beat.sh), never here.
exec celery -A config worker \
  --loglevel="${CELERY_LOGLEVEL:-INFO}" \
  --concurrency="${CELERY_CONCURRENCY:-4}" \
  --prefetch-multiplier=1 \
  -Q "${CELERY_QUEUES:-default}"
