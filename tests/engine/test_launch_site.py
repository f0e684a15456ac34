"""The launch-site primitive of the edit engine: a launch dimension followed to where it is
written, grids that follow a new block in their usual spellings, edits of one launch
element or template argument list, each replacing only the bytes that change."""

from __future__ import annotations

import pytest

from kxform.engine import launch_site
from kxform.engine.edits import apply_edits
from kxform.frontend.c_expr import c_to_expr
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.source import validate_bytes

KERNEL = "__global__ void k(float *x, int n) { x[blockIdx.x * blockDim.x + threadIdx.x] = 0; }\n"


def _model(host: str):  # type: ignore[no-untyped-def]
    return parse_model(validate_bytes("k.cu", (KERNEL + host).encode()))


def _follow(host: str, which: int = 1, axis: int = 0):  # type: ignore[no-untyped-def]
    model = _model(host)
    (config,) = launch_configs(model, "k")
    return model, config, launch_site.written(model, config, which, axis)


@pytest.mark.parametrize(
    ("host", "kind", "text", "via"),
    [
        ("void r(float *x, int n) { k<<<n, 256>>>(x, n); }", "literal", "256", ()),
        ("void r(float *x, int n) { dim3 b(32, 8); k<<<n, b>>>(x, n); }", "literal", "32", ("b",)),
        ("void r(float *x, int n) { k<<<n, dim3(64, 2)>>>(x, n); }", "literal", "64", ()),
        ("void r(float *x, int n) { const int bs = 128; k<<<n, bs>>>(x, n); }", "literal", "128", ("bs",)),
        ("void r(float *x, int n) { int t = (96); k<<<n, t>>>(x, n); }", "literal", "96", ("t",)),
        ("void r(float *x, int n) { k<<<n, BLOCK>>>(x, n); }", "constant", "BLOCK", ()),
        ("void r(float *x, int n, int bs) { k<<<n, bs>>>(x, n); }", "parameter", "bs", ()),
        ("void r(float *x, int n) { k<<<n, n / 2>>>(x, n); }", "expression", "n / 2", ()),
    ],
)
def test_a_block_dimension_is_followed_to_where_it_is_written(
    host: str, kind: str, text: str, via: tuple[str, ...]
) -> None:
    model, _, place = _follow(host)
    assert place is not None and (place.kind, place.text, place.via) == (kind, text, via)
    assert model.source.data[place.span.start : place.span.end].decode() == text


def test_a_missing_dimension_is_none_and_a_cap_is_its_literal() -> None:
    assert _follow("void r(float *x, int n) { k<<<n, 256>>>(x, n); }", axis=1)[2] is None
    _, _, cap = _follow("void r(float *x, int n) { k<<<n, std::min(n, 1024)>>>(x, n); }")
    assert cap is not None and (cap.kind, cap.text, cap.caps) == ("literal", "1024", "std::min(n, 1024)")


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ("(n + 255) / 256", "(n + B - 1) / B"),
        ("(n + 256 - 1) / 256", "(n + B - 1) / B"),
        ("n / 256 + 1", "n / B + 1"),
        ("(int)ceil((float)n / 256)", "(int)ceil((float)n / B)"),
        ("(n + 127) / 128", "(n + 127) / 128"),  # another value: not the block's, left alone
    ],
)
def test_a_grid_follows_the_block_in_its_usual_spellings(grid: str, expected: str) -> None:
    host = f"void r(float *x, int n) {{ k<<<{grid}, 256>>>(x, n); }}"
    model, config, place = _follow(host)
    assert place is not None
    edits = [
        launch_site.set_written(place, "B", "test"),
        *launch_site.follow_block(model, config, 0, place, "B", "test"),
    ]
    out = apply_edits(model.source, edits).data.decode()
    assert out == (KERNEL + host).replace(f"<<<{grid}, 256>>>", f"<<<{expected}, B>>>")


def test_a_grid_over_a_local_and_block_x_follows_by_itself_and_the_local_holding_the_block_is_not_edited_twice() -> (
    None
):
    host = (
        "void r(float *x, int n) { const int bs = 128; const int g = (n + bs - 1) / bs; dim3 b(bs);"
        " dim3 grid((n + b.x - 1) / b.x); k<<<grid, b>>>(x, n); }"
    )
    model, config, place = _follow(host)
    assert place is not None and place.via == ("b", "bs")
    assert launch_site.follow_block(model, config, 0, place, "B", "test") == []
    assert config.grid == ("(n + ((128)) - 1) / ((128))",) and config.block == ("(128)",)  # block.x read through


