"""The files besides the sources that a run's decisions read: the project configuration,
a hardware profile file, the harness specs.

A build system that runs kxform must re-run it when one of them changes, appears or
goes away. `apply --depfile` lists the ones that exist; `kxform deps` records them with
their content hashes in a stamp that changes only when that record changes (a
depfile can name only existing files, so an addition needs the stamp). Both call
`decision_inputs`, so they cannot disagree on what a decision reads. The lockfile is
not among them: `apply` writes it itself and lists it in the depfile.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from kxform.harness.dirs import dir_specs
from kxform.harness.spec import spec_candidates
from kxform.hw import is_profile_path
from kxform.workspace.config import ProjectConfig, config_candidates


def decision_inputs(
    paths: Sequence[str | os.PathLike[str]],
    sources: Iterable[str | os.PathLike[str]],
    project: ProjectConfig | None,
    hw: str | None = None,
    searched: bool = True,
) -> list[Path]:
    """Existing decision inputs of a run over `paths` (as given on its command line) that
    reads `sources`, absolute, each once: every configuration file the search reads
    (`searched`; else only `project`, the `--config` file, or none with `--no-config`),
    the hardware profile file (`hw`, the command line's, over the configuration's), every
    spec file read for a source (beside it, and every spec in the configured `specs`
    directories)."""
    found: list[Path] = []
    if searched:
        found += config_candidates(paths)
    elif project is not None:
        found.append(project.path)
    profile = hw if hw is not None else project.hw if project is not None else None
    if profile and is_profile_path(profile) and os.path.isfile(profile):
        found.append(Path(profile))
    for source in sources:
        found += spec_candidates(source)
    for directory in project.specs if project is not None else ():
        found += dir_specs(directory)
    return list(dict.fromkeys(Path(os.path.abspath(p)) for p in found))
