"""The `kxform` console script end to end: exit codes, write modes, bad input, pass logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import needs_nvcc, run_cli

KERNEL = """#include <cuda_runtime.h>
__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tile.cu").write_text(KERNEL)
    (tmp_path / "src" / "notes.txt").write_text("not cuda")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".kxform" not in p.parts
    }


def test_version_and_passes() -> None:
    assert run_cli("--version").stdout.startswith("kxform ")
    listing = run_cli("passes").stdout
    assert "swizzle" in listing and "xcd-grouped" in listing and "hilbert" in listing


def test_check_mode_exits_1_and_writes_nothing(tree: Path) -> None:
    before = snapshot(tree)
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--check", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    assert "1 file would be rewritten" in proc.stderr
    assert "would rewrite src/tile.cu\n" in proc.stderr
    assert snapshot(tree) == before


def test_check_combines_with_diff(tree: Path) -> None:
    """black's `--check --diff`: the diff on stdout, the file named, exit 1, nothing written."""
    before = snapshot(tree)
    proc = run_cli(
        "apply", "--pass", "swizzle{pattern=grouped}", "--check", "--diff", "--verify", "static", "src", cwd=tree
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("--- a/src/tile.cu\n+++ b/src/tile.cu\n")
    assert "would rewrite src/tile.cu" in proc.stderr and "1 file would be rewritten" in proc.stderr
    assert snapshot(tree) == before
    proc = run_cli("apply", "--pass", "swizzle", "--diff", "-o", "out", "src", cwd=tree)
    assert proc.returncode == 2 and "cannot be combined with -o" in proc.stderr and not (tree / "out").exists()


def test_diff_prints_patch_and_writes_nothing(tree: Path) -> None:
    before = snapshot(tree)
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--diff", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("--- a/src/tile.cu\n+++ b/src/tile.cu\n")
    assert "+    const uint2 kxform_block" in proc.stdout
    assert snapshot(tree) == before


@needs_nvcc
def test_in_place_write_is_compiled_logged_and_idempotent(tree: Path) -> None:
    proc = run_cli(
        "apply", "--pass", "swizzle{pattern=grouped}", "--verify", "compile", "--log", "run.jsonl", "src", cwd=tree
    )
    assert proc.returncode == 0, proc.stderr
    text = (tree / "src" / "tile.cu").read_text()
    assert "kxform_block.y * 16" in text
    assert (
        "src/tile.cu:2:1: note: 'tile' passed: bijection, proof, reparse, coverage, idempotence, compile" in proc.stderr
    )
    records = [json.loads(line) for line in (tree / "run.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records][0] == "run" and records[-1]["type"] == "summary"
    (kernel,) = [r for r in records if r["type"] == "kernel"]
    assert kernel["outcome"] == "applied" and kernel["proposal"]["params"]["pattern"] == "grouped"
    assert {c["name"] for c in kernel["checks"]} == {
        "bijection",
        "proof",
        "reparse",
        "coverage",
        "idempotence",
        "compile",
    }
    assert all(c["ok"] for c in kernel["checks"])
    (compile_check,) = [c for c in kernel["checks"] if c["name"] == "compile"]
    assert "tile " in compile_check["detail"] and " regs " in compile_check["detail"]
    (file_record,) = [r for r in records if r["type"] == "file"]
    assert file_record["diff"].startswith("--- a/src/tile.cu")
    again = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--check", "src", cwd=tree)
    assert again.returncode == 0 and "0 files would be rewritten, 1 unchanged" in again.stderr


def test_out_dir_leaves_sources_alone(tree: Path) -> None:
    """With -o the tree is never written, not even a pass log: without --log it goes to
    OUT_DIR/.kxform/logs/."""
    before = snapshot(tree / "src")
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", "-o", "out", "src", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(tree / "src") == before
    assert "kxform_block" in (tree / "out" / "src" / "tile.cu").read_text()
    assert not (tree / ".kxform").exists() and not (tree / "src" / ".kxform").exists()
    (log,) = (tree / "out" / ".kxform" / "logs").glob("*.jsonl")
    assert f"Log: {Path('out') / '.kxform' / 'logs' / log.name}" in proc.stderr
    assert (tree / "out" / ".kxform" / ".gitignore").read_text().splitlines()[-1] == "*"


@needs_nvcc
def test_rewrite_that_does_not_compile_is_not_written(tree: Path) -> None:
    # The original compiles; the rewrite does not, because a parameter named 'uint2'
    # shadows the type the prologue declares its variable with.
    src = KERNEL.replace("float* out, int n)", "float* out, int n, int uint2)")
    (tree / "src" / "tile.cu").write_text(src)
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "compile", "src", cwd=tree)
    assert proc.returncode == 1
    assert "rewritten file does not compile" in proc.stderr and "tile.cu:" in proc.stderr
    assert (tree / "src" / "tile.cu").read_text() == src


BAD_INPUTS = {
    "empty.cu": (b"", "file is empty"),
    "binary.cu": (b"\x7fELF\x00\x01", "binary file"),
    "latin1.cu": (b"// caf\xe9\n__global__ void k() {}\n", "not valid UTF-8"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_only_that_file_is_untouched(tree: Path, name: str) -> None:
    data, cause = BAD_INPUTS[name]
    (tree / "src" / name).write_bytes(data)
    before = snapshot(tree)
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 2
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("kxform: error:")]
    assert f"src/{name}" in line and cause in line
    after = snapshot(tree)
    assert after[f"src/{name}"] == before[f"src/{name}"]
    assert "kxform_block" in after["src/tile.cu"].decode()  # the good file is processed and written
    assert "1 input error (those files left untouched)" in proc.stderr


def test_host_code_that_does_not_parse_blocks_no_kernel(tree: Path) -> None:
    (tree / "src" / "tile.cu").write_text(KERNEL + "int x = ;\n")
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert "remark: host code does not parse at line 7" in proc.stderr
    assert "kxform_block" in (tree / "src" / "tile.cu").read_text()


def test_ten_megabyte_file_is_refused(tree: Path) -> None:
    big = tree / "src" / "big.cu"
    with open(big, "wb") as handle:
        handle.write(b"// x\n" * (10 * 1024 * 1024 // 5))
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "src/big.cu", cwd=tree)
    assert proc.returncode == 2 and "MiB limit" in proc.stderr


@pytest.mark.slow
def test_missing_path_symlink_loop_and_usage_errors(tree: Path) -> None:
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "nope/", cwd=tree)
    assert proc.returncode == 2 and "kxform: error: nope/: no such file or directory" in proc.stderr
    os.symlink("loop.cu", tree / "loop.cu")
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "loop.cu", cwd=tree)
    assert proc.returncode == 2 and "loop.cu: symlink loop" in proc.stderr
    proc = run_cli("apply", "--pass", "swizle", "src", cwd=tree)
    assert proc.returncode == 2 and "unknown pass 'swizle'" in proc.stderr
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--param", "group", "src", cwd=tree)
    assert proc.returncode == 2 and "expected KEY=VALUE" in proc.stderr
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--hw", "gtx480", "src", cwd=tree)
    assert proc.returncode == 2 and "gtx480" in proc.stderr
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--check", "-o", "out", "src", cwd=tree)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


@pytest.mark.slow
def test_inspect_reports_kernels_launches_and_safety(tree: Path) -> None:
    (tree / "src" / "scan.cu").write_text(
        "__global__ void scan(int* f) { if (blockIdx.x) while (atomicAdd(&f[blockIdx.x - 1], 0) == 0) {} }\n"
        "void go(int* f) { scan<<<8, 32>>>(f); }\n"
    )
    proc = run_cli("inspect", "--json", "src", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    report = {entry["file"].split("/")[-1]: entry for entry in json.loads(proc.stdout)}
    assert report["tile.cu"]["kernels"][0]["swizzle"] == "safe"
    assert report["tile.cu"]["kernels"][0]["passes"]["swizzle"]["grid_dims"] == 2
    scan = report["scan.cu"]
    swizzle = scan["kernels"][0]["passes"]["swizzle"]
    assert scan["kernels"][0]["swizzle"] == "refused" and "SpinWait" in swizzle["reasons"][0]
    assert scan["launches"][0]["config"] == ["8", "32"]
    table = run_cli("inspect", "src", cwd=tree).stdout
    assert "kernel scan" in table and "swizzle: refused" in table


def test_headers_included_from_cuda_files_are_processed(tree: Path) -> None:
    (tree / "src" / "kernels.h").write_text(KERNEL.replace("tile(", "tile_in_header("))
    (tree / "src" / "unused.h").write_text(KERNEL)
    (tree / "src" / "main.cu").write_text('#include "kernels.h"\nint main() { return 0; }\n')
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--diff", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert "+++ b/src/kernels.h" in proc.stdout and "unused.h" not in proc.stdout


def test_a_defect_is_exit_123_with_the_traceback_saved(monkeypatch, capsys) -> None:
    import kxform.cli.passes
    from kxform.cli.main import main

    def broken(args) -> int:  # stands in for a bug anywhere below the CLI
        raise ValueError("boom")

    monkeypatch.setattr(kxform.cli.passes, "run", broken)
    assert main(["passes"]) == 123
    err = capsys.readouterr().err.strip()
    assert err.startswith("kxform: internal error: ValueError: boom (traceback saved to ")
    saved = err.rsplit("saved to ", 1)[1].rstrip(")")
    assert "ValueError: boom" in Path(saved).read_text()
