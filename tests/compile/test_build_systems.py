"""kxform inside real builds: the CMake package (`kxform_transform`) and the plain-Makefile
pattern, on examples/demo (two kernels, a shared header, an include directory and a
define from the build), with real CMake and nvcc. Timings: tools/bench_cmake.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NVCC, ROOT, kxform_exe, run_cli

DEMO = ROOT / "examples" / "demo"
CMAKE = shutil.which("cmake")
MAKE = shutil.which("make")


def _cmake_version() -> tuple[int, ...]:
    if CMAKE is None:
        return ()
    out = subprocess.run([CMAKE, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"(\d+)\.(\d+)", out)
    return tuple(int(x) for x in match.groups()) if match else ()


needs_tools = pytest.mark.skipif(
    NVCC is None or CMAKE is None or _cmake_version() < (3, 20),
    reason=f"needs nvcc and CMake >= 3.20 (nvcc: {NVCC or 'missing'}, cmake: {CMAKE or 'missing'} "
    f"{'.'.join(map(str, _cmake_version()))})",
)
pytestmark = [pytest.mark.slow, pytest.mark.nvcc]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(kxform_exe()).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=600)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _configure(source: Path, build: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    cmake_dir = run_cli("--cmake-dir").stdout.strip()
    return _run(
        CMAKE or "cmake",
        "-S",
        str(source),
        "-B",
        str(build),
        *generator,
        f"-Dkxform_DIR={cmake_dir}",
        f"-DCMAKE_CUDA_COMPILER={NVCC}",
        *extra,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("cmake")
    source, build = root / "demo", root / "build"
    shutil.copytree(DEMO, source)
    before = _snapshot(source)
    configured = _configure(source, build)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    done = _run(CMAKE or "cmake", "--build", str(build))
    assert done.returncode == 0, done.stdout + done.stderr
    return source, build, before


@needs_tools
def test_cmake_builds_the_rewritten_copies_out_of_source(built: tuple[Path, Path, dict[str, bytes]]) -> None:
    source, build, before = built
    copies = build / "kxform" / "demo" / "src"
    assert "kxform_block" in (copies / "sgemm.cu").read_text()
    # the transpose: the model (its spec drafted with the build's -I and -D) predicts no gain
    assert (copies / "transpose.cu").read_bytes() == (source / "src" / "transpose.cu").read_bytes()
    assert (copies / "main.cu").read_bytes() == (source / "src" / "main.cu").read_bytes()  # no kernel: copied
    assert (copies / "tile.cuh").is_file()  # the quoted header travels with its includer
    objects = {p.name for p in build.rglob("*.o")}
    assert {"sgemm.cu.o", "transpose.cu.o", "main.cu.o"} <= objects
    assert any(str(p).endswith("kxform/demo/src/sgemm.cu.o") for p in build.rglob("*.o"))
    assert (build / "demo").is_file()
    assert _snapshot(source) == before  # the source tree is never written (logs go to the build tree)
    listing = run_cli("log", "list", str(build / "kxform" / "demo" / "logs"))
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == 4, listing.stdout


@needs_tools
def test_cmake_reprocesses_only_what_changed(built: tuple[Path, Path, dict[str, bytes]]) -> None:
    source, build, _ = built
    noop = _run(CMAKE or "cmake", "--build", str(build))
    assert noop.returncode == 0 and "kxform src/" not in noop.stdout, noop.stdout
    copies = build / "kxform" / "demo" / "src"
    stamps = {name: (copies / name).stat().st_mtime_ns for name in ("sgemm.cu", "transpose.cu", "main.cu")}
    header = source / "src" / "tile.cuh"
    now = time.time()  # newer than every output; not in the future, or the builds after would re-run it too
    os.utime(header, (now, now))  # the header only sgemm.cu includes
    again = _run(CMAKE or "cmake", "--build", str(build))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kxform src/sgemm.cu" in again.stdout
    assert "kxform src/transpose.cu" not in again.stdout and "kxform src/main.cu" not in again.stdout
    assert (copies / "sgemm.cu").stat().st_mtime_ns > stamps["sgemm.cu"]
    assert (copies / "transpose.cu").stat().st_mtime_ns == stamps["transpose.cu"]


COLUMN = '[tool.kxform]\npasses = ["swizzle"]\nverify = "compile"\n\n[tool.kxform.params]\npattern = "column"\n'
"""A configuration that rewrites every kernel with the column order (the demo's rewrites
only sgemm, with the order its model chose)."""


def _build(build: Path) -> str:
    done = _run(CMAKE or "cmake", "--build", str(build))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _reran(output: str) -> set[str]:
    """The sources a build re-ran kxform on (its custom commands' comments)."""
    return set(re.findall(r"kxform (src/\S+)", output))


@needs_tools
def test_cmake_rebuilds_when_a_configuration_is_added_then_removed(built: tuple[Path, Path, dict[str, bytes]]) -> None:
    """A kxform.toml added after the build, nearer the sources than the project's, governs
    them: a depfile cannot name it, the stamps of `kxform deps` catch it, every source is
    re-run and the copies take its settings; the no-op build after it runs nothing, and
    removing it brings back the first copies."""
    source, build, _ = built
    copies = build / "kxform" / "demo" / "src"
    names = ("main.cu", "sgemm.cu", "transpose.cu")
    first = {name: (copies / name).read_bytes() for name in names}
    assert b"kxform_swizzle_column" not in first["sgemm.cu"] and b"kxform_block" not in first["transpose.cu"]
    added = source / "src" / "kxform.toml"
    added.write_text(COLUMN)
    try:
        assert _reran(_build(build)) == {f"src/{name}" for name in names}
        for name in ("sgemm.cu", "transpose.cu"):
            assert "kxform_swizzle_column" in (copies / name).read_text(), name
        assert _reran(_build(build)) == set()  # the stamps are unchanged: nothing re-runs
    finally:
        added.unlink()
    assert _reran(_build(build)) == {f"src/{name}" for name in names}
    assert {name: (copies / name).read_bytes() for name in names} == first
    assert _reran(_build(build)) == set()


@needs_tools
def test_cmake_remakes_the_copies_whose_harness_spec_changed(built: tuple[Path, Path, dict[str, bytes]]) -> None:
    """sgemm's spec edited and a spec added for transpose: those two copies are remade
    (the second only through its stamp: no depfile named the file), main.cu's is not."""
    source, build, _ = built
    copies = build / "kxform" / "demo" / "src"
    spec, added = source / "src" / "sgemm.kxspec.toml", source / "src" / "transpose.kxspec.toml"
    original = spec.read_text()
    kept = (copies / "main.cu").stat().st_mtime_ns
    before = (copies / "sgemm.cu").stat().st_mtime_ns
    spec.write_text(original.replace('name = "ragged"', 'name = "uneven"'))
    added.write_text("# the transpose's spec, to be written\n")
    try:
        assert _reran(_build(build)) == {"src/sgemm.cu", "src/transpose.cu"}
        assert (copies / "sgemm.cu").stat().st_mtime_ns > before
        assert (copies / "main.cu").stat().st_mtime_ns == kept
        assert str(added) in (copies / "transpose.cu.inputs").read_text()
    finally:
        spec.write_text(original)
        added.unlink()
    assert _reran(_build(build)) == {"src/sgemm.cu", "src/transpose.cu"}


@needs_tools
def test_cmake_stamps_name_the_hardware_profile_file(tmp_path: Path) -> None:
    """`kxform_transform(demo HW gpu.toml)`: the profile file is a decision input of every
    source, and editing it rewrites every stamp (the stamp step built alone, as its own
    target: no kxform apply, no nvcc)."""
    source, build = tmp_path / "demo", tmp_path / "build"
    shutil.copytree(DEMO, source)
    profile = source / "gpu.toml"
    profile.write_text((ROOT / "hw" / "h200.toml").read_text())
    lists = source / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("kxform_transform(demo)", "kxform_transform(demo HW gpu.toml)"))
    configured = _configure(source, build)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    stamps = [build / "kxform" / "demo" / "src" / f"{name}.inputs" for name in ("main.cu", "sgemm.cu", "transpose.cu")]

    def stamp_step() -> list[float]:
        done = _run(CMAKE or "cmake", "--build", str(build), "--target", "demo_kxform_inputs")
        assert done.returncode == 0 and not _reran(done.stdout), done.stdout + done.stderr
        return [stamp.stat().st_mtime for stamp in stamps]

    stamp_step()
    assert all(str(profile) in stamp.read_text() for stamp in stamps)
    for stamp in stamps:
        os.utime(stamp, (1_000_000_000, 1_000_000_000))
    assert stamp_step() == [1_000_000_000] * 3  # nothing changed: no stamp rewritten
    profile.write_text(profile.read_text() + "# edited\n")
    assert 1_000_000_000 not in stamp_step()


