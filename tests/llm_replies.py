"""Messages API responses in the wire format, written by hand, served to the real
anthropic client through an injected httpx2 transport (no network)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

# The test extra installs the anthropic client; elsewhere (the GPU machine's offline
# environment) the modules that drive it are skipped, with the reason.
httpx2 = pytest.importorskip("httpx2", reason="the anthropic client is not installed: pip install 'kxform[llm]'")

from kxform.propose.client import ClaudeClient, ClientOptions  # noqa: E402
from kxform.propose.wire import ReplayTransport, Reply  # noqa: E402

MODEL = "claude-sonnet-4-6"
PLANTED_KEY = "sk-ant-api03-PLANTED-test-key-never-to-be-stored-0123456789"
_ids = itertools.count(1)

USAGE = {"input_tokens": 6000, "output_tokens": 400, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def message(
    content: list[dict[str, Any]], stop: str = "tool_use", usage: dict[str, int] | None = None, **extra: Any
) -> Reply:
    n = next(_ids)
    return Reply(
        {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage or USAGE,
            **extra,
        }
    )


def tool_use(data: Any, name: str = "propose_swizzle") -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": data}


def answer(pattern: str = "custom", formula: str | None = None, **params: Any) -> Reply:
    """A well-formed call of the swizzle tool."""
    data = {
        "last_attempt": "first attempt: A is shared along x, B along y",
        "expectation": "grouping rows keeps a wave's A and B panels in L2",
        "pattern": pattern,
        "group": None,
        "along": None,
        "xcds": None,
        "formula": formula,
        **params,
    }
    return message([tool_use(data)])


def raw_answer(data: Any, name: str = "propose_swizzle") -> Reply:
    return message([tool_use(data, name)])


def error(status: int, kind: str, text: str) -> Reply:
    return Reply({"type": "error", "error": {"type": kind, "message": text}}, status, {"retry-after-ms": "1"})


class KeyCheckingTransport(ReplayTransport):
    """Replays, and asserts that the SDK sent the key it was given (so the filtering of
    stored headers is shown to remove something real)."""

    def __init__(self, replies: list[Reply]) -> None:
        super().__init__(replies)
        self.keys_seen: list[str] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        self.keys_seen.append(sent)
        return super().handle_request(request)


def client(replies: list[Reply], retries: int = 2, **options: Any) -> tuple[ClaudeClient, KeyCheckingTransport]:
    transport = KeyCheckingTransport(replies)
    opts = ClientOptions(model=MODEL, max_retries=retries, timeout_s=30, **options)
    return ClaudeClient(opts, http_client=httpx2.Client(transport=transport)), transport
