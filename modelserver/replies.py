"""The answer in a chat-completions message: its text parts, without a reasoning model's thinking.

Reasoning models served as plain chat models (DeepSeek-R1, Qwen3, QwQ on vLLM, Ollama or llama.cpp without
a reasoning parser) write their reasoning into `content` as a `<think>...</think>` block before the answer;
some chat templates open the block in the prompt, so the reply holds only its closing `</think>`; a reply cut
off by max_tokens mid-reasoning holds an unterminated `<think>`. Some servers send `content` as a list of
content parts (`[{"type": "text", "text": ...}]`) instead of a string. Plain Python: no Django.
"""

from __future__ import annotations

import re

__all__ = ["answer_text", "message_text"]

_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<think>", re.IGNORECASE)
_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def message_text(content: object) -> str:
    """The text of a message's `content`: a string as is, the text parts of a list joined, else ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in {"text", "output_text"}
            and isinstance(part.get("text"), str)
        )
    return ""


def answer_text(text: str) -> str:
    """`text` without reasoning: every `<think>...</think>` block, a leading reasoning closed by a `</think>`
    the prompt opened, and an unterminated `<think>` with everything after it. "" when it was all reasoning."""
    if "think>" not in text.lower():
        return text
    text = _BLOCK.sub("", text)
    opened = _OPEN.search(text)
    if opened is not None:  # cut off before its end: the rest is reasoning
        text = text[: opened.start()]
    closed = _CLOSE.search(text)
    if closed is not None:  # opened by the chat template, so only its end is in the reply
        text = text[closed.end() :]
    return text.strip()
