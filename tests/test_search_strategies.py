"""Strategies on a small synthetic space: they find the optimum within budget, never
propose a configuration twice or an invalid one; failures are remembered."""

from __future__ import annotations

import math
from pathlib import Path

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
        assert best is not None and abs(best[1] - math.log(optimum)) < 1e-12, \
            f"{name} (seed {seed}) missed the optimum in {budget} of {len(space)} evaluations"


def test_exhaustive_stops_when_everything_is_visited(recording) -> None:  # type: ignore[no-untyped-def]
    run = replay(recording.search, recording.objective, "exhaustive", 0, 10_000)
    assert len(run.times) == len(recording.search)
    assert sum(t is None for t in run.times) == len(FAILING)  # failures cost and are recorded


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


def test_prior_from_another_device_starts_at_its_best(tmp_path: Path) -> None:
    other = load_recording(write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B", shift=0.3))
    target = load_recording(write_recording(tmp_path, "synth_A.json.gz"))
    source = PriorSource("B", [(other.search.config(r), other.objective.records[other.search.key(r)].time_ms)
                               for r in range(len(other.search))])
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
