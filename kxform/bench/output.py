"""How the tools end: one JSON result written atomically, usage errors on one line (exit
2), and the means their summaries print."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kxform.fileio import write_atomic

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
"""0: ran; 1: ran, but something did not verify, measure or profile (see the table); 2: usage
error or no GPU (one line on stderr)."""


def write_json(path: str | None, data: dict[str, Any]) -> None:
    """Write `data` to `path` as JSON, atomically (kxform.fileio), creating its folder;
    nothing when `path` is None or empty. Says where on stderr."""
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, indent=1, default=str) + "\n").encode("utf-8"))
    print(f"results written to {path}", file=sys.stderr)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error printed as one line (`tool: error: cause`), exit 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def usage_exit(tool: str, message: str) -> int:
    """Print one usage-error line and return exit status 2."""
    print(f"{tool}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def fail(message: str, tool: str | None = None) -> NoReturn:
    """One line on stderr (`tool: message`), exit 2."""
    print(f"{tool or os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean (of speed-ups, of ratios); None for none."""
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None
