"""tools/infer_rate.py groups one cause over many kernels into one row and finds every
kernel of a file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("infer_rate", ROOT / "tools" / "infer_rate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["infer_rate"] = module
    spec.loader.exec_module(module)
    return module


def test_one_cause_over_two_kernels_is_one_group_and_other_causes_stay_apart() -> None:
    tool = _tool()
    a = tool.Outcome(
        Path("a.cu"),
        "twice",
        "fill-in",
        "no launch of twice in /tmp/x1/src/a.cu: write it in terms of the size variables",
    )
    b = tool.Outcome(
        Path("b.cu"),
        "rows",
        "fill-in",
        "no launch of rows in /tmp/x2/src/b.cu: write it in terms of the size variables",
    )
    c = tool.Outcome(Path("c.cu"), "k", "fill-in", "extents touched (3150, 3096 elements) match no product")
    assert tool.reason_group(a) == tool.reason_group(b)
    assert tool.reason_group(a) != tool.reason_group(c)
    assert tool.reason_group(c).startswith("fill-in: extents touched (N, N elements)")


def test_every_kernel_of_a_file_is_listed_once() -> None:
    tool = _tool()
    kernels = tool.kernels_of(ROOT / "corpora" / "naive" / "mm2" / "naive.cu")
    assert kernels == ["mm2_kernel1", "mm2_kernel2"]
