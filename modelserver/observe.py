"""Who is told about model-server calls: observers registered by the application (the Django side registers
its Prometheus metrics, config/monitoring.py), so that this package stays plain Python and knows nothing of them.

An observer is told when a call takes a slot (`slot_taken`), gives it back (`slot_given_back`) and ends
(`call_ended`, with its lane, server, seconds and outcome). An observer that raises is logged and ignored: a
metric never fails a summary."""

from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["CallObserver", "add_observer", "call_ended", "remove_observer", "slot_given_back", "slot_taken"]

logger = logging.getLogger(__name__)


class CallObserver(Protocol):
    def slot_taken(self, *, lane: str, server: str) -> None: ...

    def slot_given_back(self, *, lane: str, server: str) -> None: ...

    def call_ended(self, *, lane: str, server: str, seconds: float, outcome: str) -> None:
        """`outcome`: "ok", "timeout", "connection", "status_<code>", "no_slot", "too_large" or "error"."""


_observers: list[CallObserver] = []


def add_observer(observer: CallObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def remove_observer(observer: CallObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def _tell(method: str, **kwargs: object) -> None:
    for observer in list(_observers):
        try:
            getattr(observer, method)(**kwargs)
        except Exception:  # noqa: BLE001 - an observer's fault never fails the call
            logger.exception("model-server observer %r failed in %s", observer, method)


def slot_taken(*, lane: str, server: str) -> None:
    _tell("slot_taken", lane=lane, server=server)


def slot_given_back(*, lane: str, server: str) -> None:
    _tell("slot_given_back", lane=lane, server=server)


def call_ended(*, lane: str, server: str, seconds: float, outcome: str) -> None:
    _tell("call_ended", lane=lane, server=server, seconds=seconds, outcome=outcome)
