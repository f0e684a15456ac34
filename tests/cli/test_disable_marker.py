"""`// kxform: off` leaves a kernel alone: above its definition or inside its body, and
only that kernel."""

from __future__ import annotations

from swizzle_helpers import outcomes, rewrite

from kxform.engine.pass_api import Outcome

TILE = """__global__ void {name}(float* out, int n) {{{inside}
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}}
"""


def _kernel(name: str, above: str = "", inside: str = "") -> str:
    return above + TILE.format(name=name, inside=inside)


def test_marker_above_the_definition_disables_only_that_kernel() -> None:
    text = _kernel("kept", above="// kxform: off (tuned by hand)\n") + "\n" + _kernel("other")
    result = rewrite(text)
    assert outcomes(result) == {"kept": Outcome.MISSED, "other": Outcome.APPLIED}
    (remark,) = [r for r in result.remarks if r.name == "DisabledInSource"]
    assert remark.function == "kept" and remark.line == 1 and remark.kind.value == "Missed"
    assert "'kxform: off' at line 1" in remark.message
    new = result.new_data.decode()
    assert new.startswith(_kernel("kept", above="// kxform: off (tuned by hand)\n")) and "kxform_block" in new


def test_marker_inside_the_body_or_above_a_template_and_a_comment() -> None:
    result = rewrite(_kernel("k", inside="  /* kxform: off */"))
    assert outcomes(result) == {"k": Outcome.MISSED} and not result.changed
    (remark,) = [r for r in result.remarks if r.name == "DisabledInSource"]
    assert remark.line == 1
    text = "// kxform: off\n// the reference version\ntemplate <int B>\n" + _kernel("t")
    result = rewrite(text)
    assert outcomes(result) == {"t": Outcome.MISSED} and not result.changed
    assert [r.line for r in result.remarks if r.name == "DisabledInSource"] == [1]


def test_a_marker_further_away_or_spelled_otherwise_disables_nothing() -> None:
    for text in (
        "// kxform: off\nint unrelated;\n" + _kernel("k"),
        "// kxform: on\n" + _kernel("k"),
        _kernel("k", above="// kxform: offset the rows\n"),
    ):
        result = rewrite(text)
        assert outcomes(result) == {"k": Outcome.APPLIED}, text
        assert "DisabledInSource" not in {r.name for r in result.remarks}
