"""Times recorded for a kernel's configurations, replayed where the code is still
rewritten, checked and verified for real (`kxform tune --objective cpu+replay:FILE`).

A GPU run's `kxform tune --json` summary holds every evaluation: its configuration
(`params`), status and `time_ms` with `spread_ms`, plus the original's time
(`original_ms`). Replaying those times on a machine without a GPU lets the whole
pipeline (the passes' rewrites and checks, the compile, the differential run on the
CPU runtime) run again and be tested; only the stopwatch is recorded. A configuration
the recording has no time for is a runtime failure (`no recorded time`), never a guess.

Every defect of the file (unreadable, not JSON, an evaluation without `params`, a time
that is not a positive number) is an InputError naming the file and the entry.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.engine.params import Config
from kxform.errors import InputError
from kxform.verify.measure import Timing


@dataclass(frozen=True)
class RecordedTimes:
    """Configuration key (`config_key`) -> recorded timing, and the original's time."""

    path: str
    kernel: str
    times: Mapping[str, Timing]
    original: Timing | None = None

    def timing(self, config: Config) -> Timing | None:
        return self.times.get(config_key(config))


def config_key(config: Mapping[str, Any]) -> str:
    """A configuration's key whatever the order of its parameters (JSON keeps the writer's)."""
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True)


def load_times(path: str | Path, kernel: str, size: str | None = None) -> RecordedTimes:
    """Read the times of `kernel` from a `tune --json` summary: one kernel's, a
    directory run's (`kernels`: one summary per kernel; a kernel it lacks has no times)
    or a run over several sizes (`sizes`: one summary per timing size, picked by `size`;
    a size it lacks has no times)."""
    shown = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{shown}: unreadable: {getattr(exc, 'strerror', None) or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{shown}:{exc.lineno}: not JSON: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("kernels"), list):
        data = next(
            (k for k in data["kernels"] if isinstance(k, dict) and k.get("kernel") == kernel),
            {"kernel": kernel, "evaluations": []},
        )
    if isinstance(data, dict) and isinstance(data.get("sizes"), list):
        if data.get("kernel") not in (None, kernel):
            raise InputError(f"{shown}: times of kernel '{data.get('kernel')}', not '{kernel}'")
        data = next(
            (s for s in data["sizes"] if isinstance(s, dict) and s.get("size") == size),
            {"kernel": kernel, "evaluations": []},
        )
    if isinstance(data, dict) and data.get("kernel") not in (None, kernel):
        raise InputError(f"{shown}: times of kernel '{data.get('kernel')}', not '{kernel}'")
    entries = data.get("evaluations") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{shown}: expected a `tune --json` summary (an object with `evaluations`)")
    times: dict[str, Timing] = {}
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
            raise InputError(f"{shown}: evaluation {number}: expected an object with `params`")
        if entry.get("time_ms") is None:
            continue  # a failure recorded there is measured again here: verification decides
        times[config_key(entry["params"])] = Timing(
            _positive(shown, number, entry, "time_ms"), _spread(shown, number, entry)
        )
    original = data.get("original_ms")
    recorded_original = (
        None if original is None else Timing(_positive(shown, 0, {"original_ms": original}, "original_ms"), 0.0)
    )
    return RecordedTimes(shown, kernel, times, recorded_original)


def _positive(path: str, number: int, entry: Mapping[str, Any], key: str) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        where = f"evaluation {number}" if number else "the summary"
        raise InputError(f"{path}: {where}: `{key}` must be a positive number of milliseconds, got {value!r}")
    return float(value)


def _spread(path: str, number: int, entry: Mapping[str, Any]) -> float:
    value = entry.get("spread_ms", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{path}: evaluation {number}: `spread_ms` must be a number >= 0, got {value!r}")
    return float(value)
