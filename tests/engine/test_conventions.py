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


TOOLS = ROOT / "tools"


def _tool_imports(path: Path, tools: set[str]) -> list[str]:
    """The tools `path` imports as modules (a tool that is a library for another)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in tools]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in tools:
            found.append(node.module or "")
    return found


def test_tools_import_the_package_and_never_each_other() -> None:
    """What two tools share lives in the package (kxform.bench): a tool imports no other
    tool and never patches sys.path to find one."""
    scripts = sorted(TOOLS.glob("*.py"))
    names = {p.stem for p in scripts}
    assert len(names) > 20, "the tools folder lost its scripts"
    patched = [p.name for p in sorted(TOOLS.iterdir()) if p.is_file() and "sys.path" in p.read_text(encoding="utf-8")]
    assert not patched, f"tools that patch sys.path: {patched}"
    imports = {p.name: _tool_imports(p, names) for p in scripts}
    assert not {k: v for k, v in imports.items() if v}, "tools that import tools"


def test_the_tool_rules_see_a_planted_import(tmp_path: Path) -> None:
    planted = tmp_path / "t.py"
    planted.write_text("import os\nfrom gpubench_common import x\ndef f():\n    import kt_replay\n")
    assert _tool_imports(planted, {"gpubench_common", "kt_replay", "corpus"}) == ["gpubench_common", "kt_replay"]


def test_every_tool_is_named_by_a_test_or_a_doc() -> None:
    """A tool nobody runs rots: each is named (`tools/NAME` or its file name) by a test,
    a doc or the README."""
    texts = [p.read_text(encoding="utf-8") for p in (*ROOT.glob("docs/*.md"), ROOT / "README.md")]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")]
    unnamed = [p.name for p in sorted(TOOLS.iterdir()) if p.is_file() and not any(p.name in t for t in texts)]
    assert not unnamed, f"tools no test or doc names: {unnamed}"
