"""Progress bars for long work (apply over a tree, verification over sizes), drawn by tqdm.

A bar is drawn on stderr only when stderr is a terminal (not when it is piped, in CI
logs or in the pass log) and `TERM` is not `dumb`; it appears only once the work has
taken half a second, and is erased when its stage ends, so the remarks that follow
are printed on a clean screen. One bar per stage (`transform`, `verify`).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from tqdm import tqdm


def interactive(stream: TextIO | None = None) -> bool:
    """Whether `stream` (default: stderr) is a terminal a bar may be drawn on."""
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM", "") != "dumb"


class ProgressBar:
    """Callable as the runner's `Progress`: `(done, total, path, stage)`; `close()` when done."""

    def __init__(
        self, enabled: bool = True, unit: str = "file", stream: TextIO | None = None, delay: float = 0.5
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and interactive(self.stream)
        self.unit = unit
        self.delay = delay
        self._bar: tqdm | None = None
        self._stage = ""

    def __call__(self, done: int, total: int, path: str, stage: str = "transform") -> None:
        if not self.enabled or total < 1:
            return
        if self._bar is None or stage != self._stage:
            self.close()
            self._bar = tqdm(
                total=total,
                desc=stage,
                unit=self.unit,
                file=self.stream,
                leave=False,
                dynamic_ncols=True,
                delay=self.delay,
            )
            self._stage = stage
        self._bar.set_postfix_str(path[-48:], refresh=False)
        self._bar.update(max(done - self._bar.n, 0))
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
