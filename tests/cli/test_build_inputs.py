"""The files kxform's decisions read, as a build sees them: `decision_inputs` (one listing
for `apply --depfile` and `kxform deps`), the stamp rewritten only when that listing or a
listed file changed, and the `kxform deps` command. The real builds that rely on them:
tests/compile/test_build_systems.py."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from kxform.cli.main import main
from kxform.workspace.config import load_config
from kxform.workspace.depfile import stamp_text, write_stamp
from kxform.workspace.inputs import decision_inputs

KERNEL = """__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""
OLD = 1_000_000_000  # a time stamp in 2001: a rewrite cannot keep it


def _project(tmp_path: Path) -> Path:
    """outer/ (a configuration that must not count: a nearer one governs) holding proj/:
    proj/pyproject.toml with [tool.kxform] (a profile file, a spec directory),
    proj/sub/pyproject.toml without it (read by the search, so listed), and beside
    proj/sub/src/a.cu its own spec and a shared spec that names another source."""
    outer = tmp_path / "outer"
    proj = outer / "proj"
    src = proj / "sub" / "src"
    src.mkdir(parents=True)
    (proj / "harness").mkdir()
    (outer / "pyproject.toml").write_text('[tool.kxform]\npasses = ["swizzle"]\n')
    (proj / "pyproject.toml").write_text(
        '[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "static"\n'
        'hw = "gpu.toml"\nspecs = ["harness"]\n'
    )
    (proj / "gpu.toml").write_text((ROOT / "hw" / "h100-sxm.toml").read_text())
    (proj / "sub" / "pyproject.toml").write_text('[project]\nname = "sub"\n')
    (proj / "harness" / "b.toml").write_text('version = 1\nfile = "../sub/src/b.cu"\n')
    (src / "a.cu").write_text(KERNEL)
    (src / "b.cu").write_text(KERNEL.replace("tile(", "other("))
    (src / "a.kxspec.toml").write_text("version = 1\n")
    (src / "kxform-spec.toml").write_text('version = 1\nfile = "b.cu"\n')
    return proj


