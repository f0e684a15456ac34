"""The project's own Python follows its stated conventions: `ruff check` and `ruff format
--check` (configuration in pyproject.toml's [tool.ruff]) find nothing. CI runs them
through this test, so the README's test command is the whole of CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed: pip install -e '.[test]'")
    return [found]


@pytest.mark.parametrize(
    "command", [["check", "--no-cache"], ["format", "--check", "--no-cache"]], ids=["check", "format"]
)
def test_ruff_finds_nothing(command: list[str]) -> None:
    proc = subprocess.run([*_ruff(), *command, "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
