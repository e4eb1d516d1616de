"""python manage.py migrate, one process at a time per PostgreSQL database: Django's own command under an
advisory lock. Every web server migrates as it starts (platform/entrypoint.sh), so web servers on several hosts
starting one release together each ran the same migrations at once, and all but one stopped on a duplicate
table (or, for a migration that only writes rows, would have written them twice). Now the others wait for the
lock, then find nothing to do."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import migrate
from django.db import connections

# Any fixed 64-bit number, the same in every process of a deployment: the lock's name.
MIGRATE_LOCK_ID = 0x5A71_5F1D_0001


class Command(migrate.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        if connection.vendor != "postgresql":  # SQLite (bin/demo): one host, and its own file lock
            super().handle(*args, **options)
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [MIGRATE_LOCK_ID])
            if not cursor.fetchone()[0]:
                self.stdout.write("Another process is migrating this database: waiting for it to finish.")
                cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK_ID])
        try:
            super().handle(*args, **options)
        finally:
            # A session lock: released here, or when the connection closes if this process dies first.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK_ID])
