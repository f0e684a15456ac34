"""Nsight Compute's `--csv` output, read into one record per profiled launch.

ncu prints (to stdout, or to `--log-file`) `==PROF==` progress lines, then a table with
one row per launch and metric: `"ID","Process ID","Process Name","Host Name","Kernel
Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric
Name","Metric Unit","Metric Value"` (older versions add a "Kernel Time" column; columns
are found by name). Values may carry thousands separators (`1,073,741,824`) and scaled
units (`Mbyte`, `Gbyte`, `usecond`) unless `--print-units base` is given; unavailable
metrics read `n/a`. `==ERROR==` lines (a profiler that cannot read the counters) are
collected so the caller can say why nothing was measured.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_BYTES = re.compile(r"^(?P<prefix>[kmgt]i?)?b(yte)?s?$", re.IGNORECASE)
_GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


@dataclass(frozen=True)
class NcuLaunch:
    """One profiled kernel launch: its ids, name and metric values (bytes in bytes,
    percentages as printed: 0 to 100; None where ncu printed n/a)."""

    process: str
    id: str
    kernel: str
    metrics: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class NcuOutput:
    launches: tuple[NcuLaunch, ...]
    errors: tuple[str, ...]
    """`==ERROR==` lines, without the prefix."""


def parse_ncu_csv(text: str) -> NcuOutput:
    """Every launch of ncu's CSV `text`, in the order ncu printed them."""
    errors = tuple(line.split("==ERROR==", 1)[1].strip() for line in text.splitlines() if "==ERROR==" in line)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return NcuOutput((), errors)
    table = "\n".join(line for line in lines[start:] if line.startswith('"'))
    launches: dict[tuple[str, str], NcuLaunch] = {}
    for row in csv.DictReader(io.StringIO(table)):
        key = (row.get("Process ID", ""), row["ID"])
        launch = launches.setdefault(key, NcuLaunch(key[0], key[1], row.get("Kernel Name", "")))
        name = row.get("Metric Name", "")
        if name:
            launch.metrics[name] = metric_value(row.get("Metric Value", ""), row.get("Metric Unit", ""))
    return NcuOutput(tuple(launches.values()), errors)


def metric_value(value: str, unit: str) -> float | None:
    """`"1,073,741,824"` byte -> 1073741824.0; `"8.74"` Gbyte -> 8.74e9; `"n/a"` -> None."""
    text = value.strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    if _GROUPED.match(text):
        text = text.replace(",", "")
    try:
        number = float(text)
    except ValueError:
        return None
    match = _BYTES.match(unit.strip())
    if match:
        number *= _SCALE[(match.group("prefix") or "").lower()]
    return number
