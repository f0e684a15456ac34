"""The swizzle pass on small sources: what it rewrites, what it refuses and why."""

from __future__ import annotations

import pytest

from kxform.errors import UsageError
from kxform.engine.pass_api import Outcome
from swizzle_helpers import outcomes, remark_names, rewrite

GEMM = """#define TILE 16
__device__ int col_of(int t) { return blockIdx.x * TILE + t; }
__global__ void gemm(float* c, int n) {
    int row = blockIdx.y * TILE + threadIdx.y;
    c[row * n + col_of(threadIdx.x)] = gridDim.x;
}
"""


def test_applies_with_helper_prologue_and_passed_down_index() -> None:
    result = rewrite(GEMM)
    out = result.new_data.decode()
    assert outcomes(result) == {"gemm": Outcome.APPLIED}
    assert "static __device__ __forceinline__ uint2 kxform_swizzle_grouped_alongy_group8(" in out
    assert (
        "    const uint2 kxform_block = kxform_swizzle_grouped_alongy_group8(blockIdx.x, blockIdx.y, "
        "gridDim.x, gridDim.y);\n" in out
    )
    assert "__device__ int col_of(const uint2 kxform_block, int t) { return kxform_block.x * TILE + t; }" in out
    assert "int row = kxform_block.y * TILE + threadIdx.y;" in out
    assert "col_of(kxform_block, threadIdx.x)" in out
    assert "= gridDim.x;" in out  # gridDim is never remapped
    assert out.index("kxform_swizzle_grouped") < out.index("__device__ int col_of")
    checks = {c.name: c.ok for c in result.results[0].checks}
    assert checks == {"bijection": True, "proof": True, "reparse": True, "coverage": True, "idempotence": True}
    (passed,) = [r for r in result.remarks if r.kind.value == "Passed"]
    assert "requested by the user" in passed.message and passed.line == 3


def test_second_run_changes_nothing() -> None:
    once = rewrite(GEMM)
    twice = rewrite(once.new_data)
    assert not twice.changed
    assert outcomes(twice) == {"gemm": Outcome.UNCHANGED}


def test_every_byte_outside_the_edits_is_kept_crlf_tabs_unicode_and_if_blocks() -> None:
    src = (
        "// naïve kernel — ünïcode\r\n#if defined(USE_IT)\r\n__global__ void k(float* o) {\r\n"
        "\tint x = blockIdx.x;\r\n\tint y = blockIdx.y;  /* ÿ */\r\n\to[y * 7 + x] = 1.f;\r\n}\r\n#endif\r\n"
    )
    out = rewrite(src).new_data.decode()
    assert "\r\n\tconst uint2 kxform_block = " in out
    assert "\tint x = kxform_block.x;\r\n\tint y = kxform_block.y;  /* ÿ */\r\n" in out
    # The helper goes before the user's #if block (never inside it), in its own guard.
    assert out.startswith("// naïve kernel — ünïcode\r\n#if !defined(KXFORM_SWIZZLE_GROUPED_ALONGY_GROUP8_DEFINED)")
    assert "}\r\n#endif\r\n\r\n#if defined(USE_IT)\r\n__global__ void k(float* o) {\r\n" in out
    assert out.endswith("}\r\n#endif\r\n")
    assert "\n" not in out.replace("\r\n", "")  # no bare LF introduced


def test_macro_holding_the_index_is_rewritten_when_only_swizzled_kernels_use_it() -> None:
    src = "#define ROW (blockIdx.y * 16 + threadIdx.y)\n__global__ void k(float* o) { o[ROW * 3 + blockIdx.x] = 0; }\n"
    out = rewrite(src).new_data.decode()
    assert "#define ROW (kxform_block.y * 16 + threadIdx.y)" in out


def test_macro_shared_with_host_code_is_refused() -> None:
    src = (
        "#define ROW (blockIdx.y * 16)\n__global__ void k(float* o) { o[ROW + blockIdx.x] = 0; }\n"
        "__global__ void other(float* o) { o[ROW] = 1; }\n"
    )
    result = rewrite(src, kernels=("k",))
    assert outcomes(result)["k"] is Outcome.MISSED
    assert "SharedMacro" in remark_names(result)
    assert not result.changed


