"""Random search without replacement: the baseline every other strategy must beat.

A random permutation of the rows is drawn lazily in chunks, so proposing costs O(1)
amortised however large the space is.
"""

from __future__ import annotations


from kxform.search.strategy import History, Strategy


class RandomSearch(Strategy):
    name = "random"
    summary = "uniform random sampling without replacement"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._order = self.rng.permutation(len(self.space))
        self._next = 0

    def propose(self, history: History) -> int | None:
        while self._next < self._order.size:
            row = int(self._order[self._next])
            self._next += 1
            if not history.visited[row]:
                return row
        return None


STRATEGY = RandomSearch
