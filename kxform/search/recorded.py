"""Recorded tuning spaces: Kernel Tuner cache files and benchmark-hub space definitions.

A recording (`*.json` or `*.json.gz`, Kernel Tuner's cache format) holds `tune_params`,
their order (`tune_params_keys`) and one record per measured configuration, keyed by
its comma-joined values; a record's `time` is a number (ms) or the name of a failure
class (`CompilationFailedConfig`, `RuntimeFailedConfig`, `InvalidConfig`,
`ErrorConfig`). A space definition (`*.space.json`, the benchmark hub's format) adds
the restrictions, as expressions kxform's logic grammar reads.

`load_recording` returns the ParamSpace (with the constraints of the matching space
definition beside the file, when there is one), the replay objective and the kernel
and device names. Every defect of the input is an InputError naming the file and
what is wrong: unreadable or truncated files, mis-typed fields, records whose values
disagree with their key, and valid configurations of the space that are not recorded.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kxform.engine.params import Constraint, Param, ParamSpace, ParamValue
from kxform.errors import InputError, KxformError
from kxform.frontend.source import read_bytes_bounded
from kxform.search.objective import Evaluation, Failure, ReplayObjective
from kxform.search.space import SearchSpace

FAILURES = {
    "InvalidConfig": Failure.INVALID,
    "CompilationFailedConfig": Failure.COMPILE,
    "RuntimeFailedConfig": Failure.RUNTIME,
    "ErrorConfig": Failure.RUNTIME,
}
COST_FIELDS = ("compile_time", "verification_time", "benchmark_time")
MAX_BYTES = 512 << 20


@dataclass(frozen=True)
class Recording:
    """A recorded space: its parameters and constraints, every configuration's result."""

    path: str
    kernel: str
    device: str
    space: ParamSpace
    objective: ReplayObjective
    search: SearchSpace
    """The valid configurations: enumerated from the constraints when a space
    definition was found, else exactly the recorded configurations."""
    definition: str = ""
    """The `*.space.json` whose constraints were used, or empty."""

    def times(self) -> dict[str, float]:
        """Cache key -> time (ms) of every configuration that has one."""
        return {k: e.time_ms for k, e in self.objective.records.items() if e.time_ms is not None}


def _parse_value(param: Param, text: str) -> ParamValue:
    if param.kind == "int":
        return int(text)
    if param.kind == "bool":
        return text == "True"
    return text