def test_device_function_shared_with_an_unswizzled_kernel_is_refused() -> None:
    src = (
        "__device__ int bx() { return blockIdx.x; }\n"
        "__global__ void a(int* o) { o[bx() + blockIdx.y] = 0; }\n"
        "__global__ void b(int* o) { o[bx()] = 0; }\n"
    )
    result = rewrite(src, kernels=("a",))
    assert outcomes(result)["a"] is Outcome.MISSED
    assert any("also called from 'b'" in r.message for r in result.remarks)
    both = rewrite(src, pattern="xcd")  # both kernels rewritten: the helper is shared safely
    assert outcomes(both) == {"a": Outcome.APPLIED, "b": Outcome.APPLIED}
    assert both.new_data.decode().count("int bx(const uint2 kxform_block)") == 1


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("if (blockIdx.x > 0) while (atomicAdd(&flags[blockIdx.x - 1], 0) == 0) {}", "SpinWait"),
        ("if (blockIdx.x > 0) while (vflags[blockIdx.x - 1] == 0) ;", "SpinWait"),
        ("cg::this_grid().sync(); flags[blockIdx.x] = 1;", "GridSync"),
        ('unsigned c; asm("mov.u32 %0, %%ctaid.x;" : "=r"(c)); flags[c + blockIdx.x] = 1;', "InlinePtxCtaid"),
        ("dim3 b = blockIdx; flags[b.x] = 1;", "WholeIndexUse"),
        ("flags[threadIdx.x] = 1;", "NoBlockIndexRead"),
    ],
)
def test_order_dependent_kernels_are_refused_with_the_reason(body: str, key: str) -> None:
    src = f"__global__ void k(int* flags, volatile int* vflags) {{ {body} }}\n"
    result = rewrite(src, pattern="column")
    assert outcomes(result) == {"k": Outcome.MISSED}
    assert key in remark_names(result)
    assert not result.changed


def test_cas_retry_loop_is_not_a_spin_wait() -> None:
    src = (
        "__device__ float amax(float* a, float v) { int* p = (int*)a; int old = *p, assumed;\n"
        "  do { assumed = old; old = atomicCAS(p, assumed, __float_as_int(fmaxf(v, __int_as_float(assumed)))); }\n"
        "  while (assumed != old); return __int_as_float(old); }\n"
        "__global__ void k(float* m, float* x) { amax(m, x[blockIdx.y * gridDim.x + blockIdx.x]); }\n"
    )
    assert outcomes(rewrite(src)) == {"k": Outcome.APPLIED}


def test_z_is_left_alone_and_hip_spelling_is_kept() -> None:
    src = (
        "__global__ void k(float* o) {\n  o[(hipBlockIdx_z * hipGridDim_y + hipBlockIdx_y) * hipGridDim_x"
        " + hipBlockIdx_x] = 0;\n}\n"
    )
    out = rewrite(src, pattern="column").new_data.decode()
    assert "kxform_swizzle_column(hipBlockIdx_x, hipBlockIdx_y, hipGridDim_x, hipGridDim_y)" in out
    assert "o[(hipBlockIdx_z * hipGridDim_y + kxform_block.y) * hipGridDim_x + kxform_block.x]" in out


def test_one_dimensional_kernels_get_only_one_dimensional_patterns() -> None:
    src = "__global__ void k(float* o, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = 0; }\n"
    assert "NoProfitablePattern" in remark_names(rewrite(src, pattern=None))  # monolithic L2: nothing proposed
    assert "PatternNeeds2DGrid" in remark_names(rewrite(src, pattern="grouped"))
    chiplet = rewrite(src, hw="mi300x", pattern="xcd")
    assert outcomes(chiplet) == {"k": Outcome.APPLIED}
    assert "kxform_swizzle_xcd_xcds8(" in chiplet.new_data.decode()


