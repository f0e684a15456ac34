"""The per-candidate resources build says why it failed with a reason key: a cause of the
machine (a header not found) is BuildEnvironment, an error in the code DoesNotCompile;
the tuner stops on the first and blames the configuration for the second, by the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import needs_nvcc
from kxform.build.diagnostics import environment_failure
from kxform.build.resources import check_resources
from kxform.build.toolchain import Toolchain
from kxform.engine.status import BUILD_ENVIRONMENT, DOES_NOT_COMPILE
from kxform.errors import CheckFailed
from kxform.hw import load_profile

KERNEL = "__global__ void k(float *out) {{ {body} }}\n"


def _key(tmp_path: Path, text: str) -> str:
    path = tmp_path / "k.cu"
    path.write_text(text)
    with pytest.raises(CheckFailed) as failed:
        check_resources(text, str(path), "k", ("32",), {}, load_profile("h100"), Toolchain.create(None))
    assert failed.value.check == "resources"
    return failed.value.key


@needs_nvcc
def test_a_missing_header_is_the_environment(tmp_path: Path) -> None:
    assert _key(tmp_path, '#include "gone_header.h"\n' + KERNEL.format(body="out[0] = 1.0f;")) == BUILD_ENVIRONMENT


@needs_nvcc
def test_an_error_in_the_code_is_the_configuration(tmp_path: Path) -> None:
    assert _key(tmp_path, KERNEL.format(body="out[0] = undeclared_name;")) == DOES_NOT_COMPILE


def test_the_classifier_reads_the_compilers_own_words() -> None:
    assert environment_failure("k.cu:1:10: fatal error: cub/cub.cuh: No such file or directory")
    assert environment_failure("nvcc fatal   : Could not open output file '/tmp/x.o'")
    assert not environment_failure('k.cu(3): error: identifier "undeclared_name" is undefined')


@needs_nvcc
def test_a_kernel_that_builds_reports_its_registers_and_threads_as_figures(tmp_path: Path) -> None:
    text = KERNEL.format(body="out[threadIdx.x] = 2.0f * out[threadIdx.x];")
    path = tmp_path / "k.cu"
    path.write_text(text)
    record = check_resources(text, str(path), "k", ("32",), {}, load_profile("h100"), Toolchain.create(None))
    registers = record.figure("registers")
    assert record.ok and isinstance(registers, int) and 1 <= registers <= 255
    assert record.figure("threads") == 32 and f"{registers} registers" in record.detail
