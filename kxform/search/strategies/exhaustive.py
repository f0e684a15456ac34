"""Exhaustive: every valid configuration in enumeration order (the reference answer,
and the right choice for spaces smaller than the budget)."""

from __future__ import annotations

from kxform.search.strategy import History, Strategy


class Exhaustive(Strategy):
    name = "exhaustive"
    summary = "every valid configuration, in enumeration order"

    def propose(self, history: History) -> int | None:
        left = history.unvisited()
        return int(left[0]) if left.size else None


STRATEGY = Exhaustive