@pytest.mark.parametrize("hw", ["h100", "mi300x"])
def test_without_evidence_the_default_leaves_a_kernel_alone_and_says_why(hw: str) -> None:
    """No spec and no file to draft one from: the model cannot judge, so no rule writes a remap."""
    result = rewrite(GEMM, hw=hw, pattern=None)
    assert not result.changed and outcomes(result) == {"gemm": Outcome.MISSED}
    (missed,) = [r for r in result.remarks if r.name == "NotModelled"]
    assert "no evidence that a remap helps" in missed.message and "the source is not a file" in missed.message


def test_template_kernel_helper_goes_before_the_template_line() -> None:
    src = "template <int T>\n__global__ void k(float* o) { o[blockIdx.y * T + blockIdx.x] = 0; }\n"
    out = rewrite(src).new_data.decode()
    assert out.index("kxform_swizzle_") < out.index("template <int T>")


def test_kernel_filter_and_unknown_pattern() -> None:
    src = GEMM + "__global__ void other(float* o) { o[blockIdx.y] = 1; }\n"
    result = rewrite(src, kernels=("other",))
    assert outcomes(result) == {"gemm": Outcome.SKIPPED, "other": Outcome.APPLIED}
    with pytest.raises(UsageError, match="unknown swizzle pattern"):
        rewrite(GEMM, pattern="spiral")


def test_syntax_error_inside_a_kernel_is_a_missed_remark_outside_blocks_nothing() -> None:
    src = GEMM + "__global__ void broken(float* o) { o[blockIdx.y] = (1 + ; }\n"
    result = rewrite(src)
    assert outcomes(result) == {"gemm": Outcome.APPLIED, "broken": Outcome.MISSED}
    # Host code that does not parse (Windows-only declarations, say) blocks no kernel.
    host = "__declspec(dllexport) int __stdcall host_entry(HWND h) { return h ? 1 : ; }\n" + GEMM
    result = rewrite(host)
    assert outcomes(result) == {"gemm": Outcome.APPLIED}
    assert "HostSyntaxError" in remark_names(result)
    again = rewrite(result.new_data)
    assert not again.changed
    # A kernel that calls a device function that does not parse is refused.
    src = "__device__ int row() { return blockIdx.y * ; }\n__global__ void k(float* o) { o[row() + blockIdx.x] = 1; }\n"
    result = rewrite(src)
    assert outcomes(result) == {"k": Outcome.MISSED}
    assert any("'row', which it calls, does not parse" in r.message for r in result.remarks)


def test_macro_wrapped_attribute_defined_in_the_file_is_understood() -> None:
    src = "#define KERNEL __global__\nKERNEL void k(float* o) { o[blockIdx.y * 4 + blockIdx.x] = 0; }\n"
    result = rewrite(src)
    assert outcomes(result) == {"k": Outcome.MISSED}  # its definition does not parse: left alone, said so
    assert "SyntaxError" in remark_names(result)


def test_index_read_in_a_macro_from_another_header_is_refused(tmp_path) -> None:
    (tmp_path / "idx.cuh").write_text("#define TILE_ROW (blockIdx.y * 16)\n")
    src = '#include "idx.cuh"\n__global__ void k(float* o) { o[TILE_ROW + blockIdx.x] = 0; }\n'
    path = tmp_path / "k.cu"
    path.write_text(src)
    result = rewrite(src, path=str(path), semantic=True, pattern="grouped")
    assert outcomes(result) == {"k": Outcome.MISSED}
    assert "IndexReadInForeignMacro" in remark_names(result)


def test_device_function_in_another_header_reading_the_index_is_refused(tmp_path) -> None:
    (tmp_path / "util.cuh").write_text("__device__ inline int brow() { return blockIdx.y; }\n")
    src = '#include "util.cuh"\n__global__ void k(float* o) { o[brow() * 4 + blockIdx.x] = 0; }\n'
    path = tmp_path / "k.cu"
    path.write_text(src)
    result = rewrite(src, path=str(path), semantic=True, pattern="grouped")
    assert "IndexReadInOtherFile" in remark_names(result)


