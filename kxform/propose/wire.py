"""HTTP traffic of the Messages API without the network: replayed and recorded.

The anthropic SDK (2.x) sends its requests through `httpx2`; a transport injected with
`Anthropic(http_client=httpx2.Client(transport=...))` sees each request and answers it.
`ReplayTransport` answers from a list of written or recorded responses (status,
headers, body in the API's wire format), in order; `RecordingTransport` wraps a real
transport and keeps every exchange. Anything stored drops the credential headers
(`x-api-key`, `authorization`, and any header whose name mentions a key or token), so
a recording can be shared. `KXFORM_LLM_REPLAY=FILE` makes `--proposer claude` answer
from a recording instead of the network (tests, bug reports).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

SECRET_HEADERS = ("x-api-key", "authorization", "proxy-authorization", "cookie", "set-cookie")


def is_secret_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in SECRET_HEADERS or "key" in lowered or "token" in lowered or "secret" in lowered


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers fit to store: credentials dropped."""
    return {k: v for k, v in headers if not is_secret_header(k)}


@dataclass(frozen=True)
class Exchange:
    """One request and the response it got (credential headers never included)."""

    method: str
    url: str
    request_headers: Mapping[str, str]
    request_body: Any
    status: int
    response_headers: Mapping[str, str]
    response_body: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "request": {
                "method": self.method,
                "url": self.url,
                "headers": dict(self.request_headers),
                "body": self.request_body,
            },
            "response": {"status": self.status, "headers": dict(self.response_headers), "body": self.response_body},
        }


@dataclass(frozen=True)
class Reply:
    """A response to serve: HTTP status, headers and a JSON body (the API's wire format)."""

    body: Any
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        return raw.decode("utf-8", "replace")


class ReplayTransport(httpx2.BaseTransport):
    """Serves `replies` in order, one per request; records what was asked. Running out of
    replies is a 599 with an error body (never a silent success)."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str) -> ReplayTransport:
        """Replies from a recording (`RecordingTransport.save`) or a list of reply objects."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        items = data.get("exchanges", data) if isinstance(data, dict) else data
        replies = []
        for item in items:
            response = item.get("response", item)
            replies.append(
                Reply(response.get("body"), int(response.get("status", 200)), dict(response.get("headers") or {}))
            )
        return cls(replies)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:
            reply = (
                self.replies.pop(0)
                if self.replies
                else Reply(
                    {"type": "error", "error": {"type": "replay_exhausted", "message": "no recorded response left"}},
                    599,
                    {"x-should-retry": "false"},
                )
            )
            body = (
                json.dumps(reply.body).encode()
                if not isinstance(reply.body, (bytes, str))
                else (reply.body.encode() if isinstance(reply.body, str) else reply.body)
            )
            headers = {"content-type": "application/json", **reply.headers}
            self.exchanges.append(
                Exchange(
                    request.method,
                    str(request.url),
                    safe_headers(request.headers.items()),
                    _json_or_text(request.read()),
                    reply.status,
                    safe_headers(headers.items()),
                    reply.body,
                )
            )
        return httpx2.Response(reply.status, headers=headers, content=body, request=request)


class RecordingTransport(httpx2.BaseTransport):
    """Passes requests to `inner` and keeps each exchange, credentials filtered."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self.inner = inner
        self.exchanges: list[Exchange] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self.inner.handle_request(request)
        raw = response.read()
        self.exchanges.append(
            Exchange(
                request.method,
                str(request.url),
                safe_headers(request.headers.items()),
                _json_or_text(request.read()),
                response.status_code,
                safe_headers(response.headers.items()),
                _json_or_text(raw),
            )
        )
        return httpx2.Response(response.status_code, headers=response.headers, content=raw, request=request)

    def save(self, path: str) -> None:
        from kxform.workspace.files import write_atomic

        data = {"version": 1, "exchanges": [e.to_json() for e in self.exchanges]}
        write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())

    def close(self) -> None:
        self.inner.close()
