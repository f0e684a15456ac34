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


def test_the_readme_says_what_ci_runs_and_installs() -> None:
    """`.ci/run` runs the README's test command, and what else it does (installing a
    headless Chromium for the report's browser tests) the README says too."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = re.search(r"Run the tests .*?```sh\n(.*?)\n```", readme, re.S)
    assert command is not None
    steps = [step.strip() for step in command.group(1).split("&&")]
    ci_lines = [line.strip() for line in ci.splitlines()]
    assert all(any(step in line for line in ci_lines) for step in steps), steps
    installed = set(re.findall(r"apt-get install -y -q (\w+)", ci))
    assert installed == {"chromium"}
    after = " ".join(readme[command.end() : command.end() + 600].split())
    assert all(f"apt-get install {name}" in after for name in installed), after