@needs_tools
def test_cmake_misuse_is_a_configure_error(tmp_path: Path) -> None:
    source = tmp_path / "demo"
    shutil.copytree(DEMO, source)
    lists = source / "CMakeLists.txt"
    original = lists.read_text()
    lists.write_text(original.replace("kxform_transform(demo)", "kxform_transform(nosuch)"))
    proc = _configure(source, tmp_path / "b1")
    assert proc.returncode != 0 and "kxform_transform: 'nosuch' is not a target" in proc.stderr
    lists.write_text(original.replace("kxform_transform(demo)", "kxform_transform(demo PASES swizzle)"))
    proc = _configure(source, tmp_path / "b2")
    assert proc.returncode != 0 and "unknown arguments: PASES;swizzle" in proc.stderr
    lists.write_text(original.replace("kxform_transform(demo)", "kxform_transform(demo LOCK_FILE x.lock)"))
    proc = _configure(source, tmp_path / "b3")
    assert proc.returncode != 0 and "LOCK_FILE goes with LOCK" in proc.stderr


@needs_tools
def test_cmake_lock_records_then_replays(built: tuple[Path, Path, dict[str, bytes]], tmp_path: Path) -> None:
    """`kxform_transform(demo LOCK)`: the first build records kxform.lock in the source tree;
    a fresh checkout with that lock builds the same copies, every kernel replayed."""
    _, plain, _ = built
    first = tmp_path / "first"
    shutil.copytree(DEMO, first)
    lists = first / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("kxform_transform(demo)", "kxform_transform(demo LOCK)"))
    assert _configure(first, tmp_path / "b1").returncode == 0
    done = _run(CMAKE or "cmake", "--build", str(tmp_path / "b1"))
    assert done.returncode == 0, done.stdout + done.stderr
    lock = (first / "kxform.lock").read_text()
    assert lock.count("\n[[decision]]\n") == 2
    assert 'file = "src/sgemm.cu"' in lock and 'file = "src/transpose.cu"' in lock
    copies = tmp_path / "b1" / "kxform" / "demo" / "src"
    for name in ("sgemm.cu", "transpose.cu"):  # the same rewrite as without the lock
        assert (copies / name).read_bytes() == (plain / "kxform" / "demo" / "src" / name).read_bytes()
    second = tmp_path / "second"
    shutil.copytree(first, second)
    assert _configure(second, tmp_path / "b2").returncode == 0
    again = _run(CMAKE or "cmake", "--build", str(tmp_path / "b2"))
    assert again.returncode == 0, again.stdout + again.stderr
    replayed = tmp_path / "b2" / "kxform" / "demo" / "src"
    for name in ("sgemm.cu", "transpose.cu", "main.cu"):
        assert (replayed / name).read_bytes() == (copies / name).read_bytes()
    assert (second / "kxform.lock").read_text() == lock
    logs = [
        json.loads(line)
        for log in (tmp_path / "b2" / "kxform" / "demo" / "logs").rglob("*.jsonl")
        for line in log.read_text().splitlines()
    ]
    kernels = {r["kernel"]: r for r in logs if r["type"] == "kernel"}
    assert set(kernels) == {"sgemm", "transpose"}, kernels
    assert kernels["sgemm"]["outcome"] == "applied" and kernels["sgemm"]["proposal"]["proposer"] == "lock"
    assert kernels["transpose"]["outcome"] != "applied", kernels["transpose"]  # left alone, as recorded
    assert sum(r["replayed"] for r in logs if r["type"] == "lock") == 2


