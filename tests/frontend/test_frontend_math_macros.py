"""libclang sees the math-header macros nvcc sees (INFINITY, NAN, FLT_MAX, M_PI, INT_MAX),
so kernels using them parse cleanly and constants built from them evaluate."""

from __future__ import annotations

from pathlib import Path

from kxform.frontend.constants import evaluate_constants
from kxform.frontend.semantic import parse_translation_unit

SOURCE = b"""#include <float.h>
#define BIG ((int)(FLT_MAX > 1e30f))
#define PI_MILLI ((int)(M_PI * 1000))
#define HAS_INF ((int)(INFINITY > FLT_MAX))
#define NAN_UNEQUAL ((int)(NAN != NAN))
#define EPS_EXP ((int)(1.0f / FLT_EPSILON))
__global__ void k(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i < INT_MAX) y[i] = (y[i] > FLT_MAX ? INFINITY : NAN) + (float)M_PI + HUGE_VALF;
}
"""


def test_kernel_using_math_macros_parses_without_errors_or_missing_headers(tmp_path: Path) -> None:
    path = tmp_path / "m.cu"
    missing: list[str] = []
    tu, why = parse_translation_unit(str(path), SOURCE, [], missing)
    assert tu is not None, why
    assert [str(d) for d in tu.diagnostics] == []
    assert missing == []


def test_constants_over_math_macros_evaluate(tmp_path: Path) -> None:
    values = evaluate_constants(
        str(tmp_path / "m.cu"),
        SOURCE,
        ["BIG", "PI_MILLI", "HAS_INF", "NAN_UNEQUAL", "EPS_EXP", "INT_MAX", "FLT_DIG"],
        [],
    )
    assert values == {
        "BIG": 1,
        "PI_MILLI": 3141,
        "HAS_INF": 1,
        "NAN_UNEQUAL": 1,
        "EPS_EXP": 8388608,
        "INT_MAX": 2147483647,
        "FLT_DIG": 6,
    }


def test_an_undefined_macro_still_evaluates_to_unknown(tmp_path: Path) -> None:
    values = evaluate_constants(str(tmp_path / "m.cu"), SOURCE, ["NOT_A_MACRO_ANYWHERE"], [])
    assert values == {"NOT_A_MACRO_ANYWHERE": None}
