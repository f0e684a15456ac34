"""The compile check of `apply`: rewritten headers through the units that include them, and
a rewrite compared with the original when the original does not compile."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kxform.build.compile_check import CompileChecker
from kxform.engine.driver import FileTransform
from kxform.engine.status import DOES_NOT_COMPILE, ORIGINAL_DOES_NOT_COMPILE, Status

from conftest import needs_nvcc
from swizzle_helpers import rewrite

KERNEL = """__global__ void {name}(float* out, int n{extra}) {{
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}}
"""
HOST_ERROR = "int host_side() { return removed_api_v1(); }\n"


def transform(path: Path, text: str) -> FileTransform:
    path.write_text(text)
    result = rewrite(text, path=str(path), pattern="grouped")
    assert result.changed
    return result


@pytest.fixture(scope="module")
def checker() -> CompileChecker:
    made = CompileChecker.create(None, "sm_90", 2)
    if made is None:
        pytest.skip("nvcc not found")
    return made


@needs_nvcc
def test_a_rewrite_may_add_no_error_to_an_original_that_does_not_compile(
    tmp_path: Path, checker: CompileChecker
) -> None:
    clean = transform(tmp_path / "a.cu", HOST_ERROR + KERNEL.format(name="k", extra=""))
    (record,) = checker.check_many([clean])
    assert record.ok and record.status is Status.UNCONFIRMED and record.key == ORIGINAL_DOES_NOT_COMPILE
    assert record.detail.startswith("unconfirmed: the original does not compile either")
    assert "removed_api_v1" in record.detail
    strict = replace(checker, strict=True)
    (record,) = strict.check_many([clean])
    assert not record.ok and record.status is Status.UNCONFIRMED and record.required
    # Planted: a parameter named uint2 shadows the type the prologue declares its variable with.
    broken = transform(tmp_path / "b.cu", HOST_ERROR + KERNEL.format(name="k", extra=", int uint2"))
    (record,) = checker.check_many([broken])
    assert record.status is Status.FAILED and record.key == DOES_NOT_COMPILE and not record.ok
    assert "the rewrite adds an error the original does not have" in record.detail
    assert "b.cu:" in record.detail


@needs_nvcc
def test_rewritten_headers_are_compiled_through_the_unit_that_includes_them(
    tmp_path: Path, checker: CompileChecker
) -> None:
    a = transform(tmp_path / "a.cuh", "#pragma once\n" + KERNEL.format(name="ka", extra=""))
    b = transform(tmp_path / "b.cuh", "#pragma once\n" + KERNEL.format(name="kb", extra=""))
    unit = tmp_path / "main.cu"
    unit.write_text('#include "a.cuh"\n#include "b.cuh"\nint main() { return 0; }\n')
    includers = {str(a.source.path): [str(unit)], str(b.source.path): [str(unit)]}
    includers = {str(Path(k).resolve()): v for k, v in includers.items()}
    originals = {str(unit.resolve()): unit.read_bytes()}
    records = checker.check_tree([a, b], includers, originals)
    assert all(r.ok and not r.detail.startswith("unconfirmed") for r in records), records
    assert all(f"through {unit}" in r.detail for r in records)
    # Planted: without its include guard the helper is defined twice in main.cu.
    unguarded = b"\n".join(
        line
        for line in b.new_data.split(b"\n")
        if not line.startswith((b"#if !defined(KXFORM", b"#define KXFORM", b"#endif"))
    )
    records = checker.check_tree([a, replace(b, new_data=unguarded)], includers, originals)
    assert not any(r.ok for r in records)
    assert "redefin" in records[1].detail or "already been defined" in records[1].detail, records[1].detail


@needs_nvcc
def test_an_nvcc_that_cannot_run_is_an_environment_error_not_an_unconfirmed_rewrite(tmp_path: Path) -> None:
    from conftest import run_cli

    path = tmp_path / "k.cu"
    path.write_text(
        HOST_ERROR
        + KERNEL.format(name="k", extra="")
        + "void go(float* o, int n) { k<<<dim3(4, 4), dim3(16, 16)>>>(o, n); }\n"
    )
    before = path.read_bytes()
    done = run_cli(
        "apply",
        "--pass",
        "swizzle{pattern=column}",
        "--verify",
        "compile",
        "k.cu",
        cwd=tmp_path,
        env={"TMPDIR": str(tmp_path / "missing"), "KXFORM_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 2, done.stderr  # the original fails as well: nvcc itself is probed, and fails
    assert "nvcc does not build even an empty kernel here" in done.stderr and "unconfirmed" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and path.read_bytes() == before
