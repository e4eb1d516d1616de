"""The chat messages of a request: an optional system message and the user's."""

from __future__ import annotations

__all__ = ["chat_messages"]


def chat_messages(user: str, *, system: str | None = None) -> list[dict[str, str]]:
    """[system, user] in the chat-completions shape; no system message when `system` is None."""
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": user})
    return messages
