"""Invitation tokens out of the logs: an invitation link is a password to a study, so a path, query string
or referer that carries one is logged with the token replaced. So are the open study link's and the personal
resume link's tokens, and the recruiting platform's participant ids in a query string (PROLIFIC_PID, ...). `RedactTokensFilter` is attached to Django's
request and server loggers and to the console handler (config/settings/base.py), whose text lines, tracebacks
included, go through `RedactingFormatter` (the JSON lines through kernel.request_id.JsonFormatter); `RedactingGunicornLogger`
does the same for gunicorn's access log (platform/gunicorn.conf.py)."""

from __future__ import annotations

import logging
import re
from typing import Any

from gunicorn.glogging import Logger as GunicornLogger

REDACTED = "[redacted]"
# Every URL that carries an invitation token (annotation/urls.py: join; annotation/api/urls.py: accept), an open
# study link's (open) or a resume link's (resume).
# Matched anywhere in a string, so a full URL in a referer or a request line is covered too; URL-encoded
# slashes are not decoded by the router, so a token is everything up to the next '/', '?', '#' or space.
TOKEN_IN_URL = re.compile(r"(?P<prefix>/join/|/open/|/resume/|/api/v1/invitations/)(?P<token>[^/?#\s\"']+)")
# The recruiting platform's ids on an open link's query string (annotation.services.participation): personal
# data, and in a study that trusts the id alone (trust_platform_id), with the open link enough to continue
# someone's participation. A study's own parameter name
# (external_id_param, e.g. workerId) is covered for the common platforms' names.
PLATFORM_ID_IN_QUERY = re.compile(
    r"(?P<prefix>[?&](?:PROLIFIC_PID|STUDY_ID|SESSION_ID|external_id|workerId|assignmentId|hitId)=)"
    r"(?P<token>[^&#\s\"']+)"
)
# The admin's invitation list searches by token (InvitationAdmin.search_fields): its `q` may be one.
TOKEN_IN_ADMIN_SEARCH = re.compile(
    r"(?P<prefix>/admin/studies/invitation/[^\s\"'?]*\?(?:[^\s\"'#]*&)?q=)(?P<token>[^&#\s\"']+)"
)


def redact(text: str) -> str:
    """The text with every invitation token in a URL replaced by [redacted]."""
    text = TOKEN_IN_URL.sub(lambda m: m.group("prefix") + REDACTED, text)
    text = PLATFORM_ID_IN_QUERY.sub(lambda m: m.group("prefix") + REDACTED, text)
    return TOKEN_IN_ADMIN_SEARCH.sub(lambda m: m.group("prefix") + REDACTED, text)


def _redact_value(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class RedactTokensFilter(logging.Filter):
    """Redacts tokens in the message and its arguments, keeping their shape so formatters still work."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_value(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _redact_value(value) for key, value in record.args.items()}
        return True


class RedactingFormatter(logging.Formatter):
    """The console's text lines, redacted whole: the filter above sees a record's message and arguments, but a
    traceback (`exc_info`, `stack_info`) is formatted after the filters ran, and an exception's message or a
    frame's source line can carry a token."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingGunicornLogger(GunicornLogger):  # type: ignore[misc]
    """gunicorn's logger with the access-log atoms redacted: request line, path, query string, referer and
    every request header atom, whatever `access_log_format` uses."""

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        return {key: _redact_value(value) for key, value in atoms.items()}
