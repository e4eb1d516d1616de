"""Schemathesis over the whole OpenAPI schema, as each role: no generated request gets a 5xx, and every
answer with a documented status matches the schema.

A bounded, deterministic budget (`FUZZ_EXAMPLES` cases per operation, derandomised); `bench/fuzz.py` runs
the same harness longer and prints the table.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from django.core.wsgi import get_wsgi_application

from tests.fuzz.harness import fuzz_role, load_schema, summary

# 8 cases per operation and role: about 1,000 requests, under 90 s on two busy cores.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "8"))
ONLY = tuple(filter(None, os.environ.get("FUZZ_ONLY", "").split(",")))


@pytest.fixture(scope="module")
def schema(django_db_setup, django_db_blocker):  # type: ignore[no-untyped-def]
    # Loaded once: the request for /api/schema/ reads no data, but Django's request signals touch the connection.
    with django_db_blocker.unblock():
        return load_schema(get_wsgi_application())


@pytest.mark.parametrize("role_name", ["annotator", "researcher", "admin", "anonymous"])
def test_no_generated_request_gets_a_server_error(schema, roles, role_name, quiet_request_log):
    started = time.monotonic()
    results = fuzz_role(schema, roles[role_name], max_examples=EXAMPLES, only=ONLY)
    ((_, operations, cases, errors, violations),) = summary({role_name: results})
    failures = [f"{r.operation}: {f}" for r in results for f in r.failures]
    if report := os.environ.get("FUZZ_REPORT"):  # for bench/fuzz.py
        with open(report, "a", encoding="utf-8") as out:
            row = {"role": role_name, "operations": operations, "cases": cases, "server_errors": errors}
            row |= {"schema_violations": violations}
            row |= {"seconds": round(time.monotonic() - started, 1), "failures": failures[:20]}
            out.write(json.dumps(row) + "\n")
    assert operations >= 20 and cases >= operations, "the schema lost its operations"
    assert errors == violations == 0, (
        f"{errors} of {cases} cases got a 5xx and {violations} an answer that does not match the schema "
        f"as {role_name}:\n" + "\n".join(failures)
    )


def test_the_fuzzer_fails_on_the_server_errors_it_was_built_to_find(settings, roles, quiet_request_log):
    """Without the NUL guard (kernel.middleware) an invitation token with a NUL reaches PostgreSQL, which
    refuses it: the 500 the tracker found. The same harness and budget must count it, or a green fuzz run
    would prove nothing."""
    from django.core.handlers.wsgi import WSGIHandler

    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "kernel.middleware.RejectUnstorableInputMiddleware"]
    unguarded = load_schema(WSGIHandler())  # middleware is loaded when the handler is made
    results = fuzz_role(unguarded, roles["anonymous"], max_examples=EXAMPLES, only=("/api/v1/invitations/",))
    ((_, operations, cases, errors, _),) = summary({"anonymous": results})
    assert operations == 1 and errors > 0, f"{cases} cases, no 5xx found without the guard"
    assert any("NUL in every string" in failure for r in results for failure in r.failures)