def test_unparsable_include_makes_semantics_conservative(tmp_path) -> None:
    src = '#include "missing_header.cuh"\n__global__ void k(float* o) { o[ext_row() + blockIdx.x] = 0; }\n'
    path = tmp_path / "k.cu"
    path.write_text(src)
    result = rewrite(src, path=str(path), semantic=True, pattern="grouped")
    assert outcomes(result) == {"k": Outcome.MISSED}
    (remark,) = [r for r in result.remarks if r.name == "SemanticUnavailable"]
    assert "missing_header.cuh" in remark.message and "ext_row" in remark.message


def test_compile_commands_give_libclang_the_include_paths(tmp_path) -> None:
    import json

    from kxform.engine.driver import transform_source
    from kxform.build.semantic import semantic_provider
    from kxform.hw import load_profile
    from kxform.engine.pass_api import RunOptions
    from kxform.engine.registry import default_registry
    from kxform.frontend.source import read_source

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "idx.cuh").write_text("#define TILE_ROW (blockIdx.y * 16)\n")
    (tmp_path / "src").mkdir()
    kernel = tmp_path / "src" / "k.cu"
    kernel.write_text('#include "idx.cuh"\n__global__ void k(float* o) { o[TILE_ROW + blockIdx.x] = 0; }\n')
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "compile_commands.json").write_text(
        json.dumps(
            [
                {
                    "directory": str(tmp_path / "build"),
                    "file": str(kernel),
                    "arguments": ["nvcc", "-I../include", "-DUSE_IT=1", "-c", str(kernel), "-o", "k.o"],
                }
            ]
        )
    )
    passes = default_registry().pipeline("swizzle")

    def run(build_dir: str | None) -> set[str]:
        result = transform_source(
            read_source(kernel),
            passes,
            load_profile("h100"),
            RunOptions(),
            semantic=semantic_provider(str(kernel), build_dir),
        )
        assert not result.changed
        return remark_names(result)

    assert "SemanticUnavailable" in run(None)  # header not found: refused, conservatively
    assert "IndexReadInForeignMacro" in run(str(tmp_path / "build"))  # found: the real reason


def test_coverage_check_catches_a_read_left_unmapped() -> None:
    from kxform.errors import CheckFailed
    from kxform.frontend.cuda import parse_model
    from kxform.engine.pass_api import Proposal
    from kxform.passes.swizzle import Swizzle
    from kxform.frontend.source import validate_bytes

    out = rewrite(GEMM).new_data.decode()
    proposal = Proposal("swizzle", "gemm", (("pattern", "grouped"),), "test")
    ok = Swizzle().check_result(parse_model(validate_bytes("k.cu", out.encode())), [proposal])
    assert [r.name for r in ok] == ["coverage"]
    leaky = out.replace("int row = kxform_block.y", "int row = blockIdx.y")
    with pytest.raises(CheckFailed, match=r"coverage: 'gemm' still reads blockIdx.y at k.cu:\d+:\d+"):
        Swizzle().check_result(parse_model(validate_bytes("k.cu", leaky.encode())), [proposal])


def test_index_passed_to_a_macro_of_another_header_is_rewritten_at_the_call_site(tmp_path) -> None:
    (tmp_path / "at.cuh").write_text("#define AT(p, i) ((p)[(i)])\n")
    src = (
        '#include "at.cuh"\n__global__ void k(const int* col0, float* o, int n) {\n'
        "    int x = AT(col0, blockIdx.x) + threadIdx.x;\n    o[blockIdx.y * n + x] = 0;\n}\n"
    )
    path = tmp_path / "k.cu"
    path.write_text(src)
    result = rewrite(src, path=str(path), semantic=True, pattern="grouped")
    assert outcomes(result) == {"k": Outcome.APPLIED}, [r.format() for r in result.remarks]
    assert "AT(col0, kxform_block.x)" in result.new_data.decode()


