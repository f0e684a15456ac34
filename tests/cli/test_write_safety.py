"""Safe writes on real trees: what `apply` refuses to write, and what it never touches.

Each test plants one hazard (a concurrent edit, a link, a FIFO, a header outside the
tree, a broken environment) and checks that kxform reports it on one line, with the
documented exit code, and leaves every byte it must not change as it was.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import needs_nvcc, run_cli, kxform_exe

SWIZZLE = "swizzle{pattern=grouped}"
"""These tests are about writing: the pattern is forced (the default needs the model's evidence)."""

KERNEL = """#include <cuda_runtime.h>
__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


def _apply(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    return run_cli("apply", "--pass", SWIZZLE, "--verify", "static", *args, cwd=cwd, env=env, timeout=timeout)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kxform: error:")]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".kxform" not in p.parts
    }


# ---------------------------------------------------------------- per-file isolation
def test_one_bad_file_does_not_block_the_rest(tmp_path: Path) -> None:
    (tmp_path / "good.cu").write_text(KERNEL)
    (tmp_path / "latin1.cu").write_bytes(b"// caf\xe9\n__global__ void k(float* o) { o[blockIdx.x] = 1; }\n")
    proc = _apply(".", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "latin1.cu" in line and "not valid UTF-8" in line
    assert "kxform_block" in (tmp_path / "good.cu").read_text()  # the rest is written
    assert (tmp_path / "latin1.cu").read_bytes().startswith(b"// caf\xe9")


# ---------------------------------------------------------------- lost updates
def test_file_edited_while_apply_runs_is_refused_not_overwritten(tmp_path: Path) -> None:
    from kxform.orchestrate.runner import ApplyConfig, run_apply
    from kxform.hw import load_profile
    from kxform.log.report import WriteBack

    src = tmp_path / "tile.cu"
    src.write_text(KERNEL)
    edited = KERNEL + "// edited by someone else while kxform ran\n"

    def edit_during_run(done: int, total: int, path: str) -> None:
        src.write_text(edited)  # after kxform read the file, before it writes

    config = ApplyConfig(pipeline=SWIZZLE, hw=load_profile("h100"), verify="static", jobs=1, write_back=WriteBack.WRITE)
    report, _ = run_apply([str(src)], config, progress=edit_during_run)
    assert src.read_text() == edited
    assert report.exit_code == 2
    assert any("changed on disk while kxform ran" in e for e in report.input_errors), report.input_errors


# ---------------------------------------------------------------- symlinks
def test_symlinks_rewrite_their_target_once_and_stay_links(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "real.cu").write_text(KERNEL)
    os.symlink("real.cu", tree / "link1.cu")
    os.symlink("real.cu", tree / "link2.cu")
    proc = _apply("tree", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tree / "link1.cu").is_symlink() and (tree / "link2.cu").is_symlink()
    text = (tree / "real.cu").read_text()
    assert text.count("const uint2 kxform_block") == 1  # rewritten once
    assert "1 file rewritten" in proc.stderr


def test_link_to_a_file_outside_the_given_paths_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.cu"
    outside.write_text(KERNEL)
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(outside, tree / "link.cu")
    proc = _apply("tree", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert "link.cu" in line and "outside the paths given" in line
    assert outside.read_text() == KERNEL and (tree / "link.cu").is_symlink()


# ---------------------------------------------------------------- headers outside DIR
def test_headers_outside_the_given_directory_are_never_written(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "src").mkdir()
    header = tmp_path / "common" / "kern.h"
    header.write_text(KERNEL.replace("tile(", "tile_h("))
    (tmp_path / "src" / "main.cu").write_text('#include "../common/kern.h"\nint main() { return 0; }\n')
    proc = _apply("src", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert header.read_text() == KERNEL.replace("tile(", "tile_h(")


# ---------------------------------------------------------------- non-regular files
def test_fifos_and_device_files_named_cu_are_refused(tmp_path: Path) -> None:
    (tmp_path / "good.cu").write_text(KERNEL)
    os.mkfifo(tmp_path / "fifo.cu")
    os.symlink("/dev/zero", tmp_path / "zero.cu")
    start = time.monotonic()
    proc = _apply("good.cu", "fifo.cu", "zero.cu", cwd=tmp_path, timeout=60)
    assert time.monotonic() - start < 50  # neither blocks on the FIFO nor reads /dev/zero forever
    assert proc.returncode == 2, proc.stderr
    errors = _errors(proc.stderr)
    assert len(errors) == 2 and all("not a regular file" in e for e in errors), errors
    assert "kxform_block" in (tmp_path / "good.cu").read_text()


# ---------------------------------------------------------------- partial writes
def test_a_file_that_cannot_be_written_is_named_and_the_rest_is_written(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "one.cu").write_text(KERNEL)
    (tmp_path / "b" / "two.cu").write_text(KERNEL.replace("tile(", "tile2("))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a").write_text("a file where kxform needs a directory")
    proc = _apply("-o", "out", "a", "b", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "a/one.cu" in line and "not written" in line
    assert "kxform_block" in (tmp_path / "out" / "b" / "two.cu").read_text()
    assert (tmp_path / "out" / "a").read_text() == "a file where kxform needs a directory"


# ---------------------------------------------------------------- environment errors
@pytest.mark.parametrize("case", ["log-dir", "log-full", "out-file", "cache-file"])
def test_environment_errors_are_exit_2_one_line_and_nothing_written(tmp_path: Path, case: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tile.cu").write_text(KERNEL)
    (tmp_path / "a-file").write_text("x")
    args: list[str] = []
    env: dict[str, str] = {}
    if case == "log-dir":
        args = ["--log", "src"]
    elif case == "log-full":
        if not os.path.exists("/dev/full"):
            pytest.skip("/dev/full does not exist on this system")
        args = ["--log", "/dev/full"]
    elif case == "out-file":
        args = ["-o", "a-file"]
    else:
        env = {"KXFORM_CACHE_DIR": str(tmp_path / "a-file" / "cache")}
    before = _snapshot(tmp_path)
    proc = run_cli("apply", "--pass", SWIZZLE, *args, "src", cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kxform: error:"), proc.stderr
    assert "internal error" not in proc.stderr
    assert _snapshot(tmp_path) == before


def test_non_utf8_file_name_is_one_line_exit_2(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    with open(os.path.join(root, b"caf\xe9.cu"), "w") as handle:
        handle.write(KERNEL)
    (tmp_path / "good.cu").write_text(KERNEL.replace("tile(", "tile2("))
    proc = _apply(".", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "file name is not valid UTF-8" in line and "caf\\xe9.cu" in line
    assert "kxform_block" in (tmp_path / "good.cu").read_text()


def test_file_name_with_a_newline_keeps_errors_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad\nname.cu").write_bytes(b"\x7fELF\x00")
    proc = _apply(".", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert "bad\\nname.cu" in line and "binary file" in line


def test_error_logs_do_not_pile_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kxform.orchestrate.runner import save_traceback

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    saved = []
    for i in range(30):
        try:
            raise ValueError(f"defect {i}")
        except ValueError as exc:
            saved.append(save_traceback(exc))
    logs = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(logs) <= 10
    assert Path(saved[-1]).exists() and "defect 29" in Path(saved[-1]).read_text()


# ---------------------------------------------------------------- BOM, size
def test_helper_goes_after_a_utf8_bom(tmp_path: Path) -> None:
    src = tmp_path / "bom.cu"
    src.write_bytes(b"\xef\xbb\xbf" + KERNEL.split("\n", 1)[1].encode())
    proc = _apply("bom.cu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = src.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.count(b"\xef\xbb\xbf") == 1
    assert b"kxform_swizzle_" in data


def test_size_limit_names_the_rewritten_output(tmp_path: Path) -> None:
    from kxform.frontend.source import MAX_SOURCE_BYTES

    body = KERNEL.encode()
    filler = b"// " + b"x" * 76 + b"\n"
    pad = (MAX_SOURCE_BYTES - len(body) - 10) // len(filler)
    (tmp_path / "big.cu").write_bytes(filler * pad + body)
    proc = _apply("--check", "big.cu", cwd=tmp_path)
    assert "file is" not in proc.stderr, proc.stderr
    assert "rewritten file would be" in proc.stderr
    assert proc.returncode in (0, 1)


# ---------------------------------------------------------------- duplicate definitions
def test_two_definitions_of_one_kernel_under_ifdef_do_not_recurse(tmp_path: Path) -> None:
    (tmp_path / "variants.cu").write_text(
        "#ifdef FAST\n"
        + KERNEL.split("\n", 1)[1]
        + "#else\n"
        + KERNEL.split("\n", 1)[1].replace("1.0f", "2.0f")
        + "#endif\n"
    )
    proc = _apply("--diff", "variants.cu", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "internal error" not in proc.stderr and "RecursionError" not in proc.stderr


# ---------------------------------------------------------------- read-only files
def test_read_only_files_are_refused(tmp_path: Path) -> None:
    src = tmp_path / "ro.cu"
    src.write_text(KERNEL)
    os.chmod(src, 0o444)
    proc = _apply("ro.cu", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert "ro.cu" in line and "read-only" in line
    assert src.read_text() == KERNEL and (src.stat().st_mode & 0o777) == 0o444


# ---------------------------------------------------------------- compile database flags
def test_compile_database_flags_that_run_programs_are_ignored(tmp_path: Path) -> None:
    from kxform.build.compile_db import flags_from_argv, load_compile_commands

    argv = [
        "nvcc",
        "-ccbin",
        "/tmp/evil",
        "--compiler-bindir=/tmp/evil2",
        "-Xcompiler",
        "-fplugin=/tmp/p.so",
        "-Xcompiler=-fplugin=/tmp/q.so",
        "-I",
        "inc",
        "-DFOO=1",
        "-std=c++17",
        "--expt-relaxed-constexpr",
        "-c",
        "k.cu",
    ]
    flags = flags_from_argv(argv, tmp_path, str(tmp_path / "k.cu"))
    text = " ".join(flags.extra_flags)
    assert "evil" not in text and "plugin" not in text and "Xcompiler" not in text and "ccbin" not in text
    assert flags.defines == ("FOO=1",) and "-std=c++17" in flags.extra_flags
    assert "--expt-relaxed-constexpr" in flags.extra_flags
    (tmp_path / "compile_commands.json").write_text(
        json.dumps([{"directory": str(tmp_path), "file": "k.cu", "arguments": argv}])
    )
    ignored = load_compile_commands(tmp_path).ignored  # what the run's note lists
    assert "-ccbin /tmp/evil" in ignored and "-Xcompiler -fplugin=/tmp/p.so" in ignored


@needs_nvcc
def test_ccbin_from_compile_commands_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil-cc"
    evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec g++ "$@"\n')
    evil.chmod(0o755)
    (tmp_path / "tile.cu").write_text(KERNEL)
    (tmp_path / "compile_commands.json").write_text(
        json.dumps(
            [
                {
                    "directory": str(tmp_path),
                    "file": "tile.cu",
                    "arguments": ["nvcc", "-ccbin", str(evil), "-c", "tile.cu"],
                }
            ]
        )
    )
    proc = run_cli("apply", "--pass", SWIZZLE, "--verify", "compile", "-p", ".", "--check", "tile.cu", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert not marker.exists()
    assert "note:" in proc.stderr and "-ccbin" in proc.stderr


# ---------------------------------------------------------------- pool workers
def test_pool_workers_die_with_their_parent(tmp_path: Path) -> None:
    for i in range(60):  # enough work that the pool is still busy when the parent is killed
        (tmp_path / f"k{i}.cu").write_text('#include "local.h"\n' + KERNEL.replace("tile(", f"tile{i}("))
    (tmp_path / "local.h").write_text("#define LOCAL 1\n")
    proc = subprocess.Popen(
        [kxform_exe(), "apply", "--pass", SWIZZLE, "--verify", "static", "--check", "-j", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.2)
        workers = _children(proc.pid)
    assert workers, "the run never started pool workers"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers), "orphaned pool workers are still running"


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ---------------------------------------------------------------- concurrent runs
def test_a_second_run_on_one_tree_waits_for_or_refuses_the_first(tmp_path: Path) -> None:
    from kxform.workspace.lock import TreeLock

    (tmp_path / "tile.cu").write_text(KERNEL)
    with TreeLock.acquire([str(tmp_path / "tile.cu")]):
        proc = _apply("tile.cu", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc.stderr)
    assert "another kxform run" in line
    assert (tmp_path / "tile.cu").read_text() == KERNEL
    proc = _apply("tile.cu", cwd=tmp_path)  # released: the next run proceeds
    assert proc.returncode == 0 and "kxform_block" in (tmp_path / "tile.cu").read_text()


def test_runs_into_one_output_directory_lock_only_their_copies(tmp_path: Path) -> None:
    """A parallel build runs one kxform per file into one -o directory: runs writing
    other copies proceed; a run that would write a copy being written waits for it
    (and refuses once its wait is over)."""
    import subprocess
    import time

    from kxform.orchestrate.runner import output_path
    from kxform.workspace.lock import TreeLock

    (tmp_path / "a.cu").write_text(KERNEL)
    (tmp_path / "b.cu").write_text(KERNEL)
    out = tmp_path / "out"
    with TreeLock.acquire_copies(str(out), [output_path("a.cu", str(out))]):
        other = _apply("-o", "out", "b.cu", cwd=tmp_path)
        same = _apply("-o", "out", "a.cu", cwd=tmp_path, env={"KXFORM_LOCK_WAIT": "0.5"})
        waiting = subprocess.Popen(
            [kxform_exe(), "apply", "--pass", SWIZZLE, "--verify", "static", "-o", "out", "a.cu"],
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        assert waiting.poll() is None and not (out / "a.cu").exists()  # still waiting for the holder
    assert other.returncode == 0 and "kxform_block" in (out / "b.cu").read_text(), other.stderr
    assert same.returncode == 2 and "another kxform run" in _errors(same.stderr)[0], same.stderr
    _, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0 and "kxform_block" in (out / "a.cu").read_text(), err


# ---------------------------------------------------------------- harness specs
SPEC_HEAD = """version = 1
file = "k.cu"
[kernel.k]
grid = [1]
block = [32]
"""
SPEC_OUT = """[[kernel.k.args]]
name = "out"
kind = "buffer"
dtype = "float32"
role = "out"
count = {count}
[[kernel.k.sizes]]
name = "s"
"""


@pytest.mark.parametrize(
    "case", ["atol-inf", "rtol-nan", "huge-count", "deep-toml", "npy-outside", "reference-outside"]
)
def test_harness_spec_limits_are_located_spec_errors(tmp_path: Path, case: str) -> None:
    from kxform.errors import SpecError
    from kxform.harness.spec import load_spec

    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "k.cu").write_text("__global__ void k(float* out) { out[threadIdx.x] = 1; }\n")
    (tmp_path / "ref.py").write_text("def k(size, inputs):\n    return {}\n")
    import numpy as np

    np.save(tmp_path / "data.npy", np.zeros(32, np.float32))
    text = SPEC_HEAD + SPEC_OUT.format(count=32)
    if case == "atol-inf":
        text = text.replace("block = [32]\n", 'block = [32]\ncompare = { mode = "allclose", rtol = 0.0, atol = inf }\n')
    elif case == "rtol-nan":
        text = text.replace("block = [32]\n", 'block = [32]\ncompare = { mode = "allclose", rtol = nan }\n')
    elif case == "huge-count":
        text = SPEC_HEAD + SPEC_OUT.format(count=2**40)
    elif case == "deep-toml":
        text += "x = " + "[" * 200000 + "]" * 200000 + "\n"
    elif case == "npy-outside":
        text = text.replace(
            "[[kernel.k.sizes]]",
            '[[kernel.k.args]]\nname = "a"\nkind = "buffer"\n'
            'dtype = "float32"\nrole = "in"\ncount = 32\nfill = { dist = "npy", '
            'path = "../data.npy" }\n[[kernel.k.sizes]]',
        )
    else:
        text = text.replace("block = [32]\n", 'block = [32]\nreference = "../ref.py:k"\n')
    (spec_dir / "k.kxspec.toml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(spec_dir / "k.kxspec.toml")
    assert str(info.value).startswith(str(spec_dir / "k.kxspec.toml"))
    if case in ("npy-outside", "reference-outside"):
        assert "outside the spec's directory" in str(info.value)


# ---------------------------------------------------------------- build cache
@needs_nvcc
def test_a_moved_tree_hits_the_build_cache_and_a_changed_header_does_not(tmp_path: Path) -> None:
    import shutil

    from kxform.build import Builder, BuildJob

    tree = tmp_path / "a" / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "include").mkdir()
    (tree / "include" / "scale.h").write_text("#define SCALE 2.0f\n")
    source = '#include "scale.h"\n' + KERNEL.replace("1.0f", "SCALE")
    (tree / "src" / "tile.cu").write_text(source)

    def job(root: Path) -> BuildJob:
        return BuildJob(
            source=source,
            filename="src/tile.cu",
            output="check",
            include_dirs=("../include",),
            source_dir=str(root / "src"),
        )

    cache = tmp_path / "cache"
    first = Builder(cache_dir=cache, jobs=1)
    assert first.build(job(tree)).ok and first.nvcc_calls == 1
    moved = tmp_path / "b" / "tree"
    moved.parent.mkdir()
    shutil.move(str(tree), str(moved))
    second = Builder(cache_dir=cache, jobs=1)
    result = second.build(job(moved))
    assert result.ok and result.cached and second.nvcc_calls == 0
    (moved / "include" / "scale.h").write_text("#define SCALE 3.0f\n")
    third = Builder(cache_dir=cache, jobs=1)
    assert third.build(job(moved)).ok and third.nvcc_calls == 1


def test_one_lock_library() -> None:
    """Every lock kxform takes goes through filelock (portable, one behaviour): no second
    mechanism built on fcntl or msvcrt."""
    package = Path(__file__).resolve().parents[2] / "kxform"
    users = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if re.search(r"^\s*(import|from)\s+(fcntl|msvcrt)\b", p.read_text(), re.M)
    )
    assert users == []
    lockers = {str(p.relative_to(package)) for p in package.rglob("*.py") if "from filelock import" in p.read_text()}
    assert {"workspace/lock.py", "propose/lockfile.py"} <= lockers
