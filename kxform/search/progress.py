"""A progress bar for `kxform tune` with the best time so far (tqdm; the caller decides
whether it is drawn: on a terminal only, as the other commands' bars in
`kxform.cli.progress`)."""

from __future__ import annotations

import sys
from typing import Any

from kxform.search.tuner import Step


class Progress:
    """`with Progress(...) as p: tune(..., on_step=p.step)`."""

    def __init__(self, enabled: bool, total: int | None, time_s: float | None) -> None:
        self.enabled = enabled
        self.total = total
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total,
                desc="tuning",
                unit="eval",
                file=sys.stderr,
                leave=False,
                dynamic_ncols=True,
                delay=0.5,
            )
        return self

    def step(self, step: Step) -> None:
        if self._bar is not None:
            best = f"best {step.best_ms:.4g} ms" if step.best_ms is not None else "no successful run yet"
            self._bar.set_postfix_str(best, refresh=False)
            self._bar.update(max(step.index + 1 - self._bar.n, 0))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