def read_json(path: Path) -> Any:
    """JSON from a plain or gzip-compressed file; Kernel Tuner's open (unterminated)
    caches are closed as Kernel Tuner closes them."""
    try:
        raw = read_bytes_bounded(str(path), MAX_BYTES, "a recording")
        if raw[:2] == b"\x1f\x8b":
            inflate = zlib.decompressobj(wbits=31)
            raw = inflate.decompress(raw, MAX_BYTES + 1)  # bounded: no gzip bomb
            if not inflate.eof and len(raw) <= MAX_BYTES:
                raise EOFError("the gzip stream ends early")
        if len(raw) > MAX_BYTES:
            raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path}: unreadable or truncated gzip data ({exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        stripped = text.rstrip()
        if stripped.endswith(","):
            try:
                return json.loads(stripped[:-1] + "}\n}")
            except json.JSONDecodeError:
                pass
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: truncated or invalid JSON ({exc.msg})") from None


def _params_from_cache(data: dict[str, Any], path: Path) -> ParamSpace:
    tune = data.get("tune_params")
    order = data.get("tune_params_keys")
    if not isinstance(tune, dict) or not tune:
        raise InputError(f"{path}: 'tune_params' must be an object of parameter -> list of values")
    if order is None:
        order = list(tune)
    if not isinstance(order, list) or sorted(map(str, order)) != sorted(tune):
        raise InputError(f"{path}: 'tune_params_keys' does not list the parameters of 'tune_params'")
    params = []
    for name in order:
        params.append(_param(name, tune[name], f"{path}: tune_params.{name}"))
    try:
        return ParamSpace(tuple(params))
    except KxformError as exc:
        raise InputError(f"{path}: {exc.cause}") from None


def _param(name: str, values: Any, where: str) -> Param:
    if not isinstance(values, list) or not values:
        raise InputError(f"{where}: expected a non-empty list of values")
    try:
        if all(isinstance(v, bool) for v in values):
            return Param(name, "bool", tuple(values), values[0])
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return Param(name, "int", tuple(values), values[0])
        if all(isinstance(v, str) for v in values):
            return Param.enum(name, values, values[0])
    except KxformError as exc:
        raise InputError(f"{where}: {exc.cause}") from None
    raise InputError(f"{where}: values must be all integers, all booleans or all strings (got {values!r:.80})")


def _evaluation(key: str, record: Any, objective: str, path: Path) -> Evaluation:
    if not isinstance(record, dict):
        raise InputError(f"{path}: record {key!r} is not an object")
    cost = 0.0
    for name in COST_FIELDS:
        value = record.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"{path}: record {key!r}: {name} is {value!r}, expected a non-negative number")
        cost += value / 1000.0
    time = record.get(objective)
    if isinstance(time, str):
        if time not in FAILURES:
            raise InputError(
                f"{path}: record {key!r}: {objective} is {time!r}, expected a number or one of {', '.join(FAILURES)}"
            )
        return Evaluation.failed(FAILURES[time], cost, time)
    if isinstance(time, bool) or not isinstance(time, (int, float)) or not math.isfinite(time) or time <= 0:
        raise InputError(f"{path}: record {key!r}: {objective} is {time!r}, expected a positive number")
    spread = _spread(record.get("times"))
    return Evaluation(float(time), spread, None, cost)


def _spread(samples: Any) -> float:
    if isinstance(samples, list) and len(samples) > 1 and all(isinstance(s, (int, float)) for s in samples):
        ordered = sorted(samples)
        return float(ordered[(3 * len(ordered)) // 4] - ordered[len(ordered) // 4]) / 2
    return 0.0


def _records(data: dict[str, Any], space: ParamSpace, path: Path) -> dict[str, Evaluation]:
    cache = data.get("cache")
    if not isinstance(cache, dict) or not cache:
        raise InputError(f"{path}: 'cache' must be a non-empty object of configuration -> record")
    objective = data.get("objective", "time")
    if not isinstance(objective, str):
        raise InputError(f"{path}: 'objective' must be a string (got {objective!r:.40})")
    out = {}
    for key, record in cache.items():
        parts = key.split(",")
        if len(parts) != len(space):
            raise InputError(f"{path}: record key {key!r} has {len(parts)} values for {len(space)} parameters")
        for param, text in zip(space.params, parts):
            if str(_parse_or_none(param, text)) != text or (
                isinstance(record, dict) and param.name in record and str(record[param.name]) != text
            ):
                raise InputError(
                    f"{path}: record {key!r}: {param.name}={text} is not one of its values "
                    f"{param.describe_values()} or disagrees with the record"
                )
        out[key] = _evaluation(key, record, objective, path)
    return out


def _parse_or_none(param: Param, text: str) -> ParamValue | None:
    try:
        value = _parse_value(param, text)
    except ValueError:
        return None
    return value if value in param.values else None


def load_definition(path: Path) -> tuple[dict[str, list[Any]], list[str]]:
    """A benchmark-hub `*.space.json`: parameter -> values, and the restriction texts."""
    data = read_json(path)
    try:
        params = data["ConfigurationSpace"]["TuningParameters"]
        conditions = data["ConfigurationSpace"].get("Conditions", [])
        values = {}
        for param in params:
            raw = param["Values"]
            values[str(param["Name"])] = json.loads(raw) if isinstance(raw, str) else list(raw)
        restrictions = [str(c["Expression"]) for c in conditions]
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{path}: not a space definition (ConfigurationSpace.TuningParameters with Name and "
            f"Values; Conditions with Expression): {type(exc).__name__} {exc}"
        ) from None
    return values, restrictions


def find_definition(path: Path, space: ParamSpace) -> Path | None:
    """The `*.space.json` beside `path` whose parameters and values are the recording's."""
    wanted = {p.name: list(p.values) for p in space.params}
    for candidate in sorted(path.parent.glob("*.space.json")):
        try:
            values, _ = load_definition(candidate)
        except InputError:
            continue
        if values == wanted:
            return candidate
    return None


def load_recording(path: str | Path, definition: str | Path | None = None) -> Recording:
    """Read a recording; the space definition is `definition`, else found beside it."""
    file = Path(path)
    data = read_json(file)
    if not isinstance(data, dict):
        raise InputError(f"{file}: not a Kernel Tuner cache file (expected a JSON object)")
    bare = _params_from_cache(data, file)
    records = _records(data, bare, file)
    space_file = Path(definition) if definition else find_definition(file, bare)
    space = bare
    if space_file is not None:
        space = _constrained(bare, space_file)
    device = str(data.get("device_name") or file.stem)
    kernel = str(data.get("kernel_name") or "")
    objective = ReplayObjective(records, bare.names, device, str(file))
    if space_file is None:
        search = _recorded_rows(bare, records)
    else:
        try:
            search = SearchSpace.build(space)
        except KxformError as exc:
            raise InputError(f"{space_file}: {exc.cause}") from None
        _check_complete(search, records, file, space_file)
    return Recording(str(file), kernel, device, space, objective, search, str(space_file or ""))


def _recorded_rows(space: ParamSpace, records: dict[str, Evaluation]) -> SearchSpace:
    rows = sorted(
        tuple(p.values.index(_parse_value(p, v)) for p, v in zip(space.params, key.split(","))) for key in records
    )
    codes = np.array(rows, dtype=np.int32).reshape(len(rows), len(space.params))
    codes.setflags(write=False)
    return SearchSpace(space, codes, True)


def _constrained(bare: ParamSpace, space_file: Path) -> ParamSpace:
    values, restrictions = load_definition(space_file)
    if values != {p.name: list(p.values) for p in bare.params}:
        raise InputError(f"{space_file}: its parameters or values differ from the recording's")
    try:
        constraints = tuple(Constraint.parse(text, origin=str(space_file)) for text in restrictions)
        return ParamSpace(bare.params, constraints)
    except KxformError as exc:
        raise InputError(f"{space_file}: {exc.cause}") from None


def _check_complete(space: SearchSpace, recorded: dict[str, Evaluation], file: Path, space_file: Path) -> None:
    """Every valid configuration is recorded and every record is valid."""
    keys = {space.key(row) for row in range(len(space))}
    missing = sorted(k for k in keys if k not in recorded)
    if missing:
        plural = len(missing) > 1
        raise InputError(
            f"{file}: {len(missing)} valid configuration{'s' if plural else ''} of the space "
            f"{'are' if plural else 'is'} not recorded (first: {missing[0]})"
        )
    extra = sorted(k for k in recorded if k not in keys)
    if extra:
        raise InputError(
            f"{file}: recorded configuration {extra[0]} breaks the constraints of "
            f"{space_file} ({len(extra)} such record{'s' if len(extra) > 1 else ''})"
        )
