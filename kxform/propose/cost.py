"""Tokens and what they cost, per attempt and per session.

Token counts come from the API's `usage` block (input, output, prompt-cache writes and
reads). Prices are USD per million tokens from Anthropic's pricing page
(platform.claude.com/docs/en/about-claude/pricing) as of 2026-11; prices change, so
`KXFORM_LLM_PRICES` may name a TOML file with `[models."NAME"]` tables (`input`,
`output`, `cache_write`, `cache_read`) that replace or extend this table. A model with
no known price is logged with its tokens and `cost_usd: null`, never a guess. A
response served from kxform's own cache costs nothing (`cached: true`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kxform.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class Price:
    """USD per million tokens (cache writes at the 5-minute rate)."""

    input: float
    output: float
    cache_write: float
    cache_read: float


_OPUS = Price(5.0, 25.0, 6.25, 0.50)
_SONNET_4 = Price(3.0, 15.0, 3.75, 0.30)
PRICES: dict[str, Price] = {
    "claude-opus-5": _OPUS,
    "claude-opus-4-8": _OPUS,
    "claude-opus-4-7": _OPUS,
    "claude-opus-4-6": _OPUS,
    "claude-opus-4-5": _OPUS,
    "claude-opus-4-5-20251101": _OPUS,
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-haiku-4-5-20251001": Price(1.0, 5.0, 1.25, 0.10),
    "claude-haiku-5-5": Price(0.10, 0.50, 0.125, 0.01),  # prompts up to 100K tokens (ours are far smaller)
}


@dataclass(frozen=True)
class Usage:
    """Tokens of one response (or a sum of them) and its cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = 0.0
    """None when a response's model has no known price."""
    cached: bool = False
    requests: int = 0
    """API requests made (0 for a response served from kxform's cache)."""

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            cost,
            self.cached and other.cached,
            self.requests + other.requests,
        )

    @property
    def tokens(self) -> int:
        """Every token of the request(s): input, prompt-cache writes and reads, output."""
        return self.input_tokens + self.output_tokens + self.cache_write_tokens + self.cache_read_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "cached": self.cached,
            "requests": self.requests,
        }

    def describe(self) -> str:
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        cached = ", from kxform's response cache (free)" if self.cached else ""
        return (
            f"{self.input_tokens} in + {self.cache_read_tokens} cache-read + {self.cache_write_tokens} "
            f"cache-write + {self.output_tokens} out tokens, {cost}{cached}"
        )


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[str, Price] = field(default_factory=lambda: dict(PRICES))

    @classmethod
    def load(cls) -> PriceTable:
        """The built-in table, overridden by `$KXFORM_LLM_PRICES` when set."""
        path = os.environ.get("KXFORM_LLM_PRICES")
        if not path:
            return cls()
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except (OSError, ValueError) as exc:
            raise SpecError(f"KXFORM_LLM_PRICES={path}: {exc}") from None
        table = dict(PRICES)
        for name, entry in (data.get("models") or {}).items():
            try:
                table[name] = Price(*(float(entry[k]) for k in ("input", "output", "cache_write", "cache_read")))
            except (KeyError, TypeError, ValueError):
                raise SpecError(
                    f"KXFORM_LLM_PRICES={path}: model {name!r} needs numeric input, output, "
                    "cache_write and cache_read (USD per million tokens)"
                ) from None
        return cls(table)

    def price(self, model: str) -> Price | None:
        return self.prices.get(model)

    def usage(self, model: str, raw: Mapping[str, Any] | None, cached: bool) -> Usage:
        """Usage of one response from the API's `usage` block (None-safe)."""
        raw = raw or {}

        def count(key: str) -> int:
            value = raw.get(key)
            return value if isinstance(value, int) and value >= 0 else 0

        tokens = (
            count("input_tokens"),
            count("output_tokens"),
            count("cache_creation_input_tokens"),
            count("cache_read_input_tokens"),
        )
        price = self.price(model)
        if cached:
            cost: float | None = 0.0
        elif price is None:
            cost = None
        else:
            cost = (
                tokens[0] * price.input
                + tokens[1] * price.output
                + tokens[2] * price.cache_write
                + tokens[3] * price.cache_read
            ) / 1e6
        return Usage(*tokens, cost_usd=cost, cached=cached, requests=0 if cached else 1)
