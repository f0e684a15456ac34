"""Pass specs as users write them: `name`, `name{key=value,...}`, and pipelines `a,b{x=1,y=2}`.

Parsing gives strings; each pass types them through its option space
(`Pass.from_options`), and `Pass.spec()` prints the same text back.
"""

from __future__ import annotations

import re

from kxform.errors import UsageError

_SPEC_RE = re.compile(r"^\s*([A-Za-z][\w-]*)\s*(?:\{(.*)\})?\s*$", re.S)


def parse_pass_spec(text: str) -> tuple[str, dict[str, str]]:
    """Parse `name` or `name{k=v,k2=v2}` into the name and its options (order kept)."""
    match = _SPEC_RE.match(text)
    if match is None:
        raise UsageError(f"malformed pass spec {text!r}: expected NAME or NAME{{key=value,...}}")
    name, inner = match.group(1), match.group(2)
    options: dict[str, str] = {}
    if inner and inner.strip():
        for item in inner.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise UsageError(f"malformed option {item.strip()!r} in pass spec {text!r}: expected key=value")
            if key.strip() in options:
                raise UsageError(f"option {key.strip()!r} given twice in pass spec {text!r}")
            options[key.strip()] = value.strip()
    return name, options


def split_pipeline(text: str) -> list[str]:
    """Split `a,b{x=1,y=2},c` at top-level commas (commas inside braces stay)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    if depth != 0:
        raise UsageError(f"unbalanced braces in pass list {text!r}")
    return [p.strip() for p in parts if p.strip()]
