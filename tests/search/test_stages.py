"""Structure before polish (kxform.search.stages): the model-guided strategy proposes the
structure passes' configurations first, in the order the cost model predicts, refines
the best measured structure next, and leaves hopeless structures for last; without
hints it searches as it always did."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.search.space import SearchSpace
from kxform.search.stages import HOPELESS, TRUST_PAIRS, Stages
from kxform.search.strategy import History, SearchHints, make_strategy

STRUCTURE_VALUES = (1, 2, 4, 8, 16, 32)


def _space() -> SearchSpace:
    """Two passes as a composed space names them: `rows` (structure) and `unroll`
    (refining), each a switch and a value pinned at its default while it is off."""
    params = (
        Param.boolean("rows", False),
        Param("rows.lanes", "int", STRUCTURE_VALUES, 1),
        Param.boolean("unroll", False),
        Param("unroll.factor", "int", (1, 2, 4, 8), 1),
    )
    pinned = (
        Constraint.parse("rows or rows.lanes == 1"),
        Constraint.parse("unroll or unroll.factor == 1"),
    )
    return SearchSpace.build(ParamSpace(params, pinned))


STRUCTURE = (True, True, False, False)


def _predicted(space: SearchSpace, hopeless: int = 1) -> dict[int, float]:
    """Milliseconds predicted per row: more lanes faster, down to 4 ms at 32 lanes; the
    original (rows off) predicted `hopeless` x the best times HOPELESS (tried last when 1)."""
    out = {}
    for row in range(len(space)):
        config = space.config(row)
        ms = 4.0 * 32 / config["rows.lanes"] if config["rows"] else 4.0 * HOPELESS * hopeless * 1.5
        out[row] = ms * (1.0 - 0.01 * config["unroll.factor"])
    return out


def _measured(config: dict[str, object]) -> float:
    """The times the searches find: the predictions' order, and unrolling by 4 best."""
    lanes = config["rows.lanes"] if config["rows"] else 0.5
    return 100.0 / float(lanes) * (0.8 if config["unroll"] and config["unroll.factor"] == 4 else 1.0)  # type: ignore[arg-type]


def _run(space: SearchSpace, hints: SearchHints | None, budget: int, seed: int = 0) -> list[tuple[int, str]]:
    strategy = make_strategy("model", space, seed, None, hints)
    history = History(len(space))
    out = []
    original = space.default_row()
    for index in range(budget):
        row = original if index == 0 else strategy.propose(history)
        assert row is not None and not history.visited[row]
        out.append((row, strategy.stage if index else ""))
        history.start(row)
        history.add(row, _measured(space.config(row)))
    return out


def test_structure_first_in_the_predicted_order_then_the_best_structure_refined() -> None:
    space = _space()
    predicted = _predicted(space)
    hints = SearchHints(STRUCTURE, lambda row: predicted[row], budget=10)
    run = _run(space, hints, 10)
    stages = [stage for _, stage in run[1:]]
    configs = [space.config(row) for row, _ in run]
    # 32 and 16 lanes are predicted within HOPELESS of the best; 8 lanes and fewer, and the
    # original's structure, are not (kept for the open stage, last)
    assert stages[:2] == ["structure", "structure"] and stages[2] == "refine"
    structure = [c for c, s in zip(configs[1:], stages) if s == "structure"]
    assert all(c["rows"] and not c["unroll"] for c in structure)  # structure passes alone
    assert [c["rows.lanes"] for c in structure] == [32, 16]  # best predicted first
    refine = [c for c, s in zip(configs[1:], stages) if s == "refine"]
    assert refine and all(c["rows"] and c["rows.lanes"] == 32 and c["unroll"] for c in refine)
    assert any(c["unroll.factor"] == 4 for c in refine)  # the refinement that wins is found


def test_hopeless_structures_are_tried_last() -> None:
    space = _space()
    predicted = _predicted(space)
    hints = SearchHints(STRUCTURE, lambda row: predicted[row], budget=40)
    run = _run(space, hints, len(space))
    # 32 and 16 lanes are within HOPELESS of the best prediction; fewer lanes, and the
    # original (rows off), are not: every row of theirs comes after every other row
    promising = [i for i, (row, _) in enumerate(run[1:], 1) if space.config(row)["rows.lanes"] in (16, 32)]
    hopeless = [i for i, (row, _) in enumerate(run[1:], 1) if space.config(row)["rows.lanes"] not in (16, 32)]
    assert hopeless and promising and min(hopeless) > max(promising)


