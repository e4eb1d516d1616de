"""The client for OpenAI-compatible model servers, used by generation, judges and stress-test rewrites.

Pure Python, no Django. `config` holds the request settings, the result and the error;
`client` the ChatClient and its retry loop (and replica failover); `cache` the cache keyed by the request
(a folder or a key-value store); `limits` the per-server limit (per process, or shared through Redis) and fan-out; `messages` the chat-message shape.
"""

from modelserver.cache import cache_key
from modelserver.client import ChatClient
from modelserver.config import ChatConfig, ChatResult, LLMError
from modelserver.limits import map_concurrently
from modelserver.messages import chat_messages

__all__ = ["ChatClient", "ChatConfig", "ChatResult", "LLMError", "cache_key", "chat_messages", "map_concurrently"]
