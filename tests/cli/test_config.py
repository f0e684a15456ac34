"""Project configuration: discovery, validation, precedence, and its effect on `apply`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc, run_cli
from kxform.errors import SpecError
from kxform.harness.spec import load_spec
from kxform.workspace.config import find_config, load_config
from kxform.workspace.exclude import Exclude

KERNEL = """__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


def _tree(root: Path, config: str | None, name: str = "kxform.toml") -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "deep" / "tile.cu").write_text(KERNEL)
    (root / "src" / "gen").mkdir()
    (root / "src" / "gen" / "made.cu").write_text(KERNEL.replace("tile", "made"))
    if config is not None:
        (root / name).write_text(config)
    return root


def _run_record(tree: Path) -> tuple[dict, list[dict]]:
    (log,) = (tree / ".kxform" / "logs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return records[0], records


def test_found_walking_up_and_harness_specs_are_passed_over(tmp_path: Path) -> None:
    tree = _tree(tmp_path, '[tool.kxform]\npasses = ["swizzle"]\n', "pyproject.toml")
    spec = (CORPORA / "sgemm_tiled" / "sgemm_tiled.kxspec.toml").read_text()
    (tree / "src" / "kxform.toml").write_text(spec)  # a harness spec on the way up: not a configuration
    assert find_config([str(tree / "src" / "deep" / "tile.cu")]) == tree / "pyproject.toml"
    (tree / "kxform.toml").write_text('[tool.kxform]\npasses = ["swizzle{pattern=row}"]\n')
    assert find_config([str(tree / "src" / "deep")]) == tree / "kxform.toml"  # kxform.toml wins in one directory
    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tree / "kxform.toml").unlink()
    assert find_config([str(tree / "src")]) is None  # a pyproject.toml without [tool.kxform] does not count


def test_corpus_harness_spec_is_not_a_configuration() -> None:
    # corpora/*/kxform.toml are harness specs: apply there without --pass must not take one for a config
    proc = run_cli("apply", "--check", "--verify", "static", str(CORPORA / "sgemm_tiled"))
    assert proc.returncode == 2 and "no pass given" in proc.stderr


def test_a_configuration_is_not_a_harness_spec(tmp_path: Path) -> None:
    (tmp_path / "kxform.toml").write_text('# project\n[tool.kxform]\npasses = ["swizzle"]\n')
    with pytest.raises(SpecError, match=r"kxform.toml:2:1: this is a project configuration"):
        load_spec(tmp_path / "kxform.toml")
    (tmp_path / "kxform.toml").write_text('version = 1\nfile = "a.cu"\n[tool.kxform]\npasses = ["swizzle"]\n')
    with pytest.raises(SpecError, match=r"kxform.toml:1:1: 'version' is a harness spec key"):
        load_config(tmp_path / "kxform.toml")


