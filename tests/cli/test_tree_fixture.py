"""`apply` on a small tree that imitates what real code bases do to kxform (tests/fixtures/tree):
Windows-only host code, a shared header that tree-sitter cannot parse, headers in another
directory found through compile_commands.json, kernels that include toolkit headers
(cooperative_groups/reduce.h, cuda/pipeline), two rewritten headers included by one file,
kernels in #if blocks, a missing generated header. Every file is processed, the kernels that
can be rewritten are, each refusal names its reason, and every written file compiles."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import NVCC, needs_nvcc, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tree"
APPLIED = {
    "add_tiles",
    "mul_tiles",
    "kx_fill_tiles",
    "row_sums",
    "tile_copy",
    "step_fast",
    "step_exact",
    "finish",
    "scale_2d",
}
MISSED = {"rows": "IndexReadInForeignMacro", "chained": "SpinWait", "configured": "SemanticUnavailable"}


def make_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURE, root)
    (root / "build").mkdir(exist_ok=True)  # the compilation database is written for the copy's paths
    entries = [
        {
            "directory": str(root / "build"),
            "file": str(f),
            "arguments": [
                "nvcc",
                "-I../include",
                "-DKX_TILE=16",
                "-ccbin",
                "/usr/bin/g++",
                "-O3",
                "-c",
                str(f),
                "-o",
                f.stem + ".o",
            ],
        }
        for f in sorted((root / "src").glob("*.cu"))
    ]
    (root / "build" / "compile_commands.json").write_text(json.dumps(entries, indent=1))
    return root


def nvcc_compiles(root: Path, path: Path, *defines: str) -> tuple[bool, str]:
    assert NVCC is not None
    proc = subprocess.run(
        [
            NVCC,
            "-c",
            "-arch=sm_90",
            f"-I{root / 'include'}",
            f"-I{root / 'src'}",
            *defines,
            str(path),
            "-o",
            str(root / "check.o"),
        ],
        capture_output=True,
        text=True,
    )
    return proc.returncode == 0, proc.stdout + proc.stderr


@needs_nvcc
@pytest.mark.slow
def test_a_real_looking_tree_is_processed_file_by_file_and_every_written_file_compiles(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    # The pattern is named: what is exercised is where edits go in such a tree; without a
    # named pattern (and no harness specs) the default leaves every kernel alone.
    proc = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--pattern",
        "grouped",
        "--verify",
        "compile",
        "-p",
        "build",
        "--log",
        "run.jsonl",
        "src",
        "include",
        cwd=root,
        timeout=900,
    )
    records = [json.loads(line) for line in (root / "run.jsonl").read_text().splitlines()]
    files = [r for r in records if r["type"] == "file"]
    kernels = {r["kernel"]: r for r in records if r["type"] == "kernel"}

    assert len(files) == 11 and not [f for f in files if f["error"]], proc.stderr  # every file processed
    assert {k for k, r in kernels.items() if r["outcome"] == "applied"} == APPLIED, proc.stderr
    for kernel, key in MISSED.items():
        assert kernels[kernel]["outcome"] == "missed" and kernels[kernel]["reasons"][0].startswith(key), kernels[kernel]
    assert "kx_generated_config.h" in kernels["configured"]["reasons"][0]
    # The only kernel the compiler cannot vouch for: its file includes a header that is not there.
    assert kernels["plain"]["outcome"] == "failed" and "unconfirmed" in kernels["plain"]["reasons"][0]
    assert proc.returncode == 1
    assert "kxform: note: " in proc.stderr and "-ccbin /usr/bin/g++" in proc.stderr
    assert "host code does not parse" in proc.stderr  # win_host.cu, platform.cuh: said, and nothing blocked

    written = [p for p in before if p.read_bytes() != before[p] and p.name != "run.jsonl"]
    assert sorted(p.name for p in written) == [
        "kern_a.cuh",
        "kern_b.cuh",
        "platform.cuh",
        "toolkit.cu",
        "variants.cu",
        "win_host.cu",
    ]
    for unit in sorted((root / "src").glob("*.cu")):
        if unit.name != "missing.cu":
            ok, log = nvcc_compiles(root, unit)
            assert ok, f"{unit.name} does not compile:\n{log}"
    ok, log = nvcc_compiles(root, root / "src" / "variants.cu", "-DKX_FAST_PATH=1")
    assert ok, log  # the other #if branch uses the helper too: it is outside both
    variants = (root / "src" / "variants.cu").read_text()
    assert variants.index("KXFORM_SWIZZLE_GROUPED_ALONGY_GROUP8_DEFINED") < variants.index("#if KX_FAST_PATH")
    assert (root / "src" / "missing.cu").read_bytes() == before[root / "src" / "missing.cu"]

    figures = {
        "files processed": len(files),
        "files written": len(written),
        "kernels": sum(1 for r in kernels.values()),
        "applied": len(APPLIED),
        "refused": dict(
            Counter(r["reasons"][0].split(":")[0] for r in kernels.values() if r["outcome"] in ("missed", "failed"))
        ),
    }
    print(json.dumps(figures))