def test_a_hopeless_structure_measured_best_is_not_left_for_last() -> None:
    """The model predicts the original's structure hopeless, and it measures fastest: its
    refinements are searched at once (planted: a model that ranks the wrong way)."""
    space = _space()
    predicted = _predicted(space)
    hints = SearchHints(STRUCTURE, lambda row: predicted[row], budget=40)
    strategy = make_strategy("model", space, 0, None, hints)
    history = History(len(space))
    original = space.default_row()
    assert original is not None
    history.start(original)
    history.add(original, 0.01)  # the fastest by far
    for _ in range(12):
        row = strategy.propose(history)
        assert row is not None
        history.start(row)
        config = space.config(row)
        history.add(row, 0.01 * (0.9 if config["unroll"] and not config["rows"] else 50.0))
    proposed = [space.config(r) for r in history.rows[1:]]
    assert any(not c["rows"] and c["unroll"] for c in proposed)


def test_hopeless_is_forgotten_when_the_model_ranks_the_measurements_badly() -> None:
    space = _space()
    predicted = _predicted(space)
    hints = SearchHints(STRUCTURE, lambda row: predicted[row], budget=40)
    stages = Stages(space, hints, np.random.default_rng(0))
    history = History(len(space))
    rows = [r for r in range(len(space)) if space.config(r)["rows"] and not space.config(r)["unroll"]]
    for row in rows[:TRUST_PAIRS]:
        stages.next(history)
        history.start(row)
        history.add(row, predicted[row])  # measured as predicted
    assert stages._open(history) is not None  # trusted: the hopeless structure is held back
    reversed_history = History(len(space))
    for row in rows[:TRUST_PAIRS]:
        reversed_history.start(row)
        reversed_history.add(row, 1.0 / predicted[row])  # measured in the opposite order
    assert stages._open(reversed_history) is None


def test_without_hints_the_strategy_is_unchanged() -> None:
    space = _space()
    plain = _run(space, None, 12, seed=3)
    structure_only = _run(space, SearchHints(STRUCTURE, None, 12), 12, seed=3)
    assert all(stage == "" for _, stage in plain)
    assert [s for _, s in structure_only][1:5] == ["structure"] * 4  # stages without predictions
    assert Stages.applies(space, None) is False
    assert Stages.applies(space, SearchHints((False,) * 4)) is False


@pytest.mark.parametrize("budget", [5, 40, 200])
def test_quotas_never_exceed_the_budget_or_the_space(budget: int) -> None:
    space = _space()
    stages = Stages(space, SearchHints(STRUCTURE, None, budget), np.random.default_rng(0))
    assert stages.structure_quota <= int(stages.structure_rows.sum())
    assert stages.structure_quota <= max(4, math.ceil(0.4 * budget))
    assert stages.refine_end <= stages.structure_quota + math.ceil(0.4 * budget)


def test_what_similar_kernels_measured_comes_before_the_predictions() -> None:
    """A prior (kxform.search.transfer) that ranks 16 lanes first is followed before the
    predictions, which rank 32 lanes first; without the prior the predictions lead."""
    from kxform.search.strategy import Prior

    space = _space()
    predicted = _predicted(space)
    hints = SearchHints(STRUCTURE, lambda row: predicted[row], budget=40)
    score = np.full(len(space), np.nan)
    for row in range(len(space)):
        config = space.config(row)
        if config["rows"] and not config["unroll"]:
            score[row] = -1.0 if config["rows.lanes"] == 16 else 1.0
    first = space.config(_run(space, hints, 2)[1][0])
    primed_strategy = make_strategy("model", space, 0, Prior(score), hints)
    history = History(len(space))
    original = space.default_row()
    assert original is not None
    history.start(original)
    history.add(original, 50.0)
    primed = space.config(primed_strategy.propose(history))  # type: ignore[arg-type]
    assert first["rows.lanes"] == 32 and primed["rows.lanes"] == 16 and primed_strategy.stage == "structure"
