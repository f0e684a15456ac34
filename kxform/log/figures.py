"""Figures carried by log records, in one shape for the viewers: before/after times,
tuning evaluations, L2-model predictions (docs/pass-log.md, "Figures").

Writers should log figures as numbers (`"figures": {"original_ms": ...}` on a check,
`tune` and `l2` records); the `measure` check of schema 1 carries them only in its
text, which is parsed here as a fallback. Anything missing is None, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]

_MEASURE = re.compile(
    r"size (?P<size>\S+) on (?P<runtime>\w+): original (?P<before>[\d.]+) ms "
    r"\(\+-(?P<before_spread>[\d.]+)\), rewritten (?P<after>[\d.]+) ms \(\+-(?P<after_spread>[\d.]+)\)"
)


@dataclass(frozen=True)
class Timing:
    """Original and rewritten kernel times of one `measure` check."""

    original_ms: float
    rewritten_ms: float
    original_spread_ms: float | None = None
    rewritten_spread_ms: float | None = None
    size: str = ""
    runtime: str = ""

    @property
    def speedup(self) -> float:
        return self.original_ms / self.rewritten_ms if self.rewritten_ms > 0 else float("nan")


def timing(kernel: Record) -> Timing | None:
    """The before/after times of a kernel record's `measure` check, if it has one."""
    for check in kernel.get("checks") or []:
        if not isinstance(check, dict) or check.get("name") != "measure":
            continue
        figures = check.get("figures")
        if isinstance(figures, dict) and _num(figures.get("original_ms")) and _num(figures.get("rewritten_ms")):
            return Timing(
                float(figures["original_ms"]),
                float(figures["rewritten_ms"]),
                _opt(figures.get("original_spread_ms")),
                _opt(figures.get("rewritten_spread_ms")),
                str(figures.get("size", "")),
                str(figures.get("runtime", "")),
            )
        match = _MEASURE.search(str(check.get("detail", "")))
        if match:
            return Timing(
                float(match["before"]),
                float(match["after"]),
                float(match["before_spread"]),
                float(match["after_spread"]),
                match["size"],
                match["runtime"],
            )
    return None


@dataclass(frozen=True)
class Evaluation:
    """One configuration a tuner measured (`time_ms` None: it failed, `status` says how)."""

    index: int
    params: dict[str, Any]
    time_ms: float | None
    status: str = "ok"


@dataclass
class TuneSeries:
    """The evaluations of one tuning run of one kernel, in order."""

    file: str
    kernel: str
    strategy: str = ""
    evaluations: list[Evaluation] = field(default_factory=list)

    def best_so_far(self) -> list[float | None]:
        best: float | None = None
        out = []
        for e in self.evaluations:
            if e.time_ms is not None and (best is None or e.time_ms < best):
                best = e.time_ms
            out.append(best)
        return out

    @property
    def best(self) -> Evaluation | None:
        timed = [e for e in self.evaluations if e.time_ms is not None]
        return min(timed, key=lambda e: e.time_ms or 0.0) if timed else None


def tune_series(records: Iterable[Record]) -> list[TuneSeries]:
    """`tune` records grouped per (file, kernel, strategy): one record per evaluation
    (`eval`, `params`, `time_ms`, `status`) or one record with an `evaluations` list."""
    series: dict[tuple[str, str, str], TuneSeries] = {}
    for record in records:
        if record.get("type") != "tune":
            continue
        items = record.get("evaluations")
        if not isinstance(items, list) and not any(k in record for k in ("eval", "params", "time_ms")):
            continue  # a kernel with nothing to tune, or one that could not be: no evaluation (tune_outcomes)
        key = (str(record.get("file", "")), str(record.get("kernel", "")), str(record.get("strategy", "")))
        entry = series.setdefault(key, TuneSeries(*key))
        for item in items if isinstance(items, list) else [record]:
            if isinstance(item, dict):
                entry.evaluations.append(_evaluation(item, len(entry.evaluations) + 1))
    for entry in series.values():
        entry.evaluations.sort(key=lambda e: e.index)
    return list(series.values())


def _evaluation(item: Record, default_index: int) -> Evaluation:
    index = item.get("eval", item.get("index", default_index))
    time_ms = item.get("time_ms")
    params = item.get("params")
    return Evaluation(
        int(index) if _num(index) else default_index,
        dict(params) if isinstance(params, dict) else {},
        float(time_ms) if _num(time_ms) else None,
        str(item.get("status") or ("ok" if _num(time_ms) else "failed")),
    )


