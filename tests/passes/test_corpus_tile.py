"""The tile pass over the corpus: every manifest expectation (lifts, already parameters,
refused with its reason) holds, the lift at the original values only adds guards, and
reviewed golden outputs match byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.api import explain
from kxform.engine.pass_api import Outcome
from kxform.errors import InputError
from swizzle_helpers import outcomes, rewrite

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GOLDEN = Path(__file__).parents[1] / "golden"
MANIFEST = tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]


@pytest.mark.slow
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"])
def test_manifest_tile_expectation(entry: dict) -> None:
    path = CORPORA / entry["path"]
    kernel = entry["kernel"].split("<")[0]
    if entry["tile"] == "input-error":  # the kernel's own definition does not parse: refused, said so
        result = rewrite(path.read_bytes(), "tile", path=str(path))
        assert outcomes(result)[kernel] is Outcome.MISSED and not result.changed
        assert "SyntaxError" in {r.name for r in result.remarks}
        with pytest.raises(InputError, match="syntax error"):  # the tuner API names it as an input error
            explain(path.read_bytes(), kernel, path=str(path))
        return
    info = explain(path.read_bytes(), kernel, path=str(path))
    if entry["tile"] == "refused":
        assert info["status"] == "refused"
        assert info["reasons"][0].startswith(entry["tile_reason"] + ":"), info["reasons"]
        return
    assert info["status"] == ("liftable" if entry["tile"] == "lifts" else "lifted"), info
    assert info["params"] and info["constraints"]
    result = rewrite(path.read_bytes(), "tile", path=str(path), kernels=(kernel,))
    if entry["tile"] == "parameters":
        assert not result.changed and outcomes(result)[kernel] is Outcome.UNCHANGED
        return
    assert outcomes(result)[kernel] is Outcome.APPLIED
    added = [
        line
        for line in result.diff().splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert added and all(line.startswith(("+#ifndef ", "+#endif")) for line in added), added
    assert not rewrite(result.new_data, "tile", path=str(path), kernels=(kernel,)).changed


GOLDEN_CASES = {
    "sgemm_tiled.tile32-swizzle.cu": ("sgemm_tiled/sgemm_tiled.cu", "tile{TILE=32},swizzle{pattern=grouped}"),
    "transpose.tile.cu": ("transpose/transpose.cu", "tile"),
    "stencil5.tile64x4.cu": ("stencil5/stencil5.cu", "tile{BX=64,BY=4}"),
}


@pytest.mark.slow
@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_tile_rewrite(golden: str) -> None:
    rel, spec = GOLDEN_CASES[golden]
    path = CORPORA / rel
    result = rewrite(path.read_bytes(), spec, path=str(path))
    expected = GOLDEN / golden
    if not expected.exists():  # first run on a new case: write it for review, and fail
        expected.write_bytes(result.new_data)
        pytest.fail(f"golden file {expected} written; review it and commit it")
    assert result.new_data == expected.read_bytes()


@needs_nvcc
@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_tile_rewrites_compile(golden: str, tmp_path: Path) -> None:
    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob

    rel, _ = GOLDEN_CASES[golden]
    job = BuildJob(
        source=(GOLDEN / golden).read_text(),
        filename=golden,
        output="check",
        arch="sm_90",
        source_dir=str((CORPORA / rel).parent),
    )
    result = Builder(cache_dir=tmp_path).build(job)
    assert result.ok, result.log