def test_replace_config_and_template_arguments_change_only_their_bytes() -> None:
    text = (
        "template <typename T, int N> __global__ void t(T *x) {}\nvoid r(float *x) { t<float, 64><<<4, 64, 0>>>(x); }\n"
    )
    model = parse_model(validate_bytes("t.cu", text.encode()))
    (site,) = model.launches
    edits = [
        launch_site.replace_config(site, 2, "256", "test"),
        launch_site.replace_template_args(model, site, "<float, 128>", "test"),
    ]
    out = apply_edits(model.source, edits).data.decode()
    assert out == text.replace("t<float, 64><<<4, 64, 0>>>", "t<float, 128><<<4, 64, 256>>>")
    with pytest.raises(ValueError, match="has no template arguments"):
        plain = _model("void r(float *x, int n) { k<<<n, 256>>>(x, n); }")
        launch_site.replace_template_args(plain, plain.launches[0], "<int>", "test")


def test_the_binding_renames_host_variables_to_the_parameters_they_are_passed_as() -> None:
    host = "void r(float *x, int rows) { const int bs = B; k<<<(rows + bs - 1) / bs, bs>>>(x, rows); }"
    model = _model(host)
    (config,) = launch_configs(model, "k")
    kernel = model.kernels[0]
    binding = launch_site.launch_binding(model, kernel, config, ["B"], {"B": 64}, {"B": 128})
    assert binding is not None and binding.grid == ("(n + (B) - 1) / (B)",) and binding.block == ("(B)",)
    reads_host = _model("void r(float *x, int rows, int m) { k<<<m / B, B>>>(x, rows); }")
    (other,) = launch_configs(reads_host, "k")
    assert launch_site.launch_binding(reads_host, kernel, other, ["B"], {"B": 64}, {"B": 128}) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ceil(((float)NI) / ((float)32))", "ceil_div((NI), (32))"),
        ("(int)ceil(n / (double)256)", "ceil_div(n, 256)"),
        ("ceil(n / 256.0f)", "ceil_div(n, 256)"),
        ("ceil(n / 256)", None),  # integer division first: not a rounding up
    ],
)
def test_c_expressions_read_a_float_ceil_as_ceil_div(text: str, expected: str | None) -> None:
    assert c_to_expr(text, ["NI", "n"]) == expected


def test_function_like_macros_and_ceil_div_helpers_in_a_launch_are_read() -> None:
    host = "#define DIV_UP(a, b) (((a) + (b) - 1) / (b))\nvoid r(float *x, int n) { k<<<DIV_UP(n, 256), 256>>>(x, n); }"
    model = _model(host)
    (config,) = launch_configs(model, "k")
    assert config.grid == ("(((((n)) + ((256)) - 1) / ((256))))",)
    assert c_to_expr("iDivUp(n, B) + cdiv(m, 4)", ["n", "m", "B"]) == "ceil_div(n, B) + ceil_div(m, 4)"


@pytest.mark.parametrize(
    ("host", "axis", "after"),
    [
        (
            "void r(float *x, int n) { k<<<(n + 255) / 256, 256>>>(x, n); }",
            0,
            "k<<<(((n + 255) / 256) + F - 1) / F, 256>>>",
        ),
        (
            "void r(float *x, int n) { dim3 g(n / 16, n / 8); k<<<g, 128>>>(x, n); }",
            1,
            "dim3 g(n / 16, ((n / 8) + F - 1) / F)",
        ),
        ("void r(float *x, int n) { k<<<dim3(n, 4), 32>>>(x, n); }", 1, "k<<<dim3(n, ((4) + F - 1) / F), 32>>>"),
        ("void r(float *x, int n) { k<<<n, 32>>>(x, n); }", 1, None),  # a 1-D grid has no y to divide
    ],
)
def test_divide_grid_rounds_the_dimension_up_where_the_launch_writes_it(host, axis, after):
    model = _model(host)
    (config,) = launch_configs(model, "k")
    edit = launch_site.divide_grid(model, config, axis, "F", "test")
    if after is None:
        assert edit is None
    else:
        assert after in apply_edits(model.source, [edit]).data.decode()
