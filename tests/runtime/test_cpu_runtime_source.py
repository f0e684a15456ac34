"""Source pre-pass and unsupported-feature scan of the CPU runtime (no compiler needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.build.hip import is_hip
from kxform.runtime.cpu.source import (
    blank_comments_and_strings,
    find_unsupported,
    first_error,
    missing_gpu_header,
    rewrite_dynamic_shared,
)

INCLUDE = Path("/opt/kx/include")


def test_blanking_keeps_offsets_and_lines() -> None:
    text = 'a = "asm(x)"; // asm here\n/* wmma::\n */ b;'
    out = blank_comments_and_strings(text)
    assert len(out) == len(text)
    assert out.count("\n") == text.count("\n")
    assert "asm" not in out and "wmma" not in out
    assert out.startswith('a = "')
    assert out.rstrip().endswith("b;")


def test_blanking_handles_escapes_and_chars() -> None:
    out = blank_comments_and_strings('x = "a\\"asm"; c = \'"\'; asm;')  # C: x = "a\"asm"; c = '"'; asm;
    assert out.count("asm") == 1
    assert out.endswith("asm;")


@pytest.mark.parametrize(
    ("decl", "type_text", "name"),
    [
        ("extern __shared__ float smem[];", "float", "smem"),
        ("extern __shared__ __align__(16) unsigned char raw[];", "unsigned char", "raw"),
        ("extern volatile __shared__ int flags [ ] ;", "volatile int", "flags"),
        ("extern __shared__ T buf[];", "T", "buf"),
        ("extern __shared__ float4 v[] __attribute__((aligned(16)));", "float4", "v"),
    ],
)
def test_dynamic_shared_declarations_become_pointers(decl: str, type_text: str, name: str) -> None:
    out = rewrite_dynamic_shared(f"__global__ void k() {{\n  {decl}\n}}\n")
    expected = f"static thread_local {type_text}* const {name} = reinterpret_cast<{type_text}*>(::kxcpu::dyn_smem);"
    assert expected in out
    assert "extern" not in out


def test_dynamic_shared_rewrite_keeps_line_numbers() -> None:
    src = "// extern __shared__ float c[];\nextern __shared__\n  float s[];\nint after;\n"
    out = rewrite_dynamic_shared(src)
    assert out.count("\n") == src.count("\n")
    assert out.splitlines()[3] == "int after;"
    assert out.startswith("// extern __shared__ float c[];")  # comments are left alone


def test_unrecognised_dynamic_shared_is_left_for_the_scan() -> None:
    src = "extern __shared__ float a[], b[];"
    assert rewrite_dynamic_shared(src) == src


def test_hip_detection() -> None:
    assert is_hip("#include <hip/hip_runtime.h>\n")
    assert is_hip("int i = hipThreadIdx_x;")
    assert not is_hip("// see hip/hip_runtime.h\n#include <cuda_runtime.h>\n")


def _pre(*lines: str, file: str = "kernel.cu") -> str:
    return "\n".join(['# 1 "kernel.cpp"', f'# 1 "{file}" 1', *lines])


@pytest.mark.parametrize(
    ("line", "feature"),
    [
        ('asm volatile("bar.sync 1, 64;");', "inline assembly"),
        ('__asm__("trap;");', "inline assembly"),
        ("rocwmma::fragment<rocwmma::accumulator, 16, 16, 16, float> c;", "rocwmma"),
        ("__builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);", "MFMA"),
        ("float v = tex2D<float>(tex, x, y);", "texture"),
        ("cudaTextureObject_t t;", "texture"),
        ("surf2Dwrite(v, surf, x, y);", "surface"),
        ("cooperative_groups::this_grid().sync();", "grid-wide"),
        ("child<<<1, 32>>>(p);", "dynamic parallelism"),
        ("auto g = cg::coalesced_threads();", "coalesced"),
        ("__pipeline_arrive_on(&bar);", "asynchronous copies"),
        ("cooperative_groups::memcpy_async(block, d, s, 64);", "asynchronous copies"),
        ("extern static thread_local float a[], b[];", "extern __shared__"),
    ],
)
def test_scan_finds_unsupported_features(line: str, feature: str) -> None:
    finding = find_unsupported(_pre("int x;", line), INCLUDE)
    assert finding is not None
    assert feature in finding.feature
    assert (finding.file, finding.line) == ("kernel.cu", 2)


def test_scan_skips_system_and_emulation_headers() -> None:
    text = "\n".join(
        [
            '# 1 "/usr/include/x86_64-linux-gnu/sys/cdefs.h" 1 3 4',
            'extern int f() __asm__("g");',
            f'# 1 "{INCLUDE}/kxcpu/host/fiber.h" 1',
            'asm("nop");',
            '# 1 "kernel.cu" 2',
            'printf("asm");',
            "int asmx = 1; // a name containing asm",
        ]
    )
    assert find_unsupported(text, INCLUDE) is None


def test_scan_reports_user_headers_with_their_path() -> None:
    finding = find_unsupported(_pre("", "", 'asm("exit;");', file="/src/include/util.cuh"), INCLUDE)
    assert finding is not None and finding.file == "/src/include/util.cuh" and finding.line == 3


def test_missing_gpu_library_header_is_unsupported() -> None:
    err = "kernel.cu:3:10: fatal error: cub/cub.cuh: No such file or directory\n"
    finding = missing_gpu_header(err)
    assert finding is not None and "<cub/cub.cuh>" in finding.feature and finding.line == 3
    assert missing_gpu_header("kernel.cu:1:10: fatal error: my_helpers.h: No such file or directory") is None


def test_first_error_line() -> None:
    text = "kernel.cu: In function 'void k()':\nkernel.cu:4:3: error: 'x' was not declared\n  4 | x;\n"
    assert first_error(text) == "kernel.cu:4:3: error: 'x' was not declared"
    assert first_error("") == "the compiler failed without a message"


@pytest.mark.parametrize(
    "line", ["nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> c;", "wmma::mma_sync(c, a, b, c);"]
)
def test_wmma_is_not_refused_by_the_scan(line: str) -> None:
    """nvcuda::wmma is emulated (include/mma.h); unemulated fragment types stop the build instead."""
    assert find_unsupported(_pre("int x;", line), INCLUDE) is None