@dataclass(frozen=True)
class TuneOutcome:
    """What one kernel's tuning concluded (a `tune` record's `result`, or its `error`):
    a row of the speed-up table of a `tune DIR` run."""

    file: str
    kernel: str
    passes: tuple[str, ...]
    values: dict[str, Any]
    original_ms: float | None
    time_ms: float | None
    spread_ms: float | None
    speedup: float | None
    note: str

    @property
    def timing(self) -> Timing | None:
        if self.original_ms and self.time_ms:
            return Timing(self.original_ms, self.time_ms)
        return None


def tune_outcomes(records: Iterable[Record]) -> list[TuneOutcome]:
    """Per kernel of a pipeline tuning run (one `tune` record each), what won against the
    original, the original kept and why, or the error that stopped it."""
    out = []
    for record in records:
        if record.get("type") != "tune" or not ("result" in record or "error" in record):
            continue
        result = record.get("result") if isinstance(record.get("result"), dict) else {}
        if not result and "error" not in record:
            continue  # a recorded space: no original to compare with
        note = (
            f"error: {record['error']}"
            if "error" in record
            else f"original kept: {result.get('reason')}"
            if result.get("kept_original")
            else ""
        )
        values = result.get("values")
        out.append(
            TuneOutcome(
                str(record.get("file", "")),
                str(record.get("kernel", "")),
                tuple(map(str, result.get("passes") or ())),
                dict(values) if isinstance(values, dict) else {},
                _opt(result.get("original_ms")),
                _opt(result.get("time_ms")),
                _opt(result.get("spread_ms")),
                _opt(result.get("speedup")),
                note,
            )
        )
    return out


def original_ms(records: Iterable[Record], file: str, kernel: str) -> float | None:
    """The original's time of a tuned kernel (its `tune` record's `result`), if known."""
    for record in records:
        if record.get("type") == "tune" and record.get("file") == file and record.get("kernel") == kernel:
            result = record.get("result")
            if isinstance(result, dict) and _num(result.get("original_ms")):
                return float(result["original_ms"])
    return None


@dataclass(frozen=True)
class Prediction:
    """The L2 model's figures for one block order of one kernel."""

    pattern: str
    l2_hit_rate: float | None
    dram_read_bytes: float | None
    dram_write_bytes: float | None
    rank: int | None = None
    margin: float | None = None


@dataclass(frozen=True)
class PredictionSet:
    file: str
    kernel: str
    hw: str
    size: str
    predictions: tuple[Prediction, ...]
    chosen: str | None = None
    """The order the model proposed (a `pattern` of `predictions`), when it says."""


def l2_predictions(records: Iterable[Record]) -> list[PredictionSet]:
    """Per kernel, `predictions` = [{pattern, l2_hit_rate, dram_read_bytes, ...}]: from `l2`
    records, and from the `LocalityPrediction` remarks `kxform apply` logs (their `args`)."""
    out = []
    for record in records:
        if record.get("type") == "remark" and record.get("name") == "LocalityPrediction":
            data = record.get("args") if isinstance(record.get("args"), dict) else {}
            kernel = record.get("function")
        elif record.get("type") == "l2":
            data, kernel = record, record.get("kernel")
        else:
            continue
        if not isinstance(data.get("predictions"), list):
            continue
        rows = tuple(
            Prediction(
                str(p.get("pattern", "?")),
                _opt(p.get("l2_hit_rate")),
                _opt(p.get("dram_read_bytes")),
                _opt(p.get("dram_write_bytes")),
                int(p["rank"]) if _num(p.get("rank")) else None,
                _opt(p.get("margin")),
            )
            for p in data["predictions"]
            if isinstance(p, dict)
        )
        chosen = data.get("chosen")
        out.append(
            PredictionSet(
                str(record.get("file", "")),
                str(kernel or ""),
                str(data.get("hw", "")),
                str(data.get("size", "")),
                rows,
                str(chosen) if isinstance(chosen, str) else None,
            )
        )
    return out


def _num(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _opt(value: object) -> float | None:
    return float(value) if _num(value) else None  # type: ignore[arg-type]
