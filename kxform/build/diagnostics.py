"""Compiler messages in terms of the user's file: path and line rewritten, first error found.

nvcc compiles a scratch copy of rewritten text, so its messages name a temporary path
and the rewritten line numbers. Users need `their_file.cu:LINE` of the original, the way
clang and gcc report it, so every location in the log is rewritten and the first error
becomes a one-line `BuildFailed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.errors import BuildFailed, Location

_ENVIRONMENT = re.compile(
    r"fatal error: [^:]+: No such file or directory|cannot open source file|No space left on "
    r"device|Permission denied|Could not open output file|[Cc]annot create temporary|"
    r"could not create|not found on PATH"
)
"""Compiler messages whose cause is the machine, not the code: a header the original
found before, a full disk, an unusable temporary directory, a missing tool."""


def environment_failure(log: str) -> bool:
    """Whether a compiler's output says the build failed for a cause of the machine. Read
    here, where the compiler's own text is first seen; later stages read the reason key
    (kxform.engine.status.BUILD_ENVIRONMENT) the build gives its failure."""
    return bool(_ENVIRONMENT.search(log))


# EDG front end: `path(12): error: ...`; host compiler: `path:12:5: error: ...`.
_EDG = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<rest>.*)$")
_GCC = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<rest>.*)$")
_SEVERE = re.compile(r"\b(catastrophic error|error|fatal)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message: where (line 0: none) and what."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        """`file:line: error: ...`, the form editors and CI annotators understand."""
        where = f"{self.path}:{self.line}" if self.line > 0 else self.path
        return f"{where}: {self.message}"


def map_line(line: int, line_map: tuple[int, ...] | None) -> int:
    """Original line for rewritten `line`. Inserted lines (0 in the map) and lines past
    its end take the nearest original line above them: that is where the insertion was."""
    if not line_map or line <= 0:
        return line
    for index in range(min(line, len(line_map)) - 1, -1, -1):
        if line_map[index] > 0:
            return line_map[index]
    return line


def rewrite_log(log: str, scratch_path: str, filename: str, line_map: tuple[int, ...] | None) -> str:
    """Replace the scratch path by `filename`, with original line numbers where known."""

    def edg(match: re.Match[str]) -> str:
        return f"{filename}({map_line(int(match.group(1)), line_map)})"

    def gcc(match: re.Match[str]) -> str:
        return f"{filename}:{map_line(int(match.group(1)), line_map)}"

    quoted = re.escape(scratch_path)
    text = re.sub(quoted + r"\((\d+)\)", edg, log)
    text = re.sub(quoted + r":(\d+)", gcc, text)
    return text.replace(scratch_path, filename)


def first_error(log: str) -> Diagnostic | None:
    """The first error in a (rewritten) log: located compiler errors first, then any
    ptxas/nvcc/linker line that says error or fatal."""
    for raw in log.splitlines():
        line = raw.strip()
        for pattern in (_EDG, _GCC):
            match = pattern.match(line)
            if match and _SEVERE.match(match.group("rest")):
                col = int(match.groupdict().get("col") or 0)
                return Diagnostic(match.group("path"), int(match.group("line")), col, match.group("rest"))
    for raw in log.splitlines():
        line = raw.strip()
        if _SEVERE.search(line) and not line.lower().startswith(("1 error detected", "compilation terminated")):
            return Diagnostic("", 0, 0, " ".join(line.split()))
    return None


def located_errors(log: str) -> list[Diagnostic]:
    """Every located error of a (rewritten) log, in order: what two compiles of one unit
    are compared by (the same error at the same original line is the same error)."""
    out = []
    for raw in log.splitlines():
        line = raw.strip()
        for pattern in (_EDG, _GCC):
            match = pattern.match(line)
            if match and _SEVERE.match(match.group("rest")):
                col = int(match.groupdict().get("col") or 0)
                out.append(
                    Diagnostic(
                        match.group("path"), int(match.group("line")), col, " ".join(match.group("rest").split())
                    )
                )
                break
    return out


def build_failure(filename: str, log: str) -> BuildFailed:
    """A one-line `BuildFailed` for a failed build, with the full log attached.

    The message is the first error in compiler form (`file:line: error: ...`);
    `location` carries the same place for the driver's structured results.
    """
    diag = first_error(log)
    if diag is None:
        tail = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "no output")
        exc = BuildFailed(f"{filename}: nvcc failed: {tail}", log=log)
        exc.location = Location(filename)
        return exc
    if not diag.path:
        diag = Diagnostic(filename, 0, 0, diag.message)
    exc = BuildFailed(str(diag), log=log)
    exc.location = Location(diag.path, diag.line, diag.col)
    return exc
