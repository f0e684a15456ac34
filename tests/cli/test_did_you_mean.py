"""A mistyped name gets the closest known one: passes, pass options, hardware profiles,
subcommands, options and choices, each still one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.cli.main import main
from kxform.errors import UsageError, did_you_mean
from kxform.hw import load_profile


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["aply"], "did you mean 'apply'?"),
        (["apply", "--chek", "k.cu"], "unrecognized arguments: --chek; did you mean '--check'?"),
        (["apply", "--pass", "swizzle", "--verify", "compil", "k.cu"], "did you mean 'compile'?"),
        (["apply", "--pass", "swizle", "k.cu"], "unknown pass 'swizle' (passes: "),
        (["apply", "--pass", "swizle", "k.cu"], "; did you mean 'swizzle'?"),
        (["apply", "--pass", "swizzle{patern=row}", "k.cu"], "unknown option 'patern' (options: pattern"),
        (["apply", "--pass", "swizzle{patern=row}", "k.cu"], "; did you mean 'pattern'?"),
        (["apply", "--pass", "swizzle", "--hw", "h20", "k.cu"], "unknown hardware profile 'h20'"),
        (["hw", "show", "--jsn", "h100"], "did you mean '--json'?"),
    ],
)
def test_mistyped_names_get_a_suggestion(
    argv: list[str], hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text("__global__ void k(int* p) { p[blockIdx.x] = 1; }\n")
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and hint in err, err
    assert err.strip().splitlines()[-1].count("did you mean") <= 1
    assert (tmp_path / "k.cu").read_text().startswith("__global__ void k(int* p)")


def test_no_suggestion_when_nothing_is_close() -> None:
    assert did_you_mean("zzzz", ["swizzle", "tile"]) == ""
    assert did_you_mean("tiel", ["swizzle", "tile"]) == "; did you mean 'tile'?"
    with pytest.raises(UsageError, match=r"unknown hardware profile 'h2000'; known: .*; did you mean 'h200'\?$"):
        load_profile("h2000")
