"""What one kernel teaches the next (kxform.search.transfer): the second layer norm tuned
starts where the first ended; a dissimilar kernel, or one left out, teaches nothing; the
database keeps each kernel's features and each evaluation's status."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import CORPORA
from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.frontend.source import read_source
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.search.db import TuneKey, TuningDB
from kxform.search.kernel_space import kernel_space
from kxform.search.objective import Evaluation
from kxform.search.predictor import Predictor
from kxform.search.prior import build_prior
from kxform.search.space import SearchSpace
from kxform.search.strategy import History, make_strategy
from kxform.search.transfer import mapped_scores, similar_columns, similarity


def _space(*params: Param, constraints: tuple[str, ...] = ()) -> SearchSpace:
    return SearchSpace.build(ParamSpace(params, tuple(Constraint.parse(c) for c in constraints)))


def test_results_map_onto_the_rows_that_agree_on_the_shared_parameters() -> None:
    space = _space(
        Param.boolean("rows", False), Param("rows.lanes", "int", (1, 32, 128), 1), Param("x", "int", (1, 2), 1)
    )
    results = [({"rows": True, "rows.lanes": 128, "y": 7}, 1.0), ({"rows": False, "rows.lanes": 1, "y": 7}, 10.0)]
    scores = mapped_scores(space, results)
    assert scores is not None
    by = {(c["rows"], c["rows.lanes"]): scores[r] for r in range(len(space)) for c in [space.config(r)]}
    assert by[(True, 128)] < by[(False, 1)]  # the faster result's region ranks first, whatever x is
    assert math.isnan(by[(True, 32)])  # no result agrees with it: unknown, not a guess
    assert (
        mapped_scores(space, [({"rows": True, "rows.lanes": 64}, 1.0), ({"rows": False, "rows.lanes": 1}, 2.0)]) is None
    )
    assert mapped_scores(space, [({"other": 1}, 1.0), ({"other": 2}, 2.0)]) is None  # nothing shared


def test_similarity_needs_alike_features_and_shared_names() -> None:
    features = {"reduces": 1.0, "loads": 0.5}
    assert similarity(features, features, ("rows", "rows.lanes"), ("rows", "rows.lanes")) == pytest.approx(1.0)
    assert similarity(features, features, ("rows",), ("tile",)) == 0.0
    far = {"reduces": 0.0, "loads": 0.0}
    assert similarity(features, far, ("rows",), ("rows",)) < 0.01


def _kernel(name: str, folder: str):  # type: ignore[no-untyped-def]
    source = read_source(str(CORPORA / "naive" / folder / "naive.cu"))
    spec = load_spec(CORPORA / "naive" / folder / "naive.kxspec.toml").kernel(name)
    space = kernel_space(source.data, name, None, path=source.path, hw="h200")
    hw = load_profile("h200")
    features = Predictor(source, name, spec, spec.bench_sizes[0], space, hw).features()
    return space, space.search(hw), features


def _layer_norm_time(config: dict[str, object]) -> float:
    """What a first layer norm measured: a block of 128 lanes per row fastest, one thread
    per row slow, coarsening slower still."""
    if config.get("rows"):
        return 0.14 * (1.0 + abs(math.log2(float(config["rows.lanes"]) / 128)) * 0.3)  # type: ignore[arg-type]
    if config.get("coarsen"):
        return 5.0
    return 1.9


@pytest.mark.slow
def test_the_second_layer_norm_starts_where_the_first_ended(tmp_path: Path) -> None:
    first_space, first, first_features = _kernel("layernorm_naive", "layernorm")
    second_space, second, second_features = _kernel("rmsnorm_naive", "rmsnorm")
    assert first_features is not None and second_features is not None
    with TuningDB(tmp_path / "t.sqlite") as db:
        key = TuneKey("first", "layernorm_naive", "H200", first.names)
        # what a staged search of the first measured: every structure, and some refinements
        structure = [r for r in range(len(first)) if not any(first.config(r)[p] for p in ("launch", "unroll"))]
        others = np.random.default_rng(0).choice(len(first), 20, replace=False)
        for row in {*structure, *map(int, others)}:
            config = first.config(row)
            db.put(key, config, Evaluation(_layer_norm_time(config)))
        db.put_features(key, first_features)
        assert [k[1] for k in db.kernels()] == ["layernorm_naive"]
        second_key = TuneKey("second", "rmsnorm_naive", "H200", second.names)
        columns = similar_columns(db, second_key, second_features, second)
        assert [c.label.split(" ")[0] for c in columns] == ["layernorm_naive"] and columns[0].weight >= 0.25
        prior = build_prior(second, [], columns)
        assert prior is not None
        strategy = make_strategy("model", second, 0, prior)
        history = History(len(second))
        original = second.default_row()
        assert original is not None
        history.start(original)
        history.add(original, 2.0)
        proposed = second.config(strategy.propose(history))  # type: ignore[arg-type]
        assert proposed["rows"] and proposed["rows.lanes"] == 128, proposed
        # left out (as a benchmark leaves a family out), or unlike, it teaches nothing
        assert similar_columns(db, second_key, second_features, second, leave_out={"layernorm_naive"}) == []
        unlike = {k: 1.0 - v for k, v in second_features.items()}
        assert similar_columns(db, second_key, unlike, second) == []
    assert first_space.passes and second_space.passes


def test_the_database_keeps_features_and_the_cut_off_status(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    key = TuneKey("h", "k", "GPU", ("a",))
    with TuningDB(path) as db:
        db.put(key, {"a": 1}, Evaluation(2.0, 0.1, cut_off=True, detail="cut off after the first 3 launches"))
        db.put(key, {"a": 2}, Evaluation(1.0, 0.1))
        assert db.get(key, {"a": 1}) == Evaluation(
            2.0, 0.1, cost_s=0.0, detail="cut off after the first 3 launches", cut_off=True
        )
        assert db.get(key, {"a": 2}).cut_off is False  # type: ignore[union-attr]
        db.put_features(key, {"loads": 0.5})
    with sqlite3.connect(path) as raw:  # a database written before features were kept
        raw.execute("DROP TABLE kernel_features")
    with TuningDB(path) as db:
        assert db.kernels() == []
        db.put_features(key, {"loads": 0.25})
        assert db.kernels() == [("h", "k", ("a",), {"loads": 0.25})]
    with sqlite3.connect(path) as raw:  # planted: features that are not numbers
        raw.execute('UPDATE kernel_features SET features = \'{"loads": "many"}\'')
    with TuningDB(path) as db, pytest.raises(Exception, match="malformed features"):
        db.kernels()
