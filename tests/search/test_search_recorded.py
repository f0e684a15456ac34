"""Reading recorded spaces (Kernel Tuner cache files) and replaying them; bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kxform.errors import InputError
from kxform.search.objective import Failure
from kxform.search.recorded import load_recording
from search_helpers import PARAMS, records, synthetic_time, valid, write_definition, write_recording


def test_recording_with_definition(tmp_path: Path) -> None:
    recording = load_recording(write_recording(tmp_path))
    assert recording.kernel == "synth_kernel" and recording.device == "Test GPU A"
    assert recording.definition.endswith("synth.space.json")
    expected = len(records())
    assert len(recording.search) == expected
    assert all(valid(recording.search.config(r)) for r in range(len(recording.search)))
    result = recording.objective.evaluate(recording.objective.prepare({"bx": 4, "by": 4, "unroll": 1, "tile": 2}))
    assert result.time_ms == pytest.approx(synthetic_time(4, 4, 1, 2)) and result.cost_s == pytest.approx(1.0)
    failed = recording.objective.evaluate(recording.objective.prepare({"bx": 16, "by": 2, "unroll": 1, "tile": 3}))
    assert failed.failure is Failure.RUNTIME and failed.cost_s == pytest.approx(1.0)


def test_recording_without_definition_uses_the_recorded_configurations(tmp_path: Path) -> None:
    recording = load_recording(write_recording(tmp_path, "plain.json", definition=False))
    assert recording.definition == "" and len(recording.search) == len(records())


def _drop_one(data: dict[str, Any]) -> None:
    del data["cache"]["4,4,1,2"]


def _mistype(data: dict[str, Any]) -> None:
    data["cache"]["4,4,1,2"]["time"] = "fast"


def _bad_value(data: dict[str, Any]) -> None:
    data["cache"]["5,4,1,2"] = dict(data["cache"]["4,4,1,2"], bx=5)


def _bad_params(data: dict[str, Any]) -> None:
    data["tune_params"] = {"bx": "1,2"}


def _negative_cost(data: dict[str, Any]) -> None:
    data["cache"]["4,4,1,2"]["compile_time"] = -1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_drop_one, r"1 valid configuration of the space is not recorded \(first: 4,4,1,2\)"),
        (_mistype, r"record '4,4,1,2': time is 'fast', expected a number or one of"),
        (_bad_value, r"record '5,4,1,2': bx=5 is not one of its values"),
        (_bad_params, r"'tune_params_keys' does not list the parameters|tune_params.bx: expected a non-empty list"),
        (_negative_cost, r"compile_time is -1, expected a non-negative number"),
    ],
)
def test_bad_recordings(tmp_path: Path, mutate: Any, message: str) -> None:
    path = write_recording(tmp_path, mutate=mutate)
    with pytest.raises(InputError, match=message) as info:
        load_recording(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_truncated_files(tmp_path: Path) -> None:
    path = write_recording(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="truncated gzip"):
        load_recording(path)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"tune_params": PARAMS, "cache": records()})[:500])
    with pytest.raises(InputError, match=r"plain.json:1:\d+: truncated or invalid JSON"):
        load_recording(plain)


def test_open_kernel_tuner_cache_is_closed_like_kernel_tuner_does(tmp_path: Path) -> None:
    """A cache Kernel Tuner was still appending to ends in `,` without the closing braces."""
    text = json.dumps(
        {
            "device_name": "X",
            "kernel_name": "k",
            "tune_params_keys": list(PARAMS),
            "tune_params": PARAMS,
            "cache": records(),
        }
    )
    path = tmp_path / "open.json"
    path.write_text(text[:-2] + ",")
    assert len(load_recording(path).search) == len(records())


def test_definition_errors(tmp_path: Path) -> None:
    path = write_recording(tmp_path)
    write_definition(tmp_path / "synth.space.json", ["bx * nope <= 32"])
    with pytest.raises(InputError, match="reads unknown name 'nope'"):
        load_recording(path)
    write_definition(tmp_path / "synth.space.json", ["bx % (by - by) == 0"])
    with pytest.raises(InputError, match="division by zero"):
        load_recording(path)
    write_definition(tmp_path / "synth.space.json", ["bx > 100"])
    with pytest.raises(InputError, match="no valid configuration"):
        load_recording(path)


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    gz = load_recording(write_recording(tmp_path, "a.json.gz"))
    raw = tmp_path / "b.json"
    raw.write_bytes(gzip.decompress((tmp_path / "a.json.gz").read_bytes()))
    assert load_recording(raw).times() == gz.times()