def test_decision_inputs_are_the_configuration_search_the_profile_file_and_the_specs(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    src = proj / "sub" / "src"
    project = load_config(proj / "pyproject.toml")
    found = decision_inputs([str(src / "a.cu")], [str(src / "a.cu")], project)
    assert found == [
        proj / "sub" / "pyproject.toml",
        proj / "pyproject.toml",
        proj / "gpu.toml",
        src / "kxform-spec.toml",
        src / "a.kxspec.toml",
        proj / "harness" / "b.toml",
    ]
    # --config FILE (no search): that file only; --hw NAME on the command line: no profile file
    named = decision_inputs([str(src / "a.cu")], [str(src / "a.cu")], project, hw="h100", searched=False)
    assert named == [
        proj / "pyproject.toml",
        src / "kxform-spec.toml",
        src / "a.kxspec.toml",
        proj / "harness" / "b.toml",
    ]
    # --no-config: no configuration, so no spec directory either; b.cu has no spec of its own
    assert decision_inputs([str(src)], [str(src / "b.cu")], None, searched=False) == [src / "kxform-spec.toml"]
    # a relative --hw path is the caller's, made absolute
    assert decision_inputs([str(src)], [], None, hw=os.path.relpath(proj / "gpu.toml"), searched=False) == [
        proj / "gpu.toml"
    ]


def test_a_spec_under_an_older_name_and_a_configuration_added_nearer_are_listed(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    src = proj / "sub" / "src"
    (src / "a.kxform.toml").write_text("version = 1\n")  # the older per-source name is still read
    (src / "kxform.toml").write_text('[tool.kxform]\npasses = ["swizzle"]\n')  # now governs src/
    found = decision_inputs([str(src / "a.cu")], [str(src / "a.cu")], load_config(src / "kxform.toml"))
    assert found == [src / "kxform.toml", src / "kxform-spec.toml", src / "a.kxspec.toml", src / "a.kxform.toml"]


def test_the_stamp_is_rewritten_only_when_an_input_is_added_removed_or_edited(tmp_path: Path) -> None:
    config, spec = tmp_path / "kxform.toml", tmp_path / "a.kxspec.toml"
    config.write_text("[tool.kxform]\n")
    stamp = tmp_path / "out" / "a.cu.inputs"
    assert write_stamp(stamp, [config])
    digest = hashlib.sha256(config.read_bytes()).hexdigest()
    assert stamp.read_text() == f"{digest}  {config}\n"
    assert stamp_text([tmp_path / "gone.toml"]) == f"-  {tmp_path / 'gone.toml'}\n".encode()  # unreadable: no hash
    os.utime(stamp, (OLD, OLD))
    assert not write_stamp(stamp, [config])  # the same inputs, the same content: left alone
    assert stamp.stat().st_mtime == OLD
    spec.write_text("version = 1\n")
    assert write_stamp(stamp, [config, spec])  # a spec added
    assert str(spec) in stamp.read_text()
    os.utime(stamp, (OLD, OLD))
    config.write_text('[tool.kxform]\nhw = "h200"\n')
    assert write_stamp(stamp, [config, spec])  # edited, the same set
    assert stamp.stat().st_mtime != OLD
    assert write_stamp(stamp, [spec]) and str(config) not in stamp.read_text()  # removed


def test_deps_writes_a_stamp_per_source_and_rewrites_only_those_whose_inputs_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = _project(tmp_path)
    monkeypatch.chdir(proj / "sub")
    assert main(["deps", "-o", "out", "src/a.cu", "src/b.cu"]) == 0
    stamps = {name: proj / "sub" / "out" / "src" / f"{name}.inputs" for name in ("a.cu", "b.cu")}
    assert f"{proj / 'gpu.toml'}" in stamps["a.cu"].read_text()
    assert f"{proj / 'sub' / 'src' / 'a.kxspec.toml'}" not in stamps["b.cu"].read_text()
    assert "2 stamp(s) checked, 2 rewritten" in capsys.readouterr().err
    for stamp in stamps.values():
        os.utime(stamp, (OLD, OLD))
    assert main(["deps", "-o", "out", "src/a.cu", "src/b.cu"]) == 0  # nothing changed: nothing written
    assert [s.stat().st_mtime for s in stamps.values()] == [OLD, OLD]
    assert "2 stamp(s) checked, 0 rewritten" in capsys.readouterr().err
    (proj / "sub" / "src" / "b.kxspec.toml").write_text("version = 1\n")  # a spec added for b.cu only
    assert main(["deps", "-q", "-o", "out", "src/a.cu", "src/b.cu"]) == 0
    assert stamps["a.cu"].stat().st_mtime == OLD and stamps["b.cu"].stat().st_mtime != OLD
    assert capsys.readouterr().err == ""
    (proj / "sub" / "src" / "kxform.toml").write_text('[tool.kxform]\npasses = ["swizzle"]\n')  # a config added
    assert main(["deps", "-q", "--stamp", "all.stamp", "src"]) == 0
    assert str(proj / "sub" / "src" / "kxform.toml") in (proj / "sub" / "all.stamp").read_text()
    assert str(proj / "pyproject.toml") not in (proj / "sub" / "all.stamp").read_text()  # governed nearer now


def test_deps_bad_input_is_one_line_exit_2_and_no_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = _project(tmp_path)
    monkeypatch.chdir(proj / "sub")
    (proj / "sub" / "src" / "kxform.toml").write_text('[tool.kxform]\npases = ["swizzle"]\n')
    assert main(["deps", "-o", "out", "src/a.cu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "src/kxform.toml:2:1:" in err and "'pases'" in err
    (proj / "sub" / "src" / "kxform.toml").unlink()
    assert main(["deps", "-o", "out", "src/a.cu", "src/nosuch.cu"]) == 2  # a.cu's stamp is not written either
    assert capsys.readouterr().err == "kxform: error: src/nosuch.cu: no such file or directory\n"
    with pytest.raises(SystemExit) as usage:
        main(["deps", "src/a.cu"])
    assert usage.value.code == 2 and "one of the arguments --stamp -o/--out-dir is required" in capsys.readouterr().err
    (proj / "sub" / "file").write_text("")
    assert main(["deps", "--stamp", "file/all.stamp", "src"]) == 2  # its directory is a file
    err = capsys.readouterr().err
    assert err.startswith("kxform: error: file/all.stamp: cannot write the stamp: ") and err.count("\n") == 1
    assert not (proj / "sub" / "out").exists()


@pytest.mark.slow
def test_the_depfile_lists_the_decision_inputs_and_survives_their_removal(tmp_path: Path) -> None:
    """`apply --depfile` through the real command: the profile file and the spec are
    prerequisites, each with an empty rule of its own (gcc -MP) so Make re-runs, rather
    than stops, once one is removed."""
    proj = _project(tmp_path)
    proc = run_cli("apply", "-q", "-o", "out", "--depfile", "out/a.d", "src/a.cu", cwd=proj / "sub")
    assert proc.returncode == 0, proc.stderr
    assert "kxform_block" in (proj / "sub" / "out" / "src" / "a.cu").read_text()  # configured pattern, profile
    text = (proj / "sub" / "out" / "a.d").read_text()
    rule, _, phony = text.partition("\n\n")
    listed = [d.strip() for d in rule.partition(":")[2].replace("\\\n", "\n").split("\n") if d.strip()]
    src = proj / "sub" / "src"
    assert listed == [
        str(src / "a.cu"),
        str(proj / "sub" / "pyproject.toml"),
        str(proj / "pyproject.toml"),
        str(proj / "gpu.toml"),
        str(src / "kxform-spec.toml"),
        str(src / "a.kxspec.toml"),
        str(proj / "harness" / "b.toml"),
    ]
    assert [line for line in phony.split("\n") if line] == [f"{d}:" for d in listed]
