"""Strategies on a small synthetic space: they find the optimum within budget, never
propose a configuration twice or an invalid one; failures are remembered."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kxform.errors import UsageError
from kxform.search.prior import PriorSource, build_prior
from kxform.search.recorded import load_recording
from kxform.search.replay import replay
from kxform.search.strategy import STRATEGIES, History, load_strategy, make_strategy
from search_helpers import FAILING, write_recording


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return load_recording(write_recording(tmp_path_factory.mktemp("rec")))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_strategy_finds_optimum_without_repeats(recording, name: str) -> None:  # type: ignore[no-untyped-def]
    space, objective = recording.search, recording.objective
    optimum = min(recording.times().values())
    budget = len(space) // 3 if name == "model" else len(space)  # the baselines must cover the whole space
    for seed in range(3):
        strategy = make_strategy(name, space, seed)
        history = History(len(space))
        seen = set()
        for _ in range(budget):
            row = strategy.propose(history)
            assert row is not None
            assert row not in seen, f"{name} proposed {space.key(row)} twice"
            seen.add(row)
            config = space.config(row)
            assert space.params.is_valid(config), f"{name} proposed invalid {config}"
            history.start(row)
            history.add(row, objective.evaluate(objective.prepare(config)).time_ms)
        best = history.best()
        assert best is not None and abs(best[1] - math.log(optimum)) < 1e-12, (
            f"{name} (seed {seed}) missed the optimum in {budget} of {len(space)} evaluations"
        )


def test_exhaustive_stops_when_everything_is_visited(recording) -> None:  # type: ignore[no-untyped-def]
    run = replay(recording.search, recording.objective, "exhaustive", 0, 10_000)
    assert len(run.times) == len(recording.search)
    assert sum(t is None for t in run.times) == len(FAILING)  # failures cost and are recorded


@pytest.mark.slow
def test_model_strategy_beats_random_on_average(recording) -> None:  # type: ignore[no-untyped-def]
    """The model-guided default needs fewer evaluations than random search."""
    optimum = min(recording.times().values())

    def evals(name: str) -> float:
        total = 0
        for seed in range(8):
            run = replay(recording.search, recording.objective, name, seed, len(recording.search))
            reached = run.reach(optimum, 0.0)
            assert reached is not None
            total += reached[0]
        return total / 8

    assert evals("model") < 0.5 * evals("random")


@pytest.mark.slow
def test_failed_configurations_are_never_proposed_again(recording) -> None:  # type: ignore[no-untyped-def]
    space = recording.search
    failing = space.row_of({"bx": 16, "by": 2, "unroll": 1, "tile": 3})
    assert failing is not None
    strategy = make_strategy("model", space, 0)
    history = History(len(space))
    history.start(failing)
    history.add(failing, None)
    for _ in range(len(space) - 1):
        row = strategy.propose(history)
        assert row is not None and row != failing
        history.start(row)
        history.add(row, recording.objective.evaluate(recording.objective.prepare(space.config(row))).time_ms)
    assert strategy.propose(history) is None


@pytest.mark.slow
def test_prior_from_another_device_starts_at_its_best(tmp_path: Path) -> None:
    other = load_recording(write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B", shift=0.3))
    target = load_recording(write_recording(tmp_path, "synth_A.json.gz"))
    source = PriorSource(
        "B",
        [
            (other.search.config(r), other.objective.records[other.search.key(r)].time_ms)
            for r in range(len(other.search))
        ],
    )
    prior = build_prior(target.search, [source])
    assert prior is not None and prior.known.all()
    first = make_strategy("model", target.search, 0, prior).propose(History(len(target.search)))
    best_b = min(other.times().items(), key=lambda kv: kv[1])[0]
    assert target.search.key(first) == best_b
    optimum = min(target.times().values())
    with_prior = replay(target.search, target.objective, "model", 0, len(target.search), prior=prior)
    reached = with_prior.reach(optimum, 0.01)
    assert reached is not None and reached[0] <= 10


def test_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'annealing' \\(strategies: model, random, exhaustive\\)"):
        load_strategy("annealing")


def _source(label: str, recording, invert: bool = False) -> PriorSource:  # type: ignore[no-untyped-def]
    """The recording's results as a prior source; `invert` reverses its ranking (a
    device where what is fast here is slow)."""
    search = recording.search
    out = []
    for row in range(len(search)):
        time_ms = recording.objective.records[search.key(row)].time_ms
        out.append((search.config(row), None if time_ms is None else (1.0 / time_ms if invert else time_ms)))
    return PriorSource(label, out)


def _run_model(recording, prior, evaluations: int):  # type: ignore[no-untyped-def]
    strategy = make_strategy("model", recording.search, 0, prior)
    history = History(len(recording.search))
    for _ in range(evaluations):
        row = strategy.propose(history)
        history.start(row)
        evaluation = recording.objective.evaluate(recording.objective.prepare(recording.search.config(row)))
        history.add(row, evaluation.time_ms)
    return strategy, history


def test_prior_sources_are_weighed_by_agreement_with_measurements(tmp_path: Path) -> None:
    """A source whose ranking is reversed on this device gets weight zero once enough
    configurations are measured; one that agrees keeps a positive weight."""
    target = load_recording(write_recording(tmp_path, "synth_A.json.gz"))
    other = load_recording(write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B", shift=0.3))
    prior = build_prior(target.search, [_source("agrees", other), _source("reversed", other, invert=True)])
    assert prior is not None and prior.per_source is not None and prior.per_source.shape == (2, len(target.search))
    strategy, _ = _run_model(target, prior, 20)
    weights = strategy.prior_weights
    assert weights is not None
    assert weights[0] > 0.3 and weights[1] == 0.0, weights


@pytest.mark.slow
def test_a_reversed_prior_is_dropped_and_costs_little(tmp_path: Path) -> None:
    """With only a reversed source the prior input becomes constant (the model ignores
    it) and the search still reaches the optimum within a third of the space."""
    target = load_recording(write_recording(tmp_path, "synth_A.json.gz"))
    prior = build_prior(target.search, [_source("reversed", target, invert=True)])
    strategy, history = _run_model(target, prior, 20)
    assert strategy.prior_weights is not None and not strategy.prior_weights.any()
    assert (strategy.features[:, -1] == strategy.features[0, -1]).all()
    optimum = min(target.times().values())
    run = replay(target.search, target.objective, "model", 0, len(target.search) // 3, prior=prior)
    assert run.reach(optimum, 0.0) is not None


@pytest.mark.slow
def test_every_fourth_step_walks_an_agreeing_prior_and_a_dropped_one_is_not_walked(tmp_path: Path) -> None:
    """With a source that agrees with this device, every fourth proposal after the
    first ones is the unvisited configuration the weighted prior ranks best; once the
    only source is found reversed (weight zero), no proposal follows its ranking."""
    from kxform.search.strategies.model import PRIOR_EVERY

    target = load_recording(write_recording(tmp_path, "synth_A.json.gz"))
    other = load_recording(write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B", shift=0.3))
    for invert in (False, True):
        prior = build_prior(target.search, [_source("B", other, invert=invert)])
        strategy = make_strategy("model", target.search, 0, prior)
        history = History(len(target.search))
        walked = checked = 0
        for _ in range(40):
            ranking = np.argsort(strategy.features[:, -1], kind="stable")
            expected = next(int(r) for r in ranking if not history.visited[r])
            row = strategy.propose(history)
            if len(history) >= strategy.initial and len(history) % PRIOR_EVERY == 0 and len(history) >= 16:
                checked += 1
                walked += row == expected
            history.start(row)
            history.add(row, target.objective.evaluate(target.objective.prepare(target.search.config(row))).time_ms)
        assert checked >= 5
        if invert:
            assert strategy.prior_weights is not None and not strategy.prior_weights.any()
            assert strategy._prior_next(history) is None
        else:
            assert walked == checked, f"{walked} of {checked} fourth steps followed the prior"


def test_local_step_moves_tied_parameters_together() -> None:
    """Under an equality (T == A * B) no single parameter of a configuration can move:
    the local step then takes the unvisited configurations nearest to the best one
    (two parameters moved by one step each), not some configuration far away."""
    from kxform.engine.params import Constraint, Param, ParamSpace
    from kxform.search.space import SearchSpace
    from kxform.search.strategies.model import ModelGuided

    space = SearchSpace.build(
        ParamSpace(
            (
                Param.ints("A", [1, 2, 4, 8], 2),
                Param.ints("B", [1, 2, 4, 8], 2),
                Param.ints("T", [1, 2, 4, 8, 16, 32, 64], 4),
            ),
            (Constraint.parse("T == A * B"),),
        )
    )
    strategy = ModelGuided(space, np.random.default_rng(0), None)
    best = space.row_of({"A": 2, "B": 2, "T": 4})
    assert best is not None and strategy._neighbours.adjacent(best).size == 0
    history = History(len(space))
    history.start(best)
    history.add(best, 1.0)
    local = strategy._local(history, np.array([best]), np.array([0.0]))
    assert local is not None
    found = sorted((space.config(r)["A"], space.config(r)["B"]) for r in local)
    assert found == [(1, 2), (1, 4), (2, 1), (2, 4), (4, 1), (4, 2)]  # two steps: A or B, and T or the other
    for row in local:  # once those are visited, the next ring is 4 steps away: beyond the radius
        history.start(int(row))
        history.add(int(row), 2.0)
    assert strategy._local(history, np.array([best]), np.array([0.0])) is None


def test_every_third_model_step_is_a_local_step(recording) -> None:  # type: ignore[no-untyped-def]
    """After the initial design, every third proposal moves one parameter of one of the
    best configurations so far to an adjacent value (while such a move is left), or,
    when the best one has no such move left, is among the configurations nearest to it."""
    from kxform.search.strategies.model import LOCAL_RADIUS

    space = recording.search
    strategy = make_strategy("model", space, 1)
    history = History(len(space))
    local_steps = 0
    for _ in range(40):
        row = strategy.propose(history)
        ok = [(v, r) for r, v in zip(history.rows, history.values) if not math.isnan(v)]
        if len(history) >= strategy.initial and len(history) % 3 == 2:
            best = [r for _, r in sorted(ok)[:3]]
            left = [
                r
                for r in range(len(space))
                if not history.visited[r] and any(np.abs(space.codes[r] - space.codes[b]).sum() == 1 for b in best)
            ]
            distance = np.abs(space.codes.astype(int) - space.codes[best[0]]).sum(1)
            open_ = ~history.visited & (distance <= LOCAL_RADIUS)
            if (~history.visited & (distance == 1)).any() or (left and not open_.any()):
                step = [np.abs(space.codes[row] - space.codes[b]) for b in best]
                assert any(s.sum() == 1 for s in step), f"proposal {len(history)} is not adjacent to the best"
                local_steps += 1
            elif open_.any():
                assert distance[row] == distance[open_].min(), f"proposal {len(history)} is not nearest to the best"
                local_steps += 1
        history.start(row)
        history.add(row, recording.objective.evaluate(recording.objective.prepare(space.config(row))).time_ms)
    assert local_steps >= 5


def test_adjacent_moves_one_step_along_ordered_values_and_anywhere_in_an_enum() -> None:
    from kxform.engine.params import Param, ParamSpace
    from kxform.search.space import SearchSpace
    from kxform.search.strategies.model import ModelGuided

    space = SearchSpace.build(ParamSpace((Param.ints("a", [1, 2, 4, 8], 1), Param.enum("e", ["x", "y", "z"], "x")), ()))
    strategy = ModelGuided(space, np.random.default_rng(0), None)
    row = space.row_of({"a": 2, "e": "y"})
    assert row is not None
    found = {(space.config(r)["a"], space.config(r)["e"]) for r in strategy._neighbours.adjacent(row)}
    assert found == {(1, "y"), (4, "y"), (2, "x"), (2, "z")}


def test_alignment_inputs_for_integer_parameters_that_are_not_powers_of_two() -> None:
    """A parameter stepping by 16 gets a second input, the power of two each value is
    a multiple of (48 -> 16, 64 -> 64); a list of powers of two, whose order already
    says it, and an enum get none."""
    from kxform.engine.params import Param, ParamSpace
    from kxform.search.space import SearchSpace
    from kxform.search.strategies.model import ModelGuided, _alignment_columns

    space = SearchSpace.build(
        ParamSpace(
            (
                Param.ints("bx", [16, 32, 48, 64, 80], 16),
                Param.ints("by", [1, 2, 4, 8], 1),
                Param.enum("e", ["x", "y", "z"], "x"),
            ),
            (),
        )
    )
    columns = _alignment_columns(space)
    assert len(columns) == 1
    by_value = {space.config(r)["bx"]: columns[0][r] for r in range(len(space))}
    assert by_value == {16: 0.0, 32: 0.5, 48: 0.0, 64: 1.0, 80: 0.0}
    strategy = ModelGuided(space, np.random.default_rng(0), None)
    assert strategy.features.shape[1] == 4 and strategy.initial == 4  # the design counts parameters, not inputs


def test_initial_design_fills_the_space() -> None:
    """Each design point after the first is the configuration farthest from those
    evaluated (the space is smaller than the design's pool, so all of it is the
    pool): on a 16 x 16 grid the second point lies at the greatest distance any
    configuration has from the first, and no two points of the design are neighbours,
    which random points of a 256-point grid would often be."""
    from kxform.engine.params import Param, ParamSpace
    from kxform.search.space import SearchSpace
    from kxform.search.strategies.model import ModelGuided

    space = SearchSpace.build(ParamSpace((Param.int_range("a", 1, 16, 1), Param.int_range("b", 1, 16, 1)), ()))
    positions = space.features()
    for seed in range(5):
        strategy = ModelGuided(space, np.random.default_rng(seed), None)
        history = History(len(space))
        rows = []
        for _ in range(strategy.initial):
            row = strategy.propose(history)
            history.start(row)
            history.add(row, 1.0 + row)
            rows.append(row)
        farthest = ((positions - positions[rows[0]]) ** 2).sum(1).max()
        assert ((positions[rows[1]] - positions[rows[0]]) ** 2).sum() == pytest.approx(farthest)
        gaps = [np.abs(space.codes[r] - space.codes[q]).max() for i, r in enumerate(rows) for q in rows[:i]]
        assert min(gaps) >= 4, f"seed {seed}: design points {[space.config(r) for r in rows]} bunch together"
