"""Error reports through sentry-sdk (docs/deploy.md, "Monitoring"): on only when SENTRY_DSN is set, with the
Django and Celery integrations, no personal data (send_default_pii off), and every string in an event scrubbed of
invitation, open-link and resume tokens and platform ids by kernel/logging.py's rules before it leaves."""

from __future__ import annotations

from typing import Any

from kernel.logging import redact


def scrub(value: Any) -> Any:
    """`value` with every token-bearing string redacted, in nested dicts, lists and tuples too."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub(item) for item in value)
    return value


def before_send(event: dict[str, Any], hint: dict[str, Any]) -> dict[str, Any]:
    scrubbed: dict[str, Any] = scrub(event)
    return scrubbed


def sentry_init(*, dsn: str, environment: str, traces_sample_rate: float) -> None:
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        send_default_pii=False,
        # A frame's local variables hold bare tokens (a view's `token` argument) that no URL rule recognises,
        # and annotators' answers: reports carry the stack without them.
        include_local_variables=False,
        traces_sample_rate=traces_sample_rate,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        before_send=before_send,  # type: ignore[arg-type]
        before_send_transaction=before_send,  # type: ignore[arg-type]
        before_breadcrumb=lambda crumb, hint: scrub(crumb),
    )