@pytest.mark.parametrize(
    "body, message",
    [
        ('pases = ["swizzle"]', r":2:1: \[tool.kxform\]: unknown key 'pases' .*did you mean 'passes'\?"),
        ("passes = 3", r":2:1: \[tool.kxform\]: 'passes' must be an array of strings, got integer"),
        ("passes = []", r"'passes' is empty"),
        (
            'include = "inc"\ndefines = [1]',
            r":3:1: \[tool.kxform\]: 'defines\[0\]' must be a non-empty string, got integer",
        ),
        ('defines = ["1BAD"]', r"expected NAME or NAME=VALUE"),
        ('verify = "gpuu"', r"unknown verify 'gpuu' \(expected one of auto, gpu, cpu, compile, static\)"),
        ("jobs = -1", r"'jobs' must be >= 0"),
        ("measure = 'yes'", r"'measure' must be true or false, got string"),
        ("lock = 3", r"'lock' must be true, false or a path, got integer"),
        ('lock = "/tmp/elsewhere.lock"', r"'lock' = '/tmp/elsewhere.lock': must be a path inside the project"),
        ('lock = "../../outside.lock"', r"'lock' = '../../outside.lock': must be a path inside the project"),
        ("passes = " + "[" * 3000 + "]" * 3000, r"invalid TOML: arrays or tables nested too deeply"),
        ("x = " + "{a = " * 3000 + "1" + "}" * 3000, r"invalid TOML: arrays or tables nested too deeply"),
        ("[tool.kxform.params]\ngroup = [8]", r"'group' must be a string or a number, got array"),
        ('exclude = ["\\\\"]', r"'exclude\[0\]' = .* is not a valid pattern"),
    ],
)
def test_bad_configuration_is_one_line_exit_2_nothing_written(tmp_path: Path, body: str, message: str) -> None:
    tree = _tree(tmp_path, f"[tool.kxform]\n{body}\n")
    before = (tree / "src" / "deep" / "tile.cu").read_bytes()
    proc = run_cli("apply", "--pass", "swizzle", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("kxform: error: ") and "kxform.toml" in line
    import re

    assert re.search(message, line), line
    assert (tree / "src" / "deep" / "tile.cu").read_bytes() == before
    assert not (tree / ".kxform").exists()  # not even a log


def test_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    tree = _tree(tmp_path, '[tool.kxform]\npasses = ["swizzle"]\nhw = \n', "pyproject.toml")
    proc = run_cli("apply", "--verify", "static", "src", cwd=tree)
    assert proc.returncode == 2 and "pyproject.toml:3" in proc.stderr and "invalid TOML" in proc.stderr


@pytest.mark.slow
def test_settings_apply_and_the_command_line_overrides(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path,
        '[tool.kxform]\npasses = ["swizzle{pattern=column}"]\nhw = "h200"\nverify = "static"\nexclude = ["gen/"]\n',
        "pyproject.toml",
    )
    proc = run_cli("apply", "--check", "src", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    run, records = _run_record(tree)
    assert run["pipeline"] == "swizzle{pattern=column}" and run["hw"] == "h200"
    kernels = [r for r in records if r["type"] == "kernel"]
    assert [k["kernel"] for k in kernels] == ["tile"]  # src/gen/made.cu excluded
    assert kernels[0]["proposal"]["spec"] == "swizzle{pattern=column}"
    assert not any(c["name"] == "compile" for c in kernels[0]["checks"])  # verify = static
    config = next(r for r in records if r["type"] == "config")
    assert config["path"] == str((tree / "pyproject.toml").resolve())

    for log in (tree / ".kxform" / "logs").glob("*"):
        log.unlink()
    proc = run_cli("apply", "--check", "--pass", "swizzle{pattern=row}", "--hw", "a100", "src", cwd=tree)
    run, _ = _run_record(tree)
    assert run["pipeline"] == "swizzle{pattern=row}" and run["hw"] == "a100"

    proc = run_cli("apply", "--check", "--no-config", "src", cwd=tree)
    assert proc.returncode == 2 and "no pass given" in proc.stderr


def test_exclude_has_gitignore_semantics(tmp_path: Path) -> None:
    exclude = Exclude(str(tmp_path), ("gen/", "*_test.cu", "/top.cu"))
    assert exclude.matches(tmp_path / "src" / "gen" / "a.cu")
    assert exclude.matches(tmp_path / "a_test.cu") and exclude.matches(tmp_path / "top.cu")
    assert not exclude.matches(tmp_path / "src" / "top.cu")
    assert not exclude.matches(tmp_path.parent / "gen" / "a.cu")  # outside the root: never


GUARDED = """#include "params.h"
#ifndef TILE_W
#error "TILE_W must be defined"
#endif
__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;  // TILE_W is only checked: a missing define fails
    int y = blockIdx.y * 16 + threadIdx.y;  // the compile, not the kernel's own analysis
    if (x < n && y < n) out[y * n + x] = SCALE;
}
"""


@pytest.mark.slow
@needs_nvcc
def _remarks(proc: subprocess.CompletedProcess[str], cwd: Path) -> str:
    """The run's whole remark messages, from its pass log (the terminal shows short lines)."""
    log = cwd / proc.stderr.rsplit("Log: ", 1)[1].strip()
    return "\n".join(
        json.loads(line)["message"] for line in log.read_text().splitlines() if json.loads(line)["type"] == "remark"
    )


def test_include_paths_and_defines_reach_the_compile_check(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text(GUARDED)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "params.h").write_text("#define SCALE 2.0f\n")
    config = '[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "compile"\n'
    (tmp_path / "kxform.toml").write_text(config)
    proc = run_cli("apply", "--check", "src", cwd=tmp_path)  # planted: no include dir, no define
    # libclang's view; the pattern is forced, so its refusal is exit 1
    assert proc.returncode == 1 and "header not found: params.h" in _remarks(proc, tmp_path), proc.stderr
    (tmp_path / "kxform.toml").write_text(config + 'include = ["inc"]\n')
    proc = run_cli("apply", "--check", "src", cwd=tmp_path)  # planted: the define is missing
    assert proc.returncode == 1 and "swizzle not applied to 'tile': compile stage:" in proc.stderr, proc.stderr
    assert '#error "TILE_W must be defined"' in _remarks(proc, tmp_path) and "kernels: 1 failed" in proc.stderr
    (tmp_path / "kxform.toml").write_text(config + 'include = ["inc"]\ndefines = ["TILE_W=16"]\n')
    proc = run_cli("apply", "--check", "src", cwd=tmp_path)
    assert proc.returncode == 1 and "1 file would be rewritten" in proc.stderr and "error" not in proc.stderr
    proc = run_cli(
        "apply",
        "--check",
        "--no-config",
        "--pass",
        "swizzle{pattern=grouped}",
        "--verify",
        "compile",
        "-I",
        "inc",
        "-D",
        "TILE_W=16",
        "src",
        cwd=tmp_path,
    )  # the same flags from the command line
    assert "1 file would be rewritten" in proc.stderr and "error" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_harness_spec_directories(tmp_path: Path) -> None:
    source = (CORPORA / "transpose" / "transpose.cu").read_text()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "transpose.cu").write_text(source)
    (tmp_path / "harness").mkdir()
    spec = (
        (CORPORA / "transpose" / "transpose.kxspec.toml")
        .read_text()
        .replace('file = "transpose.cu"', 'file = "../src/transpose.cu"')
    )
    spec = spec.replace('reference = "reference.py:transpose"\n', "")
    (tmp_path / "harness" / "transpose.toml").write_text(spec)
    (tmp_path / "kxform.toml").write_text(
        '[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "cpu"\nspecs = ["harness"]\n'
    )
    proc = run_cli("apply", "--check", "src", cwd=tmp_path)
    assert "1 file would be rewritten" in proc.stderr, proc.stderr
    _, records = _run_record(tmp_path)
    (kernel,) = [r for r in records if r["type"] == "kernel"]
    verify = next(c for c in kernel["checks"] if c["name"] == "verify")
    assert verify["ok"] and "verified on the cpu runtime" in verify["detail"], verify
    # planted: the spec names another file, so this source has none
    (tmp_path / "harness" / "transpose.toml").write_text(spec.replace("../src/transpose.cu", "../src/other.cu"))
    (tmp_path / "src" / "other.cu").write_text(source)
    for log in (tmp_path / ".kxform" / "logs").glob("*"):
        log.unlink()
    run_cli("apply", "--check", "src/transpose.cu", cwd=tmp_path)
    _, records = _run_record(tmp_path)
    (kernel,) = [r for r in records if r["type"] == "kernel"]
    verify = next(c for c in kernel["checks"] if c["name"] == "verify")
    assert verify["detail"].startswith("skipped: no harness spec"), verify


@pytest.mark.slow
def test_lock_key_turns_the_lockfile_on(tmp_path: Path) -> None:
    tree = _tree(tmp_path, '[tool.kxform]\npasses = ["swizzle"]\nverify = "static"\nlock = true\n')
    assert load_config(tree / "kxform.toml").lock == str((tree / "kxform.lock").resolve())
    check = run_cli("apply", "--check", "src", cwd=tree)  # no lock yet: every kernel is unlocked
    assert check.returncode == 1 and "'tile' (swizzle) is not in kxform.lock" in check.stderr, check.stderr
    assert not (tree / "kxform.lock").exists()
    done = run_cli("apply", "src", cwd=tree)  # recorded at the project root, beside the configuration
    assert done.returncode == 0 and "lock kxform.lock: 0 replayed, 2 decided; written" in done.stderr, done.stderr
    assert run_cli("apply", "--check", "src", cwd=tree).returncode == 0
    ignored = run_cli("apply", "--check", "--no-lock", "src", cwd=tree)
    assert ignored.returncode == 0 and "kxform: lock " not in ignored.stderr


@pytest.mark.slow
def test_inspect_reads_the_configuration(tmp_path: Path) -> None:
    """hw, exclude, include and defines (libclang's view), and the passes it asks."""
    (tmp_path / "src" / "gen").mkdir(parents=True)
    (tmp_path / "src" / "k.cu").write_text(GUARDED)
    (tmp_path / "src" / "gen" / "g.cu").write_text(GUARDED.replace("tile", "made"))
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "params.h").write_text("#define SCALE 2.0f\n")
    config = '[tool.kxform]\nhw = "mi300x"\nexclude = ["gen/"]\n'
    (tmp_path / "kxform.toml").write_text(config)  # planted: no include directory
    proc = run_cli("inspect", "--json", "src", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout)  # gen/ excluded
    assert report["file"] == "src/k.cu" and report["hw"] == "mi300x"
    (kernel,) = report["kernels"]
    assert set(kernel["passes"]) >= {"swizzle", "tile"}  # no configured passes: every pass
    assert kernel["swizzle"] == "refused" and "header not found: params.h" in kernel["passes"]["swizzle"]["reasons"][0]
    (tmp_path / "kxform.toml").write_text(config + 'passes = ["swizzle"]\ninclude = ["inc"]\ndefines = ["TILE_W=16"]\n')
    (report,) = json.loads(run_cli("inspect", "--json", "src", cwd=tmp_path).stdout)
    (kernel,) = report["kernels"]
    assert list(kernel["passes"]) == ["swizzle"] and kernel["swizzle"] == "safe", kernel
    (report,) = json.loads(run_cli("inspect", "--json", "--pass", "tile", "--hw", "h100", "src", cwd=tmp_path).stdout)
    assert list(report["kernels"][0]["passes"]) == ["tile"] and report["hw"] == "h100-sxm"  # the command line wins
    (tmp_path / "kxform.toml").write_text(config + 'passes = ["swizzle"]\n[tool.kxform.params]\npattern = "spiral"\n')
    proc = run_cli("inspect", "src", cwd=tmp_path)  # planted: a configured option the pass rejects
    assert proc.returncode == 2 and "spiral" in proc.stderr, proc.stderr
