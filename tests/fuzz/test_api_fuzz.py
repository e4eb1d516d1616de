"""Schemathesis over the whole OpenAPI schema, as each role: no generated request gets a 5xx.

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

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
ONLY = tuple(filter(None, os.environ.get("FUZZ_ONLY", "").split(",")))


@pytest.mark.parametrize("role_name", ["annotator", "researcher", "admin", "anonymous"])
def test_no_generated_request_gets_a_server_error(roles, role_name):
    schema = load_schema(get_wsgi_application())
    started = time.monotonic()
    results = fuzz_role(schema, roles[role_name], max_examples=EXAMPLES, only=ONLY)
    ((_, operations, cases, errors),) = summary({role_name: results})
    if report := os.environ.get("FUZZ_REPORT"):
        with open(report, "a", encoding="utf-8") as out:
            row = {"role": role_name, "operations": operations, "cases": cases, "server_errors": errors}
            out.write(json.dumps({**row, "seconds": round(time.monotonic() - started, 1)}) + "\n")
    assert operations >= 20 and cases >= operations, "the schema lost its operations"
    failures = [f"{r.operation}: {f}" for r in results for f in r.failures]
    assert errors == 0, f"{errors} of {cases} cases got a 5xx as {role_name}:\n" + "\n".join(failures)
