"""Loading harness specs: valid files resolve; every invalid field is named, with its line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from kxform.errors import Deprecated, SpecError
from kxform.harness.locate import LineIndex, split_dotted
from kxform.harness.spec import find_spec_for, load_spec

BASE = """\
version = 1
file = "k.cu"

[kernel.scale]
description = "y = a * x"
seed = 7
grid = ["ceil_div(N, 128)"]
block = [128]
compare = { mode = "ulp", ulps = 1 }
reference = "ref.py:scale"

[[kernel.scale.args]]
name = "x"
kind = "buffer"
dtype = "float32"
count = "N"
role = "in"
fill = { dist = "uniform", low = -1.0, high = 1.0 }

[[kernel.scale.args]]
name = "y"
kind = "buffer"
dtype = "float32"
count = "N"
role = "out"

[[kernel.scale.args]]
name = "a"
kind = "scalar"
dtype = "float32"
value = 2.5

[[kernel.scale.args]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "N"

[[kernel.scale.sizes]]
name = "small"
N = 1000

[[kernel.scale.sizes]]
name = "bench"
bench = true
N = 1048576
"""

REF = "def scale(size, inputs):\n    return {'y': inputs['a'] * inputs['x']}\n"


def write(tmp_path: Path, text: str, name: str = "k.kxspec.toml") -> Path:
    """Write the spec, its source and reference module; return the spec path."""
    (tmp_path / "k.cu").write_text("__global__ void scale(const float* x, float* y, float a, int n) {}\n")
    (tmp_path / "ref.py").write_text(REF)
    spec = tmp_path / name
    spec.write_text(text)
    return spec


def edited(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_loads_valid_spec(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, BASE))
    assert spec.source == tmp_path / "k.cu"
    kernel = spec.kernel("scale")
    assert kernel.description == "y = a * x"
    assert kernel.seed == 7
    assert [a.name for a in kernel.args] == ["x", "y", "a", "n"]
    assert [s.name for s in kernel.check_sizes] == ["small"]
    assert [s.name for s in kernel.bench_sizes] == ["bench"]
    assert kernel.sizes[0].values == {"N": 1000}
    assert kernel.compare.mode == "ulp" and kernel.compare.ulps == 1
    assert [a.name for a in kernel.outputs] == ["y"]
    launch = kernel.launch("small")
    assert launch.grid == (8, 1, 1)
    assert launch.block == (128, 1, 1)
    assert launch.shared_bytes == 0
    assert launch.arg("x").shape == (1000,)
    assert launch.arg("a").value == np.float32(2.5)
    assert launch.arg("a").value.dtype == np.float32
    assert launch.arg("n").value == np.int32(1000)
    assert launch.total_bytes == 8000
    assert kernel.launch("bench").grid == (8192, 1, 1)


def test_templated_kernel_and_shapes(tmp_path: Path) -> None:
    text = (
        edited("[kernel.scale]", '[kernel."scale<float, 64>"]')
        .replace("kernel.scale.", 'kernel."scale<float, 64>".')
        .replace('count = "N"\nrole = "out"', 'shape = ["N", 2]\nrole = "out"')
        .replace("block = [128]", 'block = [32, 2, 2]\nshared_bytes = "min(N, 1024) * 4"')
    )
    kernel = load_spec(write(tmp_path, text)).kernel("scale<float, 64>")
    assert kernel.base_name == "scale"
    launch = kernel.launch("small")
    assert launch.arg("y").shape == (1000, 2)
    assert launch.block == (32, 2, 2) and launch.threads_per_block == 128
    assert launch.shared_bytes == 4000


def test_error_inside_templated_kernel_is_located(tmp_path: Path) -> None:
    text = (
        edited("[kernel.scale]", '[kernel."scale<float, 64>"]')
        .replace("kernel.scale.", 'kernel."scale<float, 64>".')
        .replace('dtype = "int32"', 'dtype = "int33"')
    )
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    assert str(err.value).startswith(f"{tmp_path}/k.kxspec.toml:{line_of(text, 'int33')}:1: ")
    assert "kernel 'scale<float, 64>' arg 'n': unknown dtype 'int33'" in str(err.value)


def test_per_arg_compare_overrides_kernel_compare(tmp_path: Path) -> None:
    text = edited(
        'count = "N"\nrole = "out"', 'count = "N"\nrole = "out"\ncompare = { mode = "allclose", rtol = 1e-3 }'
    )
    kernel = load_spec(write(tmp_path, text)).kernel("scale")
    assert kernel.compare_for("y").mode == "allclose"
    assert kernel.compare_for("y").rtol == 1e-3 and kernel.compare_for("y").atol == 1e-8
    assert str(kernel.compare) == "ulp(ulps=1)"


# (old text, new text, expected message, text whose line the error must point at)
ERRORS = [
    (  # a required key misspelt: read before the keys are checked, the typo is named where it is
        'dtype = "float32"\ncount = "N"\nrole = "in"',
        'dtyp = "float32"\ncount = "N"\nrole = "in"',
        "kernel 'scale' arg 'x': missing 'dtype'; 'dtyp' is not a key: did you mean 'dtype'?",
        'dtyp = "float32"',
    ),
    (
        'dtype = "float32"\ncount = "N"\nrole = "in"',
        'dtype = "flaot32"\ncount = "N"\nrole = "in"',
        "kernel 'scale' arg 'x': unknown dtype 'flaot32' (expected one of float16, bfloat16, float32,",
        'dtype = "flaot32"',
    ),
    (
        "grid =",
        "grdi =",
        "kernel 'scale': unknown key 'grdi' (expected one of description, seed, grid, block,",
        "grdi =",
    ),
    (
        'role = "out"',
        'role = "ot"',
        "kernel 'scale' arg 'y': unknown role 'ot' (expected one of in, out, inout)",
        'role = "ot"',
    ),
    (
        'kind = "scalar"\ndtype = "float32"',
        'kind = "scaler"\ndtype = "float32"',
        "kernel 'scale' arg 'a': unknown kind 'scaler' (expected one of buffer, scalar)",
        '"scaler"',
    ),
    (
        'count = "N"\nrole = "in"',
        'role = "in"',
        "kernel 'scale' arg 'x': missing 'count' (or 'shape')",
        "[[kernel.scale.args]]",
    ),
    (
        'count = "N"\nrole = "in"',
        'count = "N"\nshape = ["N"]\nrole = "in"',
        "kernel 'scale' arg 'x': give 'count' or 'shape', not both",
        "shape =",
    ),
    (
        'role = "out"',
        'role = "out"\nfill = { dist = "const", value = 0 }',
        "kernel 'scale' arg 'y': an out buffer is poisoned before launch and takes no fill",
        'fill = { dist = "const"',
    ),
    (
        'fill = { dist = "uniform", low = -1.0, high = 1.0 }',
        "",
        "kernel 'scale' arg 'x': missing 'fill' (role 'in' needs initial data)",
        "[[kernel.scale.args]]",
    ),
    (
        'dist = "uniform"',
        'dist = "gaussian"',
        "kernel 'scale' arg 'x': unknown dist 'gaussian' (expected one of uniform, normal, int, sorted, csr, npy, const)",
        "gaussian",
    ),
    (
        "low = -1.0, high = 1.0",
        "low = 1.0, high = 1.0",
        "kernel 'scale' arg 'x': uniform fill needs low < high, got low=1.0 high=1.0",
        "low = 1.0",
    ),
    (
        "low = -1.0, high = 1.0",
        "low = -1.0, high = 1.0, seed = 3",
        "kernel 'scale' arg 'x': unknown key 'seed' (expected one of dist, low, high)",
        "seed = 3",
    ),
    (
        'mode = "ulp", ulps = 1',
        'mode = "ulps", ulps = 1',
        "kernel 'scale': unknown mode 'ulps' (expected one of exact, ulp, allclose)",
        "compare =",
    ),
    ('mode = "ulp", ulps = 1', 'mode = "ulp"', "kernel 'scale': missing 'ulps'", "compare ="),
    ('mode = "ulp", ulps = 1', 'mode = "ulp", ulps = -1', "kernel 'scale': 'ulps' must be >= 0, got -1", "compare ="),
    (
        'mode = "ulp", ulps = 1',
        'mode = "exact", ulps = 1',
        "kernel 'scale': unknown key 'ulps' (expected one of mode)",
        "compare =",
    ),
    (
        'mode = "ulp", ulps = 1',
        'mode = "allclose", rtol = -1',
        "kernel 'scale': 'rtol' must be >= 0, got -1.0",
        "compare =",
    ),
    (
        '"ref.py:scale"',
        '"ref.py"',
        "kernel 'scale': reference 'ref.py' must look like 'module.py:function'",
        "reference =",
    ),
    (
        '"ref.py:scale"',
        '"missing.py:scale"',
        "kernel 'scale': reference module 'missing.py' not found next to the spec",
        "reference =",
    ),
    (
        '"ceil_div(N, 128)"',
        '"ceil_div(N,, 128)"',
        "kernel 'scale': grid[0]: expression 'ceil_div(N,, 128)': syntax error",
        "grid =",
    ),
    (
        '"ceil_div(N, 128)"',
        '"open(N)"',
        "kernel 'scale': grid[0]: expression 'open(N)': unknown function 'open'",
        "grid =",
    ),
    (
        'count = "N"\nrole = "in"',
        'count = "M"\nrole = "in"',
        "kernel 'scale' size 'small': arg 'x' count: expression 'M': unknown variable 'M' (defined: N)",
        "[[kernel.scale.sizes]]",
    ),
    (
        "block = [128]",
        "block = [2048]",
        "kernel 'scale' size 'small': block.x = 2048 outside 1..1024",
        "[[kernel.scale.sizes]]",
    ),
    (
        "block = [128]",
        "block = [64, 32]",
        "kernel 'scale' size 'small': block (64, 32, 1) has 2048 threads (limit 1024)",
        "[[kernel.scale.sizes]]",
    ),
    (
        "block = [128]",
        "block = [16, 16, 128]",
        "kernel 'scale' size 'small': block.z = 128 outside 1..64",
        "[[kernel.scale.sizes]]",
    ),
    (
        "N = 1000",
        "N = 0",
        "kernel 'scale' size 'small': grid.x = 0 outside 1..2147483647 (grid (0, 1, 1))",
        "[[kernel.scale.sizes]]",
    ),
    (
        'grid = ["ceil_div(N, 128)"]',
        'grid = ["1", "1", "1", "1"]',
        "kernel 'scale': 'grid' needs 1 to 3 expressions, got 4",
        "grid =",
    ),
    (
        'grid = ["ceil_div(N, 128)"]',
        "grid = [{ x = 1 }]",
        "kernel 'scale': grid[0] must be an expression string or a number, got table",
        "grid =",
    ),
    (
        "block = [128]",
        'block = [128]\nshared_bytes = "300000"',
        "kernel 'scale' size 'small': shared_bytes = 300000 outside 0..232448",
        "[[kernel.scale.sizes]]",
    ),
    (
        'name = "y"',
        'name = "x"',
        "kernel 'scale' arg 'x': duplicate arg name 'x'",
        'name = "x"\nkind = "buffer"\ndtype = "float32"\ncount = "N"\nrole = "out"',
    ),
    ('name = "y"', 'name = "y z"', "kernel 'scale' arg 'y z': arg name 'y z' is not an identifier", '"y z"'),
    (
        'name = "bench"',
        'name = "small"',
        "kernel 'scale' size 'small': duplicate size name 'small'",
        'name = "small"\nbench',
    ),
    ("version = 1", "version = 2", "unsupported version 2 (this kxform reads version 1)", "version"),
    ('file = "k.cu"', 'file = "nope.cu"', "source file 'nope.cu' not found", "file ="),
    ('file = "k.cu"\n', "", "missing 'file'", "version"),
    (
        "version = 1",
        "version = 1\nauthor = 'me'",
        "unknown key 'author' (expected one of version, file, kernel)",
        "author",
    ),
    (
        "value = 2.5",
        'value = "N / 2.0"\ndtype2 = 1',
        "kernel 'scale' arg 'a': unknown key 'dtype2' (expected one of name, kind, dtype, value); did you mean 'dtype'?",
        "dtype2",
    ),
    (
        'value = "N"',
        'value = "N / 3.0"',
        "kernel 'scale' size 'small': arg 'n': value 333.3333333333333 is not an integer but dtype is int32",
        "[[kernel.scale.sizes]]",
    ),
    (
        'dtype = "int32"\nvalue = "N"',
        'dtype = "int8"\nvalue = "N"',
        "kernel 'scale' size 'small': arg 'n': value 1000 does not fit int8 (-128..127)",
        "[[kernel.scale.sizes]]",
    ),
    (
        "value = 2.5",
        "value = 1e39",
        "kernel 'scale' size 'small': arg 'a': value 1e+39 overflows float32",
        "[[kernel.scale.sizes]]",
    ),
    ("N = 1000", 'N = "1000"', "kernel 'scale' size 'small': 'N' must be an integer, got string", 'N = "1000"'),
    ("N = 1000", "N = 1000\nmin = 3", "kernel 'scale' size 'small': 'min' cannot be a size variable", "min = 3"),
    ("seed = 7", "seed = -1", "kernel 'scale': 'seed' must be >= 0, got -1", "seed ="),
    (
        "bench = true",
        "bench = 1",
        "kernel 'scale' size 'bench': 'bench' must be true or false, got integer",
        "bench = 1",
    ),
    (
        'role = "out"',
        'role = "in"\nfill = { dist = "const", value = 0 }',
        "kernel 'scale': no out or inout buffer: nothing to verify",
        "[[kernel.scale.args]]",
    ),
    (
        'role = "in"\nfill',
        'role = "in"\ncompare = { mode = "exact" }\nfill',
        "kernel 'scale' arg 'x': 'compare' applies to out and inout buffers only",
        'compare = { mode = "exact" }',
    ),
    ("[kernel.scale]", '[kernel."9bad"]', "kernel '9bad': not a kernel name", '[kernel."9bad"]'),
    (
        'description = "y = a * x"',
        "description = 3",
        "kernel 'scale': 'description' must be a string, got integer",
        "description",
    ),
]


@pytest.mark.parametrize(("old", "new", "message", "at"), ERRORS, ids=[e[2][:60] for e in ERRORS])
def test_errors_name_field_and_line(tmp_path: Path, old: str, new: str, message: str, at: str) -> None:
    text = edited(old, new)
    if '[kernel."9bad"]' in text:
        text = text.replace("kernel.scale.", 'kernel."9bad".')
    spec = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    first_line = at.split("\n")[0]
    line = line_of(text, first_line) if "\n" not in at else _line_of_block(text, at)
    assert message in str(err.value)
    assert str(err.value).startswith(f"{spec}:{line}:"), str(err.value)


def _line_of_block(text: str, block: str) -> int:
    offset = text.index(block)
    return text.count("\n", 0, offset) + 1


def test_all_bench_sizes_is_an_error(tmp_path: Path) -> None:
    text = edited('name = "small"\nN = 1000', 'name = "small"\nbench = true\nN = 1000')
    with pytest.raises(SpecError, match="every size is bench = true: add one for correctness checks"):
        load_spec(write(tmp_path, text))


def test_no_sizes_is_an_error(tmp_path: Path) -> None:
    text = BASE[: BASE.index("[[kernel.scale.sizes]]")]
    with pytest.raises(SpecError, match=r"kernel 'scale': no \[\[sizes\]\] entries"):
        load_spec(write(tmp_path, text))


def test_invalid_toml_reports_its_line(tmp_path: Path) -> None:
    text = edited("seed = 7", "seed = = 7")
    spec = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert str(err.value).startswith(f"{spec}:{line_of(text, 'seed = = 7')}:")
    assert "invalid TOML" in str(err.value)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "absent.toml")


CSR = """
[[kernel.scale.args]]
name = "row_ptr"
kind = "buffer"
dtype = "int32"
role = "in"
fill = { dist = "csr", part = "row_ptr", group = "A", rows = "N", cols = "N", nnz_per_row = 4 }

[[kernel.scale.args]]
name = "col_idx"
kind = "buffer"
dtype = "int32"
role = "in"
fill = { dist = "csr", part = "col_idx", group = "A" }
"""


def with_csr(csr: str) -> str:
    return edited("\n[[kernel.scale.sizes]]", csr + "\n[[kernel.scale.sizes]]")


def test_csr_counts_are_derived(tmp_path: Path) -> None:
    kernel = load_spec(write(tmp_path, with_csr(CSR))).kernel("scale")
    launch = kernel.launch("small")
    assert launch.arg("row_ptr").shape == (1001,)
    assert launch.arg("col_idx").shape == (4000,)
    assert kernel.csr_groups["A"].rows.text == "N"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'part = "col_idx", group = "A"',
            'part = "col_idx", group = "B"',
            "arg 'row_ptr': csr group 'A' has no col_idx part",
        ),
        ('part = "col_idx", group = "A"', 'part = "row_ptr", group = "A"', "csr group 'A' has two row_ptr parts"),
        (
            'part = "col_idx", group = "A"',
            'part = "col_idx", group = "A", rows = "2 * N"',
            "csr group 'A' rows '2 * N' disagrees with 'N'",
        ),
        ("nnz_per_row = 4", "nnz_per_row = 2000", "csr group 'A': nnz_per_row = 2000 outside 0..cols (1000)"),
        (
            'role = "in"\nfill = { dist = "csr", part = "col_idx"',
            'role = "in"\ncount = 7\nfill = { dist = "csr", part = "col_idx"',
            "arg 'col_idx': count 7 does not match csr group 'A' (col_idx of 1000 rows x 4 per row needs 4000)",
        ),
        (
            'dtype = "int32"\nrole = "in"\nfill = { dist = "csr", part = "col_idx"',
            'dtype = "float32"\nrole = "in"\nfill = { dist = "csr", part = "col_idx"',
            "csr col_idx must be int32 or int64, not float32",
        ),
        (
            ', rows = "N", cols = "N", nnz_per_row = 4',
            ', rows = "N", nnz_per_row = 4',
            "csr group 'A' gives no 'cols' on any part",
        ),
    ],
)
def test_csr_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in CSR
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, with_csr(CSR.replace(old, new, 1))))
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("fill", "dtype", "message"),
    [
        ('{ dist = "int", low = 0, high = 300 }', "uint8", "high = 300 does not fit uint8 (0..255)"),
        ('{ dist = "int", low = 5, high = 1 }', "int32", "int fill needs low <= high, got low=5 high=1"),
        ('{ dist = "uniform" }', "int32", "uniform fill needs a floating-point dtype, not int32"),
        ('{ dist = "normal", std = 0 }', "float32", "normal fill needs std > 0, got 0.0"),
        ('{ dist = "const", value = 0.5 }', "int32", "const fill of int32 needs an integer, got 0.5"),
        ('{ dist = "sorted", low = 0, high = 2.5 }', "int32", "sorted fill of int32 needs integer bounds, got 2.5"),
        ('{ dist = "npy", path = "data.npy" }', "float32", "npy file 'data.npy' not found"),
        ("{ low = 1 }", "float32", "missing 'dist'"),
        ('"uniform"', "float32", "'fill' must be a table, got string"),
    ],
)
def test_fill_errors(tmp_path: Path, fill: str, dtype: str, message: str) -> None:
    text = edited(
        'dtype = "float32"\ncount = "N"\nrole = "in"\nfill = { dist = "uniform", low = -1.0, high = 1.0 }',
        f'dtype = "{dtype}"\ncount = "N"\nrole = "in"\nfill = {fill}',
    )
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    assert f"kernel 'scale' arg 'x': {message}" in str(err.value)


def test_find_spec_for(tmp_path: Path) -> None:
    spec = write(tmp_path, BASE)
    assert find_spec_for(tmp_path / "k.cu") == spec
    other = tmp_path / "other.cu"
    other.write_text("")
    assert find_spec_for(other) is None
    own = tmp_path / "other.kxform.toml"
    own.write_text(BASE.replace('file = "k.cu"', 'file = "other.cu"'))
    assert find_spec_for(other) == own
    assert find_spec_for(tmp_path / "sub" / "x.cu") is None


def test_specs_have_their_own_names_and_the_old_ones_still_work(tmp_path: Path) -> None:
    """`kxform-spec.toml` and `NAME.kxspec.toml` win over the older `kxform.toml` and
    `NAME.kxform.toml`, which still work where they hold a spec; a `kxform.toml` holding
    the project configuration is never taken for a spec."""
    legacy = write(tmp_path, BASE, "kxform.toml")
    (tmp_path / "other.cu").write_text("")
    shared = tmp_path / "kxform-spec.toml"
    shared.write_text(BASE)
    assert find_spec_for(tmp_path / "k.cu") == shared
    shared.unlink()
    assert find_spec_for(tmp_path / "k.cu") == legacy
    own = tmp_path / "k.kxspec.toml"
    own.write_text(BASE)
    assert find_spec_for(tmp_path / "k.cu") == own and load_spec(own).kernels
    legacy.write_text('[tool.kxform]\npasses = ["swizzle"]\n')
    own.unlink()
    assert find_spec_for(tmp_path / "k.cu") is None


def test_a_spec_under_an_older_name_is_read_with_a_note_naming_the_new_one(tmp_path: Path) -> None:
    """`kxform.toml` is the project configuration's name: a spec still found under it (or
    as `NAME.kxform.toml`) loads, and says once what to rename it to; the new names say
    nothing."""
    legacy = write(tmp_path, BASE, "kxform.toml")
    with pytest.warns(Deprecated, match=r"kxform.toml: a harness spec under an older name, .*rename it k.kxspec.toml"):
        assert load_spec(legacy).kernels
    checked = run_cli("harness", "check", "kxform.toml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    notes = [line for line in checked.stderr.splitlines() if line.startswith("kxform: note: ")]
    assert notes == [
        "kxform: note: kxform.toml: a harness spec under an older name, still read; rename it k.kxspec.toml "
        "(git mv kxform.toml k.kxspec.toml): kxform.toml is the project configuration's name"
    ]
    legacy.rename(tmp_path / "k.kxform.toml")
    with pytest.warns(Deprecated, match=r"rename it k.kxspec.toml"):
        load_spec(tmp_path / "k.kxform.toml")
    (tmp_path / "k.kxform.toml").rename(tmp_path / "k.kxspec.toml")
    checked = run_cli("harness", "check", "k.kxspec.toml", cwd=tmp_path)
    assert checked.returncode == 0 and "note" not in checked.stderr, checked.stderr


@pytest.mark.parametrize("command", ["tune", "verify", "optimize"])
def test_help_names_specs_by_their_own_name(command: str) -> None:
    """`--spec` says NAME.kxspec.toml; kxform.toml appears, if at all, only as the
    project configuration (`--config`)."""
    shown = run_cli(command, "--help").stdout
    spec_help = " ".join(shown[shown.index("\n  --spec") + 3 :].split("\n  -")[0].split())
    assert "NAME.kxspec.toml" in spec_help and "kxform.toml" not in spec_help.replace(".kxspec.toml", "")
    for line in (ln for ln in shown.splitlines() if "kxform.toml" in ln):
        assert "[tool.kxform]" in shown[shown.index(line) - 200 : shown.index(line) + 200], line


def test_a_drafted_spec_gets_the_spec_name(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(
        "__global__ void scale(const float* x, float* y, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }\n"
        "void go(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, "
        "2.0f, n); }\n"
    )
    config = '[tool.kxform]\npasses = ["swizzle"]\n'
    (tmp_path / "kxform.toml").write_text(config)
    refused = run_cli(
        "harness", "infer", "--no-measure", "k.cu", "--kernel", "scale", "-o", "kxform.toml", cwd=tmp_path
    )
    assert refused.returncode == 2 and "project configuration's name" in refused.stderr
    assert (tmp_path / "kxform.toml").read_text() == config
    drafted = run_cli("harness", "infer", "--no-measure", "k.cu", "--kernel", "scale", "-o", ".", cwd=tmp_path)
    assert drafted.returncode == 0, drafted.stderr
    assert (tmp_path / "k.kxspec.toml").is_file() and find_spec_for(tmp_path / "k.cu") == tmp_path / "k.kxspec.toml"
    assert (tmp_path / "kxform.toml").read_text() == config


def test_find_spec_for_reports_broken_sibling_spec(tmp_path: Path) -> None:
    write(tmp_path, "version = = 1\n", "kxform-spec.toml")
    with pytest.raises(SpecError, match="invalid TOML"):
        find_spec_for(tmp_path / "k.cu")


def test_line_index_handles_quoted_keys_comments_and_arrays() -> None:
    text = (
        "version = 1  # a comment with = sign\n"
        '[kernel."gemm<float, 64>"]\n'
        "grid = [\"a\", 'b # not a comment']\n"
        '[[kernel."gemm<float, 64>".args]]\n'
        'name = "A"\n'
        '[[kernel."gemm<float, 64>".args]]\n'
        'name = "B"\n'
        '  dtype = "x"\n'
    )
    index = LineIndex(text)
    assert index.find(("version",)).line == 1
    assert index.find(("kernel", "gemm<float, 64>", "grid")).line == 3
    assert index.find(("kernel", "gemm<float, 64>", "args", 1, "dtype")) == index.find(
        ("kernel", "gemm<float, 64>", "args", 1, "dtype", "deeper")
    )
    position = index.find(("kernel", "gemm<float, 64>", "args", 1, "dtype"))
    assert (position.line, position.col) == (8, 3)
    assert index.find(("kernel", "gemm<float, 64>", "args", 0, "missing")).line == 4
    assert index.find(("nothing",)) is None
    assert split_dotted("a.\"b.c\".'d'") == ("a", "b.c", "d")
    assert split_dotted("a..b") is None
