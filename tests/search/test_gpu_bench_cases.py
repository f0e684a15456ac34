"""The GPU tuning benchmark's cases (kxform/bench/tune_cases.py) against the corpus, and the
yardstick script's input checks. No GPU: what runs on the device is only reached here
through what must hold before a device call is spent on it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import CORPORA, ROOT

sys.path.insert(0, str(ROOT / "tools"))

from kxform.bench.tune_cases import CASES, Case

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def manifest() -> list[dict]:
    return tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]


def test_every_kernel_the_tile_pass_lifts_has_a_tile_case() -> None:
    lifted = {(e["path"], e["kernel"]) for e in manifest() if e.get("tile") in ("lifts", "parameters")}
    cased = {(f"{c.folder}/{c.file}", c.kernel) for c in CASES if c.passes == ("tile",)}
    assert lifted == cased


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_case_resolves_its_sizes_and_yardstick(case: Case) -> None:
    from kxform.expr import parse_expr
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.search.kernel_objective import timing_size

    assert case.path.is_file()
    spec = load_spec(find_spec_for(str(case.path))).kernel(case.kernel)
    for text in (case.size, case.quick_size):
        size = timing_size(spec, text)
        launch = spec.launch(size)
        assert launch.total_bytes > 0
        if case.reference is not None and case.reference.kind == "gemm":
            dims = [
                parse_expr(t).evaluate_int(size.values)
                for t in (case.reference.batch, case.reference.m, case.reference.n, case.reference.k)
            ]
            assert min(dims) >= 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gemm", "1,2,3"], "expected four positive integers"),
        (["--gemm", "1,x,3,4"], "expected four integers"),
        (["--repeat", "0"], "--repeat must be at least 1"),
    ],
)
def test_gpu_baselines_refuses_bad_shapes_with_one_line(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_baselines.py"), *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""
