"""Which request or Celery task a log line belongs to: the request id (the client's or proxy's X-Request-ID,
else a new one, echoed back in the response's X-Request-ID) or the task id, on every record
(`RequestIdFilter`), and one JSON object per line when LOG_FORMAT=json (`JsonFormatter`, python-json-logger).
Invitation tokens are redacted before the formatter sees a record (kernel/logging.py), JSON or not."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.core.signals import request_finished
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from kernel.logging import redact

HEADER = "X-Request-ID"
# A proxy's or client's id is kept if it looks like one (letters, digits, -_.:), else a new one is made: a
# header is not a way to write arbitrary text into the logs.
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

request_id: ContextVar[str] = ContextVar("request_id", default="")
task_id: ContextVar[str] = ContextVar("task_id", default="")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        given = request.headers.get(HEADER, "")
        rid = given if _ACCEPTABLE.fullmatch(given) else uuid.uuid4().hex
        request.request_id = rid
        # Kept until the response is closed (request_finished below): Django logs a 4xx/5xx after the
        # middleware returned, and that line should carry the id too.
        request_id.set(rid)
        response = self.get_response(request)
        response[HEADER] = rid
        return response


def _request_finished(**kwargs: Any) -> None:
    request_id.set("")


request_finished.connect(_request_finished, dispatch_uid="kernel.request_id")


class RequestIdFilter(logging.Filter):
    """Puts `request_id` and `task_id` on every record ("" outside a request or a task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        record.task_id = task_id.get() or _celery_task_id()
        return True


def _celery_task_id() -> str:
    try:
        from celery import current_task
    except ImportError:  # pragma: no cover - celery is a dependency
        return ""
    task = current_task
    request = getattr(task, "request", None) if task else None
    return str(getattr(request, "id", "") or "")


class JsonFormatter(_JsonFormatter):  # type: ignore[misc]
    """time, level, logger, message, request_id, task_id and any `extra`; the message and a traceback
    redacted as the text lines are."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(task_id)s")
        kwargs.setdefault("rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"})
        super().__init__(*args, **kwargs)

    def process_log_record(self, log_record: dict[str, Any]) -> dict[str, Any]:
        for key, value in list(log_record.items()):
            if not isinstance(value, int | float | bool | type(None)):
                # An `extra` object (Django's request) is written as its text: redacted like the rest.
                log_record[key] = redact(value if isinstance(value, str) else str(value))
        return log_record
