"""The launch pass over the corpus: which kernels' block sizes it lifts and why it refuses
the others (tools/corpus.py launch --verify prints the same table with every lift verified)."""

from __future__ import annotations

import sys

import pytest

from conftest import CORPORA
from kxform.api import explain
from kxform.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST = {e["name"]: e for e in tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]}
LIFTED = {
    "fused_bias_gelu": "a literal in a constant local (`const int threads = 256;`)",
    "layernorm": "a literal at the launch",
    "spmv_csr": "a literal at the launch",
    "black_scholes": "a literal at the launch",
    "fused_add_rmsnorm": "a cap: std::min((hidden_size + 31) / 32 * 32, 1024)",
    "silu_and_mul": "a cap: std::min(d, 1024)",
}
TILE_OWNED = (
    "sgemm_tiled",
    "sgemm_128",
    "softmax",
    "transpose",
    "fdtd2d_ey",
    "fdtd2d_ex",
    "fdtd2d_hz",
    "smith_waterman",
    "stencil5",
    "merge_attn_states",
    "gemm_bf16_wmma",
    "chained_scan",
    "grid_sync_jacobi",
    "device_helper_blur",
    "macro_index_sqdist",
    "batched_scores_3d",
    "hip_sgemm",
)
REFUSED = {
    **{name: "TileParameter" for name in TILE_OWNED},
    # the block size is the template argument its launcher passes, and host code reads it too
    "templated_matmul_f32": "HostUse",
    "templated_matmul_f64": "HostUse",
}


def _explain(name: str) -> dict:
    entry = MANIFEST[name]
    path = CORPORA / entry["path"]
    return explain(path.read_bytes(), entry["kernel"].split("<")[0], "launch", path=str(path))


def test_the_expectations_name_manifest_kernels() -> None:
    assert set(LIFTED) | set(REFUSED) | {"syntax_error"} <= set(MANIFEST)


@pytest.mark.parametrize("name", sorted(LIFTED))
def test_lifted(name: str) -> None:
    info = _explain(name)
    assert info["status"] == "liftable", info["reasons"]
    block = [p for p in info["params"] if not p["name"].endswith("_MIN_BLOCKS")]  # launch bounds it may add
    assert len(block) == 1 and block[0]["name"].endswith("_BLOCK_X")
    assert [p["name"] for p in info["params"] if p not in block] in (
        [],
        [block[0]["name"][: -len("BLOCK_X")] + "MIN_BLOCKS"],
    )


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_reason(name: str) -> None:
    info = _explain(name)
    assert info["status"] == "refused" and info["reasons"][0].startswith(REFUSED[name] + ":")


def test_a_file_that_does_not_parse_is_an_input_error() -> None:
    with pytest.raises(InputError, match="syntax error"):
        _explain("syntax_error")
