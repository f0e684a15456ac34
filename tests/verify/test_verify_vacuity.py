"""`verify` names the side that failed, and warns when a remap moves no block at any
check size (then the original is compared with itself)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import logged_remarks, run_cli
from swizzle_helpers import needs_cpu

HELD_OUT = Path(__file__).parents[1] / "fixtures" / "heldout"

SPEC = """version = 1
file = "naive_transpose.cu"

[kernel.naive_transpose]
grid = ["(width + 31) / 32", "(height + 7) / 8"]
block = ["32", "8"]
compare = {{ mode = "exact" }}

[[kernel.naive_transpose.args]]
name = "in"
kind = "buffer"
dtype = "float32"
count = "{count}"
role = "in"
fill = {{ dist = "uniform", low = -1.0, high = 1.0 }}

[[kernel.naive_transpose.args]]
name = "out"
kind = "buffer"
dtype = "float32"
count = "width * height"
role = "out"

[[kernel.naive_transpose.args]]
name = "width"
kind = "scalar"
dtype = "int32"
value = "width"

[[kernel.naive_transpose.args]]
name = "height"
kind = "scalar"
dtype = "int32"
value = "height"
{sizes}"""


def _tree(tmp_path: Path, sizes: list[tuple[int, int]], count: str = "width * height") -> Path:
    root = tmp_path / "t"
    root.mkdir(parents=True)
    shutil.copy(HELD_OUT / "naive_transpose.cu", root)
    table = "".join(
        f'\n[[kernel.naive_transpose.sizes]]\nname = "s{i}"\nwidth = {w}\nheight = {h}\n'
        for i, (w, h) in enumerate(sizes)
    )
    (root / "naive_transpose.kxspec.toml").write_text(SPEC.format(sizes=table, count=count))
    return root / "naive_transpose.cu"


@needs_cpu
def test_a_remap_that_moves_no_block_at_the_check_sizes_is_verified_with_a_warning(tmp_path: Path) -> None:
    """8-way XCD order on grids of at most 8 blocks is the identity: the check sizes cannot
    tell it from the original."""
    path = _tree(tmp_path, [(30, 30), (50, 20)])  # grids 1x4 and 2x3
    done = run_cli(
        "apply", "--pass", "swizzle", "--pattern", "xcd", "--param", "xcds=8", "--verify", "cpu", "--diff", str(path)
    )
    assert done.returncode == 0, done.stderr
    assert (
        "warning: 'naive_transpose': the remap moves no block at any check size of the spec (s0 1x4, s1 2x3)"
        in logged_remarks(done)
    )
    moving = _tree(tmp_path / "more", [(30, 30), (256, 256)])  # one grid of 8x32 blocks
    done = run_cli(
        "apply", "--pass", "swizzle", "--pattern", "xcd", "--param", "xcds=8", "--verify", "cpu", "--diff", str(moving)
    )
    assert done.returncode == 0, done.stderr
    assert "moves no block" not in done.stderr


@needs_cpu
def test_kxform_verify_warns_when_the_rewritten_remap_moves_no_block(tmp_path: Path) -> None:
    """`kxform verify ORIGINAL REWRITTEN` reads the remap back from the rewritten file and
    warns as apply does; a spec with a size that moves a block gives no warning."""
    path = _tree(tmp_path, [(30, 30), (50, 20)])  # grids 1x4 and 2x3
    out = tmp_path / "out"
    done = run_cli("apply", "--pass", "swizzle", "--pattern", "xcd", "--param", "xcds=8", "-o", str(out), str(path))
    assert done.returncode == 0, done.stderr
    rewritten = next(out.rglob("naive_transpose.cu"))
    verified = run_cli("verify", str(path), str(rewritten), "--kernel", "naive_transpose", "--runtime", "cpu")
    assert verified.returncode == 0, verified.stderr
    assert "kxform: warning: the remap moves no block at any check size of the spec (s0 1x4, s1 2x3)" in verified.stderr
    moving = _tree(tmp_path / "more", [(30, 30), (256, 256)])  # one grid of 8x32 blocks
    verified = run_cli("verify", str(moving), str(rewritten), "--kernel", "naive_transpose", "--runtime", "cpu")
    assert verified.returncode == 0, verified.stderr
    assert "moves no block" not in verified.stderr


@pytest.mark.parametrize("helper", ["grouped", "xcd-grouped", "custom"])
def test_the_remap_is_read_back_from_its_helper(helper: str) -> None:
    """A library pattern through its label, a custom remap through its formula: the remap
    read back from the emitted helper maps every block as the one that emitted it."""
    from kxform.passes.swizzle.formula import formula_remap
    from kxform.passes.swizzle.vacuity import remaps_in
    from kxform.remap import get_pattern

    if helper == "custom":
        remap = formula_remap("lx = select(gx * gy > 8, (bx + 1) % gx, bx)\nly = by")
    else:
        remap = get_pattern(helper).resolve({"group": 3, "along": "x"} | ({"xcds": 4} if "xcd" in helper else {}))
    found = remaps_in("#include <x.h>\n" + remap.helper_source("\r\n"))
    assert list(found) == [remap.helper_name()]
    apply = found[remap.helper_name()]
    for gx, gy in ((1, 1), (3, 5), (7, 2), (9, 4)):
        assert [apply(bx, by, gx, gy) for by in range(gy) for bx in range(gx)] == [
            remap.apply(bx, by, gx, gy) for by in range(gy) for bx in range(gx)
        ]


@needs_cpu
def test_an_original_that_reads_out_of_bounds_is_named_not_the_rewrite(tmp_path: Path) -> None:
    """The spec gives `in` 40 elements too few: the original itself reads past it, so no
    size can compare anything (inconclusive, exit 3), and the message names the original."""
    path = _tree(tmp_path, [(70, 45), (64, 48)], count="width * height - 40")
    done = run_cli("verify", "--kernel", "naive_transpose", "--runtime", "cpu", str(path), str(path))
    assert done.returncode == 3, done.stderr
    assert "the original kernel failed" in done.stderr and "out-of-bounds read" in done.stderr
    assert "rewritten" not in done.stderr.replace("original vs rewritten", "")
    assert "mismatch" not in (done.stdout + done.stderr).lower()


@pytest.mark.gpu
def test_on_the_gpu_an_original_reading_out_of_bounds_is_named_not_the_rewrite(tmp_path: Path) -> None:
    """The GPU does not check bounds: the original reads what lies past `in`, so its
    outputs differ run to run. kxform runs the original again on the bounds-checked CPU
    runtime and reports the size inconclusive, naming the original."""
    from kxform.runtime.gpu import GpuRuntime

    ok, why = GpuRuntime().available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    path = _tree(tmp_path, [(70, 45), (4096, 4096)], count="width * height - 40")
    done = run_cli("verify", "--kernel", "naive_transpose", "--runtime", "gpu", str(path), str(path))
    # The rewrite is never blamed. Where the bytes past `in` differ between the two runs the
    # size is inconclusive and the original is named; where the GPU happens to return the
    # same bytes twice (seen on an H200) the two runs agree, which the GPU cannot tell apart.
    assert "mismatch" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
    assert done.returncode in (0, 3), done.stderr
    if done.returncode == 3:
        assert "the original kernel" in done.stderr
