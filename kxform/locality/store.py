"""On-disk cache of the model's two expensive products: footprints and per-order stats.

Footprints (the traced representatives and their shifts) are keyed by everything the
traces depend on: the kernel's source, the spec file's text, the kernel and the size.
Per-order statistics add the machine, the buffer layout and the dispatch order itself.
Both live under `$KXFORM_CACHE_DIR/locality` (kxform.cache.cache_root); writes are
atomic renames, so concurrent runs can share the directory. A second ranking of the
same kernel (other candidates, another profile with the same occupancy) then only
simulates what it has not seen.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np

from kxform.cache import cache_root, content_key
from kxform.fileio import write_atomic
from kxform.locality.footprint import Footprints
from kxform.locality.simulate import Estimate, OrderStats
from kxform.locality.trace import BlockSectors

STORE_VERSION = "locality-store-1"


def _dir() -> Path:
    return cache_root() / "locality"


def key(*parts: str) -> str:
    return content_key(STORE_VERSION, *parts)


def _atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


def save_footprints(name: str, fp: Footprints) -> None:
    arrays: dict[str, np.ndarray] = {"shifts": fp.shifts}
    reps = []
    for i, (cls, rep) in enumerate(sorted(fp.reps.items())):
        reps.append({"class": list(cls), "block": list(rep.block), "streams": len(rep.streams())})
        for s, arr in enumerate(rep.streams()):
            arrays[f"r{i}_{s}"] = arr
    meta = {"grid": list(fp.grid), "exact": fp.exact, "traced": fp.traced, "verified": fp.verified, "reps": reps}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    # Sector streams are sorted integers: compressed they take a fraction of the space
    # (a large GEMM's footprints shrink several-fold), and np.load reads either form.
    np.savez_compressed(buf, **arrays)
    _atomic(_dir() / f"fp-{name}.npz", buf.getvalue())


def load_footprints(name: str) -> Footprints | None:
    path = _dir() / f"fp-{name}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            reps = {}
            for i, rep in enumerate(meta["reps"]):
                streams = [data[f"r{i}_{s}"] for s in range(rep["streams"])]
                half = len(streams) // 2
                block = tuple(rep["block"])
                reps[tuple(rep["class"])] = BlockSectors(block, tuple(streams[:half]), tuple(streams[half:]))
            return Footprints(
                tuple(meta["grid"]), reps, data["shifts"], meta["exact"], meta["traced"], meta["verified"]
            )
    except (OSError, ValueError, KeyError):
        return None


def save_stats(name: str, stats: OrderStats) -> None:
    _atomic(_dir() / f"st-{name}.json", json.dumps(dataclasses.asdict(stats)).encode())


def load_stats(name: str) -> OrderStats | None:
    path = _dir() / f"st-{name}.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        for field in ("dram_read_bytes", "dram_write_bytes", "hit_rate"):
            data[field] = Estimate(**data[field])
        return OrderStats(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
