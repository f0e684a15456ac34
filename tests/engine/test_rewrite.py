"""Rewrite primitives (kxform.engine.rewrite): each change lands where it must and every
other byte of the file is kept (byte-minimal); what cannot be done in place is refused."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import pytest

from kxform.analysis import analyse_function
from kxform.engine.edits import apply_edits
from kxform.engine.rewrite import (
    Helper,
    RewriteRefused,
    add_template_params,
    insert_at_entry,
    instantiate,
    place_helpers,
    replace_loop,
    set_unroll,
)
from conftest import NVCC, needs_nvcc
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import validate_bytes

SRC = """#include <cuda_runtime.h>
namespace ops {
__global__ void scale(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 2
    for (int k = 0; k < 4; ++k)
        a[i * 4 + k] *= 2.0f;
    for (int k = 0; k < n; ++k) a[k] += 1.0f;
}
}
template <typename T>
__global__ void copy(T* out, const T* __restrict__ in, int n) { out[threadIdx.x] = in[threadIdx.x]; }
"""


def model_of(text: str) -> SourceModel:
    return parse_model(validate_bytes("k.cu", text.encode()))


def changed_lines(before: str, after: str) -> list[str]:
    """Removed lines then added ones, each in file order."""
    diff = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    return [line for line in diff if line[0] == "-"] + [line for line in diff if line[0] == "+"]


def rewritten(model: SourceModel, *edits) -> str:  # type: ignore[no-untyped-def]
    return apply_edits(model.source, edits).data.decode()


def test_insert_at_entry_adds_indented_lines_and_nothing_else() -> None:
    model = model_of(SRC)
    scale = model.functions_named("scale")[0]
    after = rewritten(model, insert_at_entry(model, scale, ["const int lane = threadIdx.x & 31;"], "t"))
    assert changed_lines(SRC, after) == ["+     const int lane = threadIdx.x & 31;"]
    crlf = model_of(SRC.replace("\n", "\r\n"))
    after = rewritten(crlf, insert_at_entry(crlf, crlf.functions_named("scale")[0], ["int x = 0;"], "t"))
    assert "{\r\n    int x = 0;\r\n" in after and "\n" not in after.replace("\r\n", "")


def test_helpers_are_placed_once_at_file_scope_outside_the_namespace() -> None:
    model = model_of(SRC)
    scale, copy = model.functions_named("scale")[0], model.functions_named("copy")[0]
    helper = Helper("kx_twice", "static __device__ float kx_twice(float x) { return 2 * x; }\n")
    edits = place_helpers(model, [(helper, copy.span.start), (helper, scale.span.start)], "t")
    assert len(edits) == 1
    after = rewritten(model, *edits)
    assert after.index("#if !defined(KX_TWICE_DEFINED)") < after.index("namespace ops")
    assert changed_lines(SRC, after) == [
        "+ #if !defined(KX_TWICE_DEFINED) && (defined(__CUDACC__) || defined(__HIPCC__))",
        "+ #define KX_TWICE_DEFINED",
        "+ static __device__ float kx_twice(float x) { return 2 * x; }",
        "+ #endif",
        "+ ",
    ]
    assert place_helpers(model_of(after), [(helper, 0)], "t") == []  # already there: nothing added


def test_template_parameters_get_defaults_and_an_explicit_instantiation() -> None:
    model = model_of(SRC)
    scale, copy = model.functions_named("scale")[0], model.functions_named("copy")[0]
    after = rewritten(
        model,
        add_template_params(model, scale, ["int UNROLL = 4"], "t"),
        add_template_params(model, copy, ["int VEC = 1"], "t"),
        instantiate(model, copy, ["float", "4"], "t", added=["int VEC = 1"]),
    )
    assert changed_lines(SRC, after) == [
        "- template <typename T>",
        "+ template <int UNROLL = 4>",
        "+ template <typename T, int VEC = 1>",
        "+ template __global__ void copy<float, 4>(float*, const float* __restrict__, int);",
    ]
    with pytest.raises(RewriteRefused, match="needs a default"):
        add_template_params(model, scale, ["int UNROLL"], "t")
    with pytest.raises(RewriteRefused, match="not a template"):
        instantiate(model, scale, ["4"], "t")
    with pytest.raises(RewriteRefused, match="takes 2 template argument"):
        instantiate(model_of(after), model_of(after).functions_named("copy")[0], ["float", "4", "1"], "t")


@needs_nvcc
def test_added_template_parameters_and_their_instantiation_compile(tmp_path: Path) -> None:
    model = model_of(SRC)
    copy = model.functions_named("copy")[0]
    after = rewritten(
        model,
        add_template_params(model, copy, ["int VEC = 1"], "t"),
        instantiate(model, copy, ["float", "4"], "t", added=["int VEC = 1"]),
    )
    source = tmp_path / "k.cu"
    source.write_text(after)
    done = subprocess.run(
        [str(NVCC), "-c", "-arch=sm_90", str(source), "-o", str(tmp_path / "k.o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    symbols = (tmp_path / "k.o").read_bytes()
    assert b"copyIfLi4E" in symbols  # the instantiation at <float, 4> was emitted


def test_loops_are_replaced_and_their_unroll_pragma_set_by_their_node() -> None:
    model = model_of(SRC)
    first, second = analyse_function(model, model.functions_named("scale")[0]).loops
    assert first.pragma == "2" and second.pragma is None
    after = rewritten(model, set_unroll(model, first, "4", "t"))
    assert changed_lines(SRC, after) == ["- #pragma unroll 2", "+ #pragma unroll 4"]
    after = rewritten(model, set_unroll(model, first, None, "t"))
    assert changed_lines(SRC, after) == ["- #pragma unroll 2"]
    text = "for (int k = 0; k < 4; ++k) a[i * 4 + k] = 0.0f;"
    after = rewritten(model, replace_loop(model, first, text, "t", with_pragma=True))
    assert changed_lines(SRC, after) == [
        "- #pragma unroll 2",
        "-     for (int k = 0; k < 4; ++k)",
        "-         a[i * 4 + k] *= 2.0f;",
        "+     " + text,
    ]
    with pytest.raises(RewriteRefused, match="no #pragma unroll to remove"):
        set_unroll(model, second, None, "t")
    after = rewritten(model, set_unroll(model, second, "", "t"))
    assert changed_lines(SRC, after) == ["+     #pragma unroll"]


def test_a_pragma_is_refused_before_a_loop_that_shares_its_line() -> None:
    text = "__global__ void k(float* a) { for (int i = 0; i < 4; ++i) a[i] = 0.0f; }\n"
    model = model_of(text)
    (loop,) = analyse_function(model, model.kernels[0]).loops
    with pytest.raises(RewriteRefused, match="does not start its line"):
        set_unroll(model, loop, "2", "t")
