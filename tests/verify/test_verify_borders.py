"""An output the original leaves unwritten at fixed places (a stencil's border) is compared
as "unwritten in both": a correct rewrite verifies, and an element only one side writes
is a mismatch (the real CPU runtime, the corpus stencil with its border left alone)."""

from __future__ import annotations


import pytest

from conftest import CORPORA
from kxform.api import rewrite
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.spec import load_spec
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair

COPY_BORDER = b"        out[idx] = in[idx];\n        return;\n"
BORDER_LEFT = b"        return; /* the border: left unwritten */\n"


@pytest.fixture(scope="module")
def bordered() -> tuple[SourceText, SourceText]:
    """The stencil with its border left unwritten, and its column-order rewrite."""
    if not CpuRuntime().available()[0]:
        pytest.skip("no host C++ compiler for the CPU runtime")
    path = CORPORA / "stencil5" / "stencil5.cu"
    data = path.read_bytes()
    assert data.count(COPY_BORDER) == 1
    original = validate_bytes(str(path), data.replace(COPY_BORDER, BORDER_LEFT))
    swizzled = rewrite(original.data, "swizzle{pattern=column}", path=str(path)).new_data
    assert swizzled != original.data
    return original, validate_bytes(str(path), swizzled, rewritten=True)


def _verify(original: SourceText, new: SourceText):  # type: ignore[no-untyped-def]
    spec = load_spec(CORPORA / "stencil5" / "stencil5.kxspec.toml").kernel("jacobi5")
    return verify_pair(original, new, spec, CpuRuntime(), sizes=(spec.check_sizes[0].name,))


def test_a_correct_rewrite_of_a_bordered_stencil_verifies(bordered: tuple[SourceText, SourceText]) -> None:
    report = _verify(*bordered)
    assert report.status == "ok", report.summary() + " " + report.reason
    assert "unwritten in both" in report.sizes[0].summary()


@pytest.mark.parametrize(
    "plant, words",
    [
        (b"        out[idx] = 0.0f;\n        return;\n", "expected nan"),  # writes the border the original leaves
        (b"        return;\n    }\n    if (x == 1 && y == 1) {\n        return;\n", "elements never written"),
    ],
)
def test_an_element_written_by_one_side_only_is_a_mismatch(
    bordered: tuple[SourceText, SourceText], plant: bytes, words: str
) -> None:
    original, swizzled = bordered
    assert swizzled.data.count(BORDER_LEFT) == 1
    planted = validate_bytes(swizzled.path, swizzled.data.replace(BORDER_LEFT, plant), rewritten=True)
    report = _verify(original, planted)
    assert report.status == "mismatch" and words in report.sizes[0].summary(), report.sizes[0].summary()
