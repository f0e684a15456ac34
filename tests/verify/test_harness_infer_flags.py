"""`kxform harness infer` with the project's build flags (`-I`, `-D`, `-p BUILD_DIR`, the
configuration's `include`/`defines`): macros the launch reads that a header or a `-D`
defines are evaluated as the compiler sees them, so the draft needs no hand edit; the
demo's sgemm (`#define TILE DEMO_TILE`, DEMO_TILE from `-DDEMO_TILE=16`) is the case."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.frontend.source import SourceText
from kxform.harness.infer import infer_spec
from kxform.harness.request import UnitFlags

DEMO = Path(__file__).parents[2] / "examples" / "demo"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of examples/demo without its written spec (nothing is written into the repository)."""
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("*.kxspec.toml", "build"))
    return copy


def _draft(demo: Path, flags: UnitFlags | None) -> str:
    path = demo / "src" / "sgemm.cu"
    return infer_spec(SourceText(str(path), path.read_bytes()), "sgemm", flags=flags).text


def test_a_launch_macro_defined_through_a_header_and_a_define_is_evaluated_with_the_flags(demo: Path) -> None:
    text = _draft(demo, UnitFlags((str(demo / "include"),), ("DEMO_TILE=8",)))
    assert 'grid = ["(N + 8 - 1) / 8", "(M + 8 - 1) / 8"]  # from the launch at line 31' in text
    assert 'block = ["8", "8"]\n' in text  # the -D value, not a guess


def test_without_the_flags_the_draft_names_the_macro_to_fill_in(demo: Path) -> None:
    text = _draft(demo, None)
    block = next(line for line in text.splitlines() if line.startswith("block = "))
    assert block.startswith('block = ["TILE", "TILE"]  # fill in: \'TILE\' in the launch at ')
    assert "is a macro kxform cannot evaluate (give the project's -I/-D or -p BUILD_DIR)" in block


@pytest.mark.slow
def test_the_demo_draft_with_i_and_d_checks_and_verifies_the_original_on_the_cpu_runtime(demo: Path) -> None:
    (demo / "specs").mkdir()
    flags = ["-Iinclude", "-DDEMO_TILE=16"]
    proc = run_cli("harness", "infer", "src/sgemm.cu", "--kernel", "sgemm", *flags, "-o", "specs", cwd=demo)
    assert proc.returncode == 0, proc.stderr
    assert "fill in" not in proc.stderr
    spec = (demo / "specs" / "sgemm.kxspec.toml").read_text()
    assert "# fill in:" not in spec and 'block = ["16", "16"]' in spec and 'file = "../src/sgemm.cu"' in spec
    assert run_cli("harness", "check", "specs/sgemm.kxspec.toml", cwd=demo).returncode == 0
    verify = [
        "verify",
        "src/sgemm.cu",
        "src/sgemm.cu",
        "--kernel",
        "sgemm",
        "--spec",
        "specs/sgemm.kxspec.toml",
        "--runtime",
        "cpu",
    ]
    done = run_cli(*verify, *flags, cwd=demo)
    assert done.returncode == 0 and "verified on the cpu runtime" in done.stdout, done.stdout + done.stderr
    # the flags reach the build: without DEMO_TILE the demo's header stops it (#error), never "ok"
    missing = run_cli(*verify, "-Iinclude", cwd=demo)
    assert missing.returncode != 0 and "verified" not in missing.stdout
    assert "DEMO_TILE must be defined" in missing.stdout + missing.stderr


def test_a_compilation_database_gives_the_flags(demo: Path) -> None:
    source = demo / "src" / "sgemm.cu"
    build = demo / "build"
    build.mkdir()
    (build / "compile_commands.json").write_text(
        json.dumps(
            [
                {
                    "directory": str(demo),
                    "file": str(source),
                    "arguments": ["nvcc", f"-I{demo / 'include'}", "-DDEMO_TILE=32", "-c", str(source)],
                }
            ]
        )
    )
    proc = run_cli("harness", "infer", "src/sgemm.cu", "--kernel", "sgemm", "-p", "build", "--no-measure", cwd=demo)
    assert proc.returncode == 0, proc.stderr
    assert 'block = ["32", "32"]\n' in proc.stdout and "TILE" not in proc.stdout.split("[[")[0]


def test_a_file_missing_from_the_compilation_database_is_one_line_and_writes_nothing(demo: Path) -> None:
    (demo / "build").mkdir()
    (demo / "build" / "compile_commands.json").write_text("[]")
    proc = run_cli(
        "harness",
        "infer",
        "src/sgemm.cu",
        "--kernel",
        "sgemm",
        "-p",
        "build",
        "-o",
        "out.toml",
        "--no-measure",
        cwd=demo,
    )
    assert proc.returncode != 0 and not (demo / "out.toml").exists()
    assert len(proc.stderr.strip().splitlines()) == 1 and "sgemm.cu" in proc.stderr, proc.stderr
