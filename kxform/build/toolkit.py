"""Where the CUDA toolkit keeps its headers (and CCCL's: cub, thrust, libcu++).

Kernels include `cooperative_groups/reduce.h`, `cuda/pipeline`, cuBLAS or NVTX headers;
libclang must search the toolkit's include directories to see them. nvcc itself is the
authority: `nvcc --dryrun` prints the `INCLUDES` and `SYSTEM_INCLUDES` it would pass
(CUDA 12.x and 13 keep CCCL under `include/cccl`). Without nvcc, `$CUDA_HOME` and
`$CUDA_PATH` are tried, then `/usr/local/cuda`.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
from pathlib import Path

from kxform.build.nvcc import find_nvcc

_DRYRUN_VAR = re.compile(r'^#\$ (?:_\w+_)?(INCLUDES|SYSTEM_INCLUDES)="?(.*?)"?\s*$')


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The toolkit's header directories, most specific first; () when no toolkit is found."""
    nvcc = find_nvcc()
    found = _from_nvcc(nvcc) if nvcc else []
    if not found:
        for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                     str(Path(nvcc).resolve().parent.parent) if nvcc else None, "/usr/local/cuda"):
            if root:
                found = _from_root(Path(root))
                if found:
                    break
    return tuple(dict.fromkeys(found))


def _from_nvcc(nvcc: str) -> list[str]:
    try:
        proc = subprocess.run([nvcc, "--dryrun", "-c", "kxform-probe.cu"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    dirs: list[str] = []
    for line in (proc.stdout + proc.stderr).splitlines():
        match = _DRYRUN_VAR.match(line.strip())
        if not match:
            continue
        words = shlex.split(match.group(2).replace('"', " "))
        dirs += [os.path.normpath(w[2:] if w.startswith("-I") else w) for w in words
                 if w not in ("-isystem", "-I") and (w.startswith("-I") or os.path.isabs(w))]
    return [d for d in dirs if os.path.isdir(d)]


def _from_root(root: Path) -> list[str]:
    include = root / "include"
    if not (include / "cuda_runtime.h").is_file():
        return []
    return [str(include)] + ([str(include / "cccl")] if (include / "cccl").is_dir() else [])
