"""The swizzle pass over the corpus: every manifest expectation holds, and the rewrites of
a few representative files match reviewed golden outputs byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.engine.pass_api import Outcome
from swizzle_helpers import outcomes, remark_names, rewrite

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GOLDEN = Path(__file__).parents[1] / "golden"
MANIFEST = tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]
REASON_KEYS = {"spin-wait": "SpinWait", "grid-sync": "GridSync"}


def entry_id(entry: dict) -> str:
    return entry["name"]


@pytest.mark.parametrize("entry", MANIFEST, ids=entry_id)
def test_manifest_expectation(entry: dict) -> None:
    path = CORPORA / entry["path"]
    kernel = entry["kernel"].split("<")[0]
    if entry["swizzle"] == "input-error":  # the kernel's own definition does not parse: refused, said so
        result = rewrite(path.read_bytes(), path=str(path))
        assert outcomes(result)[kernel] is Outcome.MISSED and not result.changed
        assert "SyntaxError" in {r.name for r in result.remarks}
        return
    # An explicit pattern that takes 1-D and 2-D grids: this checks whether the pass can
    # apply, not which order the locality model would choose (tests/test_locality_model.py).
    result = rewrite(path.read_bytes(), path=str(path), hw="mi300x", kernels=(kernel,), semantic=True, pattern="xcd")
    if entry["swizzle"] == "applies":
        assert outcomes(result)[kernel] is Outcome.APPLIED, [r.format() for r in result.remarks]
        again = rewrite(result.new_data, path=str(path), hw="mi300x", kernels=(kernel,), pattern="xcd")
        assert not again.changed
    else:
        assert outcomes(result)[kernel] is Outcome.MISSED
        assert REASON_KEYS[entry["reason"]] in remark_names(result)
        assert not result.changed


GOLDEN_CASES = {
    "sgemm_tiled.grouped.cu": ("sgemm_tiled/sgemm_tiled.cu", {"pattern": "grouped"}),
    "box_blur.grouped-x4.cu": ("device_helper_blur/box_blur.cu", {"pattern": "grouped", "group": "4", "along": "x"}),
    "pairwise_dist.xcd-grouped.cu": (
        "macro_index_sqdist/pairwise_dist.cu",
        {"pattern": "xcd-grouped", "group": "4", "hw": "mi300x"},
    ),
    "batched_scores.column.cu": ("batched_scores_3d/batched_scores.cu", {"pattern": "column"}),
    "sgemm_naive.diagonal.hip": ("hip_sgemm/sgemm_naive.hip", {"pattern": "diagonal"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_rewrite(golden: str) -> None:
    rel, options = GOLDEN_CASES[golden]
    path = CORPORA / rel
    result = rewrite(path.read_bytes(), path=str(path), **options)
    expected = GOLDEN / golden
    if not expected.exists():  # first run on a new case: write it for review, and fail
        expected.write_bytes(result.new_data)
        pytest.fail(f"golden file {expected} written; review it and commit it")
    assert result.new_data == expected.read_bytes()


@needs_nvcc
@pytest.mark.parametrize("golden", sorted(g for g in GOLDEN_CASES if g.endswith(".cu")))
def test_golden_rewrites_compile(golden: str, tmp_path: Path) -> None:
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