def test_missing_header_refuses_only_the_kernels_that_use_it(tmp_path) -> None:
    src = (
        '#include "generated_config.h"\n'
        "__global__ void uses(float* o) { o[blockIdx.y * GEN_WIDTH + blockIdx.x] = 0; }\n"
        "__global__ void plain(float* o, int n) { o[blockIdx.y * n + blockIdx.x] = 0; }\n"
    )
    path = tmp_path / "k.cu"
    path.write_text(src)
    result = rewrite(src, path=str(path), semantic=True, pattern="grouped")
    assert outcomes(result) == {"uses": Outcome.MISSED, "plain": Outcome.APPLIED}
    (remark,) = [r for r in result.remarks if r.name == "SemanticUnavailable"]
    assert "generated_config.h" in remark.message and "GEN_WIDTH" in remark.message


def test_helper_is_placed_at_file_scope_whatever_encloses_the_first_kernel() -> None:
    body = "(float* o, int n) {{ o[blockIdx.y * n + blockIdx.x] = {v}; }}\n"
    src = (
        "#include <cuda_runtime.h>\nnamespace outer { namespace inner {\n"
        f"__global__ void first{body.format(v=1)}}} }}\n"
        f'extern "C" {{\n__global__ void second{body.format(v=2)}}}\n'
        f"#ifdef USE_THIRD\n__global__ void third{body.format(v=3)}#endif\n"
    )
    out = rewrite(src).new_data.decode()
    helper = out.index("#if !defined(KXFORM_SWIZZLE_GROUPED_ALONGY_GROUP8_DEFINED)")
    assert helper < out.index("namespace outer") and out.count("static __device__") == 1
    guarded = "#ifndef K_H\n#define K_H\n#include <cuda_runtime.h>\n" + src.split("\n", 1)[1] + "#endif\n"
    out = rewrite(guarded).new_data.decode()  # a file-wide include guard is not a conditional block
    assert out.index("#include <cuda_runtime.h>") < out.index("KXFORM_SWIZZLE_GROUPED") < out.index("namespace")


def test_a_header_takes_the_compile_database_flags_of_the_file_that_includes_it(tmp_path) -> None:
    import json

    from kxform.engine.driver import transform_source
    from kxform.engine.registry import default_registry
    from kxform.build.semantic import semantic_provider
    from kxform.frontend.source import read_source
    from kxform.engine.pass_api import RunOptions
    from kxform.hw import load_profile

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "idx.cuh").write_text("#define TILE_ROW (blockIdx.y * 16)\n")
    (tmp_path / "src").mkdir()
    header = tmp_path / "src" / "kern.cuh"
    header.write_text('#include "idx.cuh"\n__global__ void k(float* o) { o[TILE_ROW + blockIdx.x] = 0; }\n')
    unit = tmp_path / "src" / "main.cu"
    unit.write_text('#include "kern.cuh"\n')
    (tmp_path / "compile_commands.json").write_text(
        json.dumps(
            [{"directory": str(tmp_path), "file": str(unit), "arguments": ["nvcc", "-Iinclude", "-c", str(unit)]}]
        )
    )
    passes = default_registry().pipeline("swizzle")

    def names(includer: str | None) -> set[str]:
        provider = semantic_provider(str(header), str(tmp_path), includer)
        result = transform_source(read_source(header), passes, load_profile("h100"), RunOptions(), semantic=provider)
        return remark_names(result)

    assert "SemanticUnavailable" in names(None)  # no entry of its own: idx.cuh is not found
    assert "IndexReadInForeignMacro" in names(str(unit))  # the includer's -I finds it: the real reason


@pytest.mark.parametrize("pattern", ["hilbert", "morton"])
def test_a_pattern_without_a_proof_is_refused(pattern: str) -> None:
    """The curves' loops are outside the formula language the solver proves: their
    helpers pass the compiled enumeration, but an unproven remap is never written."""
    src = "__global__ void k(float* o) { o[blockIdx.y * gridDim.x + blockIdx.x] = 0; }\n"
    result = rewrite(src, pattern=pattern)
    assert not result.changed and outcomes(result) == {"k": Outcome.FAILED}
    (failed,) = result.results
    assert failed.stage == "check" and "proof: no proof" in failed.reasons[0]
