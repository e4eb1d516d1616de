"""The cap on a model server's reply, caused by a stand-in that answers with too much.

A reply over the cap fails the call at once and for good (the same request draws the same reply), saying
how large the cap is and which setting raises it; the stand-in sees the connection closed mid-body, so the
client read no more than the cap and the socket buffers hold.
"""

from __future__ import annotations

import pytest

from modelserver import ChatClient, ChatConfig, LLMError
from tests.support._http import FLOOD_MAX_BYTES
from tests.support.openai_standin import openai_standin

MESSAGES = [{"role": "user", "content": "What helps nurses at handover?"}]
CAP = 64 * 1024
# What a closed connection may still have taken from the stand-in: the kernel's socket buffers on both ends
# (a few MiB on loopback), far below the flood's FLOOD_MAX_BYTES that a client without a cap would read.
BUFFERED = 32 * 1024 * 1024


def client_for(base_url: str, cap: int = CAP, **overrides: object) -> ChatClient:
    options: dict[str, object] = {"backoff_s": 0.01, "timeout": 10.0, "max_retries": 3} | overrides
    config = ChatConfig(base_url=base_url, model="standin-model", **options)  # type: ignore[arg-type]
    return ChatClient(config, None, max_response_bytes=cap)


def _fails(client: ChatClient) -> LLMError:
    # Not timed: how little the client read is counted at the stand-in (script.streamed), which a client that
    # waited for the whole reply would exceed.
    with pytest.raises(LLMError) as caught, client:
        client.complete(MESSAGES, use_cache=False)
    return caught.value


def test_a_reply_that_never_ends_is_cut_at_the_cap_and_not_retried() -> None:
    with openai_standin(script=["flood", "flood", "flood", "flood"]) as server:
        error = _fails(client_for(server.base_url))
        assert server.script.hung_up.wait(5), "the stand-in never saw the client hang up"
        assert server.completions == 1  # permanent: none of the three retries was spent on it
    assert not error.transient
    assert f"the reply from {server.base_url} was larger than 64 KiB" in error.reason
    assert "MODEL_SERVER_MAX_RESPONSE_BYTES" in error.reason
    assert server.script.streamed < BUFFERED < FLOOD_MAX_BYTES


def test_a_content_length_over_the_cap_fails_before_the_body_is_read() -> None:
    with openai_standin(script=["announced"]) as server:
        error = _fails(client_for(server.base_url))
        assert server.script.hung_up.wait(5)
    assert not error.transient
    assert "larger than 64 KiB; its Content-Length says 1 GiB" in error.reason
    assert "MODEL_SERVER_MAX_RESPONSE_BYTES" in error.reason
    assert server.script.streamed < BUFFERED


def test_a_compressed_reply_is_counted_as_it_decodes() -> None:
    # 64 KiB of gzip on the wire, 64 MiB once decoded: the cap (1 MiB) is on what the body becomes.
    with openai_standin(script=["bomb"]) as server:
        error = _fails(client_for(server.base_url, cap=1024 * 1024))
    assert not error.transient and "was larger than 1 MiB" in error.reason


def test_an_error_reply_is_capped_too() -> None:
    # A 500 whose page never ends is no better than an answer that never ends.
    with openai_standin(script=["500"]) as server:
        error = _fails(client_for(server.base_url, cap=100, max_retries=0))
    assert "was larger than 100 bytes" in error.reason and "MODEL_SERVER_MAX_RESPONSE_BYTES" in error.reason


def test_a_reply_under_the_cap_is_read_whole_and_one_just_over_it_is_not() -> None:
    long_answer = "Handover checklists reduce omissions [1]. " * 1000  # 42000 bytes of text, 5000 words
    with openai_standin(lambda body: long_answer) as server:
        with client_for(server.base_url, max_tokens=10_000) as client:
            result = client.complete(MESSAGES, use_cache=False)
        error = _fails(client_for(server.base_url, cap=len(long_answer.encode()), max_tokens=10_000))
    assert result.text.strip() == long_answer.strip()
    # The reply is the answer in its JSON envelope: over a cap of the answer's own length.
    assert "was larger than 41.0 KiB (42000 bytes); its Content-Length says 41." in error.reason
