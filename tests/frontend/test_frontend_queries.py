"""Generic frontend queries (kxform.frontend.queries, .launches) and libclang's evaluation of
named constants (kxform.frontend.constants)."""

from __future__ import annotations

from kxform.build.toolchain import Toolchain
from kxform.frontend.constants import evaluate_constants, fold_constants
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.queries import (
    builtin_uses,
    constant_defs,
    int_literals,
    loops,
    name_uses,
    shared_decls,
    template_params,
    unroll_pragmas,
)
from kxform.frontend.source import validate_bytes

SRC = """#include "tiles.h"
#define TILE 16  // tile side
#define HALF (TILE / 2)
constexpr int THREADS = 128;
template <typename T, int BK = 8>
__global__ void k(T* o, int n) {
    __shared__ T s[TILE][TILE + 1], t[THREADS];
    extern __shared__ float dyn[];
    constexpr int local = 4;
#pragma unroll 4
    for (int j = threadIdx.y; j < TILE; j += blockDim.y) s[j][threadIdx.x] = o[j * n];
    for (int w = blockDim.x / 2; w > 0; w >>= 1) o[w] += 0x10;
}
void go(float* o, int n) {
    const int blocks = (n + THREADS - 1) / THREADS;
    dim3 block(TILE, TILE / 2);
    k<float, 8><<<blocks, block, HALF * 4>>>(o, n);
}
"""


def _model():  # type: ignore[no-untyped-def]
    return parse_model(validate_bytes("q.cu", SRC.encode()))


def test_shared_declarations_loops_builtins_literals_and_pragmas() -> None:
    model = _model()
    decls = {d.name: d for d in shared_decls(model)}
    assert decls["s"].extents == ("TILE", "TILE + 1") and decls["t"].extents == ("THREADS",)
    assert decls["dyn"].dynamic and not decls["s"].dynamic and decls["s"].function == "k"
    first, second = [lp for lp in loops(model) if lp.function == "k"]
    assert (first.var, first.init, first.op, first.bound, first.step) == ("j", "threadIdx.y", "<", "TILE", "blockDim.y")
    assert (second.init, second.step) == ("blockDim.x / 2", ">>1")
    assert {(u.builtin, u.axis) for u in builtin_uses(model)} == {
        ("threadIdx", "y"),
        ("threadIdx", "x"),
        ("blockDim", "y"),
        ("blockDim", "x"),
    }
    assert 16 in [lit.value for lit in int_literals(model)] and 0x10 in [lit.value for lit in int_literals(model)]
    (pragma,) = unroll_pragmas(model)
    assert pragma.factor == "4" and pragma.function == "k"
    kernel = next(f for f in model.kernels if f.name == "k")
    assert [(p.name, p.kind, p.default) for p in template_params(kernel)] == [("T", "type", None), ("BK", "value", "8")]


def test_named_constants_and_their_uses_with_operators() -> None:
    model = _model()
    defs = {d.name: d for d in constant_defs(model)}
    assert (defs["TILE"].kind, defs["TILE"].text) == ("macro", "16")  # the comment is not part of the value
    assert defs["THREADS"].kind == "constexpr" and defs["local"].function == "k"
    uses = [u for u in name_uses(model, {"TILE"}) if u.function == "go"]
    assert [(u.operator, u.other) for u in uses] == [("", ""), ("/", "2")]


def test_launch_configuration_through_dim3_and_constant_host_variables() -> None:
    (config,) = launch_configs(_model(), "k")
    assert config.site.template_args == "<float, 8>"
    assert config.grid == ("((n + THREADS - 1) / THREADS)",) and config.block == ("TILE", "TILE / 2")
    assert config.shared == "HALF * 4" and config.block_var is not None and config.block_var.name == "block"
    assert [v.name for v in config.variables] == ["blocks"]


def test_libclang_evaluates_macros_and_constexprs_through_includes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tiles.h").write_text("#define BASE 12\n")
    path = tmp_path / "q.cu"
    text = SRC.replace("#define TILE 16", "#define TILE (BASE + 4)")
    path.write_text(text)
    values = evaluate_constants(
        str(path), text.encode(), ["TILE", "HALF", "THREADS", "NOPE"], Toolchain().libclang_args(str(path))
    )
    assert values == {"TILE": 16, "HALF": 8, "THREADS": 128, "NOPE": None}
    assert fold_constants({"A": "16", "B": "(A / 2)", "C": "f(A)"}) == {"A": 16, "B": 8, "C": None}
