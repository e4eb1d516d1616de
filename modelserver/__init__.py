"""The client for OpenAI-compatible model servers, used by generation, judges and stress-test rewrites.

Pure Python, no Django: retries with backoff, a disk cache keyed by the request, per-server concurrency.
"""

from modelserver.client import ChatClient, ChatConfig, ChatResult, LLMError, cache_key

__all__ = ["ChatClient", "ChatConfig", "ChatResult", "LLMError", "cache_key"]
