"""A progress bar with the best time so far (rich, on a terminal only; silent otherwise)."""

from __future__ import annotations

import sys
from typing import Any

from kxform.search.tuner import Step


class Progress:
    """`with Progress(...) as p: tune(..., on_step=p.step)`."""

    def __init__(self, enabled: bool, total: int | None, time_s: float | None) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

            self._bar = Bar(TextColumn("tuning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[best]}"), console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("tune", total=self.total, best="")
        return self

    def step(self, step: Step) -> None:
        if self._bar is not None:
            best = f"best {step.best_ms:.4g} ms" if step.best_ms is not None else "no successful run yet"
            self._bar.update(self._task, completed=step.index + 1, best=best)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
