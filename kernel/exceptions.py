"""The one domain error: services raise it, one handler per edge turns it into a response."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A request that the study's rules refuse; `field` names the offending input when there is one."""

    def __init__(
        self, message: str, *, field: str | None = None, status: int = 400, extra: dict[str, Any] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
        self.extra = extra or {}
