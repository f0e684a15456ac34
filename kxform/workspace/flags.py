"""Include paths and defines of the project configuration, handed to every stage.

The stages that need a project's flags (libclang's semantic layer, the nvcc compile
check, the verification builds) read them per file from a compilation database
(`-p BUILD_DIR`). Rather than teach each stage a second source of flags, the
configuration's `include` and `defines` are merged into one: a temporary
`compile_commands.json` with an entry per file of the run (the `-p` database's flags
first, where one is given, then the configuration's), removed when the run ends.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kxform.build.compile_db import CompileFlags, load_compile_commands


@contextmanager
def merged_build_dir(
    files: Sequence[str], include: Sequence[str], defines: Sequence[str], build_dir: str | None
) -> Iterator[str | None]:
    """Yield what to pass as `build_dir`: `build_dir` itself when the configuration adds
    no flags, else the path of a merged database that lives as long as the context."""
    if not include and not defines:
        yield build_dir
        return
    base = load_compile_commands(build_dir) if build_dir else None
    entries = []
    for file in files:
        flags = base.get(file) if base is not None else CompileFlags((), (), ())
        if flags is None:
            continue  # not in the -p database: the stages report it as they always have
        source = os.path.abspath(file)
        arguments = [
            "nvcc",
            *(f"-I{d}" for d in (*flags.include_dirs, *include)),
            *(f"-D{d}" for d in (*flags.defines, *defines)),
            *flags.extra_flags,
            "-c",
            source,
        ]
        entries.append({"directory": os.getcwd(), "file": source, "arguments": arguments})
    with tempfile.TemporaryDirectory(prefix="kxform-flags-") as directory:
        path = os.path.join(directory, "compile_commands.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(entries, handle, indent=1)
        yield path
