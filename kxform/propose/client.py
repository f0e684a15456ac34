"""The Messages API through the anthropic SDK: configured, cached, and never leaking the key.

`ANTHROPIC_API_KEY` is read from the environment, handed to the SDK and nowhere else:
it is not part of any request kxform logs, of the cache key or of a cache entry, and
error messages name the variable, never its value. The SDK's own timeouts and retries
(429, 5xx, connection errors, with `retry-after`) are configured here. Responses are
cached under `kxform.cache.cache_root()/llm/` by the hash of the request (model,
system prompt, messages, tools, limits): asking again the same thing is free and
gives the same answer, which is what makes a re-run reproducible.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kxform.cache import cache_root, content_key
from kxform.errors import UsageError
from kxform.propose.cost import PriceTable, Usage

KEY_ENV = "ANTHROPIC_API_KEY"
MODEL_ENV = "KXFORM_LLM_MODEL"
REPLAY_ENV = "KXFORM_LLM_REPLAY"
DEFAULT_MODEL = "claude-sonnet-4-6"
CACHE_VERSION = "1"


@dataclass(frozen=True)
class ClientOptions:
    """How to talk to the API (frozen: varied with `dataclasses.replace`)."""

    model: str = DEFAULT_MODEL
    max_tokens: int = 4096
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    max_retries: int = 3
    use_cache: bool = True
    cache_dir: str | None = None
    """Where responses are cached (default: `cache_root()/llm`)."""


class ApiFailure(Exception):
    """The API did not answer usefully after the SDK's retries: `kind` is a stable key
    (`rate-limit`, `server-error`, `overloaded`, `connection`, `timeout`, `auth`,
    `bad-request`, `api-error`), `fatal` means no later request can succeed either."""

    def __init__(self, kind: str, message: str, fatal: bool = False) -> None:
        self.kind = kind
        self.fatal = fatal
        super().__init__(f"{kind}: {message}")


@dataclass(frozen=True)
class Response:
    """One answer in the API's wire format (a plain dict: validated by kxform, not trusted)."""

    body: Mapping[str, Any]
    usage: Usage
    cached: bool
    key: str


def sdk_available() -> tuple[bool, str]:
    try:
        import anthropic  # noqa: F401
    except ImportError:
        return False, "the anthropic package is not installed: pip install 'kxform[llm]'"
    return True, ""


def require_claude() -> None:
    """UsageError, one line, when `--proposer claude` cannot run here (no SDK, no key)."""
    ok, why = sdk_available()
    if not ok:
        raise UsageError(f"--proposer claude: {why}")
    if not os.environ.get(KEY_ENV) and not os.environ.get(REPLAY_ENV):
        raise UsageError(
            f"--proposer claude needs {KEY_ENV} set in the environment (an Anthropic API key); "
            "without one, use the default --proposer heuristic"
        )


def request_key(request: Mapping[str, Any]) -> str:
    """Hash of everything that decides the answer (never the credentials: they are headers)."""
    return content_key(CACHE_VERSION, json.dumps(request, sort_keys=True, separators=(",", ":")))


@dataclass
class ClaudeClient:
    """Sends Messages requests; answers repeated requests from the cache."""

    options: ClientOptions
    http_client: Any = None
    """An `httpx2.Client` (tests inject a transport through it); None: the SDK's default."""
    prices: PriceTable = field(default_factory=PriceTable.load)
    _sdk: Any = None

    def _client(self) -> Any:
        if self._sdk is None:
            import anthropic
            import httpx2

            http_client = self.http_client
            if http_client is None and os.environ.get(REPLAY_ENV):
                from kxform.propose.wire import ReplayTransport

                http_client = httpx2.Client(transport=ReplayTransport.from_file(os.environ[REPLAY_ENV]))
            key = os.environ.get(KEY_ENV) or ("replay" if os.environ.get(REPLAY_ENV) else None)
            if not key:
                raise UsageError(f"--proposer claude needs {KEY_ENV} set in the environment")
            self._sdk = anthropic.Anthropic(
                api_key=key,
                max_retries=self.options.max_retries,
                http_client=http_client,
                timeout=httpx2.Timeout(self.options.timeout_s, connect=self.options.connect_timeout_s),
            )
        return self._sdk

    def send(self, request: Mapping[str, Any]) -> Response:
        """The response to `request` (a `messages.create` argument dict), from the cache
        when it was asked before; ApiFailure when the API fails after retries."""
        key = request_key(request)
        path = (Path(self.options.cache_dir) if self.options.cache_dir else cache_root() / "llm") / f"{key}.json"
        if self.options.use_cache and path.exists():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
                body = stored["response"]
                return Response(body, self.prices.usage(str(body.get("model", "")), body.get("usage"), True), True, key)
            except (OSError, ValueError, KeyError, AttributeError):
                pass  # a damaged entry is asked again and rewritten
        body = self._create(request)
        usage = self.prices.usage(str(request.get("model", "")), body.get("usage"), False)
        if self.options.use_cache and body.get("type") == "message":
            _store(path, {"key": key, "model": request.get("model"), "response": body})
        return Response(body, usage, False, key)

    def _create(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        import anthropic

        client = self._client()
        try:
            raw = client.messages.with_raw_response.create(**request)
            body = raw.http_response.json()
        except anthropic.APITimeoutError:
            raise ApiFailure(
                "timeout", f"no answer within {self.options.timeout_s:.0f} s after {self.options.max_retries} retries"
            ) from None
        except anthropic.APIConnectionError as exc:
            raise ApiFailure(
                "connection",
                f"cannot reach the API ({type(exc.__cause__ or exc).__name__}) after "
                f"{self.options.max_retries} retries",
            ) from None
        except anthropic.APIStatusError as exc:
            raise _status_failure(exc, self.options.max_retries) from None
        if not isinstance(body, dict):
            raise ApiFailure("api-error", "the response body is not a JSON object")
        return body


def _status_failure(exc: Any, retries: int) -> ApiFailure:
    import anthropic

    status = getattr(exc, "status_code", 0)
    detail = _error_message(getattr(exc, "body", None))
    if isinstance(exc, anthropic.RateLimitError):
        return ApiFailure("rate-limit", f"HTTP 429 after {retries} retries: {detail}")
    if isinstance(exc, anthropic.OverloadedError) or status == 529:
        return ApiFailure("overloaded", f"HTTP {status} after {retries} retries: {detail}")
    if isinstance(exc, anthropic.InternalServerError) or status >= 500:
        return ApiFailure("server-error", f"HTTP {status} after {retries} retries: {detail}")
    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return ApiFailure("auth", f"HTTP {status}: the API refused the credentials in {KEY_ENV} ({detail})", True)
    if isinstance(exc, anthropic.BadRequestError):
        return ApiFailure("bad-request", f"HTTP 400: {detail}", True)
    return ApiFailure("api-error", f"HTTP {status}: {detail}")


def _error_message(body: object) -> str:
    """`rate_limit_error: Number of requests ...` from an error body, one line, bounded."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            text = f"{error.get('type', 'error')}: {error.get('message', '')}"
            return " ".join(text.split())[:300]
    return " ".join(str(body).split())[:300]


def _store(path: Any, data: Mapping[str, Any]) -> None:
    from kxform.workspace.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, sort_keys=True) + "\n").encode())
