"""The tuning loop with a cost model that prunes: a pruned configuration is recorded with
its prediction, never stored in the database, not counted against the budget; the
objective hears every result (its bar for pruning and the cut-off); a run that prunes
everything still ends."""

from __future__ import annotations

from pathlib import Path

from kxform.engine.params import Config, Param, ParamSpace
from kxform.search.cost import Prediction
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Evaluation, Failure, Objective, Prepared
from kxform.search.space import SearchSpace
from kxform.search.tuner import PRUNED_ALLOWANCE, TuneOptions, tune


class _Pruning(Objective):
    """x is the time in ms; configurations with x at or above `bar` are pruned before
    they are built, as KernelObjective prunes what the model predicts too slow."""

    name = "test"
    hardware = "test"

    def __init__(self, bar: int) -> None:
        self.bar = bar
        self.observed: list[Evaluation] = []

    def prepare(self, config: Config) -> Prepared:
        items = tuple(config.items())
        prediction = Prediction(0.1, float(config["x"]) + 1.0, "memory", 0.5)  # type: ignore[arg-type]
        if int(config["x"]) >= self.bar:  # type: ignore[call-overload]
            return Prepared(items, failure=Evaluation.failed(Failure.PRUNED, 0.0, "pruned: predicted slow", prediction))
        return Prepared(items, payload=prediction)

    def evaluate(self, prepared: Prepared) -> Evaluation:
        return Evaluation(float(prepared.as_dict()["x"]) + 1.0, cost_s=1.0, prediction=prepared.payload)  # type: ignore[arg-type]

    def observe(self, evaluation: Evaluation) -> None:
        self.observed.append(evaluation)


def _space() -> SearchSpace:
    return SearchSpace.build(ParamSpace((Param("x", "int", tuple(range(20)), 0),)))


def test_pruned_configurations_are_recorded_not_stored_and_not_counted(tmp_path: Path) -> None:
    space = _space()
    objective = _Pruning(bar=10)
    key = TuneKey("h", "k", "test", space.names)
    with TuningDB(tmp_path / "t.sqlite") as db:
        result = tune(space, objective, TuneOptions(strategy="random", budget=8, seed=1), db=db, key=key)
        stored = db.all(key)
    pruned = [s for s in result.steps if s.evaluation.pruned]
    assert result.counted == 8 and result.measured == 8 and pruned  # the budget counts what was measured
    assert all(s.evaluation.status == "pruned" and s.evaluation.prediction is not None for s in pruned)
    assert len(stored) == 8 and not any(s.evaluation.pruned for s in stored)  # a prediction is no measurement
    assert len(objective.observed) == len(result.steps)  # the objective hears every result
    agreement = result.model_agreement()
    assert agreement["pairs"] == 8 and agreement["kendall_tau"] == 1.0  # predictions rank the times exactly


def test_a_run_that_prunes_everything_still_ends() -> None:
    result = tune(_space(), _Pruning(bar=0), TuneOptions(strategy="random", budget=3))
    assert result.counted == 0 and result.stopped == "budget"
    assert len(result.steps) == 3 * PRUNED_ALLOWANCE
