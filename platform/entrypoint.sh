#!/bin/sh
# Container entrypoint: wait for the database, migrate (web) or wait for the migrations (worker, beat), then run
# the given role.
set -e
role="${1:-web}"
python - <<'PY'
import os, sys, time
import psycopg
url = os.environ.get("DATABASE_URL", "")
if url.startswith("postgres"):
    for attempt in range(60):
        try:
            psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=2).close()
            break
        except Exception as error:  # noqa: BLE001
            print(f"waiting for the database: {error}", file=sys.stderr)
            time.sleep(1)
    else:
        sys.exit("database not reachable")
PY
case "$role" in
  web)
    python manage.py migrate --noinput
    python manage.py collectstatic --noinput
    exec gunicorn config.wsgi -c platform/gunicorn.conf.py ;;
  worker)
    # A new release's worker on a host of its own waits for the web servers' migrations (several hosts).
    python manage.py wait_for_migrations
    exec sh platform/celery-worker.sh ;;
  beat)
    python manage.py wait_for_migrations
    exec sh platform/celery-beat.sh ;;
  manage)
    shift; exec python manage.py "$@" ;;
  *)
    exec "$@" ;;
esac