@needs_tools
@pytest.mark.skipif(MAKE is None, reason="make not found")
def test_plain_makefile_pattern(tmp_path: Path) -> None:
    source = tmp_path / "demo"
    shutil.copytree(DEMO, source)
    first = _run(MAKE or "make", f"KXFORM={kxform_exe()}", f"NVCC={NVCC}", cwd=source)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "kxform_block" in (source / "build" / "kx" / "src" / "sgemm.cu").read_text()
    assert (source / "build" / "demo").is_file()
    header = source / "src" / "tile.cuh"
    now = time.time()  # newer than every output; not in the future, or the builds after would re-run it too
    os.utime(header, (now, now))
    again = _run(MAKE or "make", f"KXFORM={kxform_exe()}", f"NVCC={NVCC}", cwd=source)
    runs = [line for line in again.stdout.splitlines() if " apply " in line]
    assert len(runs) == 1 and runs[0].endswith("src/sgemm.cu"), again.stdout
    added = source / "src" / "kxform.toml"  # a configuration added: build/kx/inputs.stamp catches it
    added.write_text(COLUMN)
    steps = []
    for _ in range(2):
        done = _run(MAKE or "make", f"KXFORM={kxform_exe()}", f"NVCC={NVCC}", cwd=source)
        assert done.returncode == 0, done.stdout + done.stderr
        steps.append([line for line in done.stdout.splitlines() if " apply " in line])
    assert len(steps[0]) == 3 and steps[1] == [], steps  # every copy remade once, then nothing
    assert "kxform_swizzle_column" in (source / "build" / "kx" / "src" / "transpose.cu").read_text()
    added.unlink()  # listed in the depfiles: Make re-runs rather than stops ("no rule to make target")
    gone = _run(MAKE or "make", f"KXFORM={kxform_exe()}", f"NVCC={NVCC}", cwd=source)
    assert gone.returncode == 0 and gone.stdout.count(" apply ") == 3, gone.stdout + gone.stderr
