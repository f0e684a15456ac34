"""The semantic layer's provider for one file, with the toolchain's flags.

kxform.frontend.semantic runs libclang on flags it is given; which flags (the compile
database's for the file or for the unit that includes it, the toolchain's system
directories) is the build layer's knowledge, so the provider is assembled here.
"""

from __future__ import annotations

from collections.abc import Callable

from kxform.build.toolchain import Toolchain
from kxform.frontend.model import SourceModel
from kxform.frontend.semantic import SemanticInfo, provider_for

__all__ = ["semantic_provider"]


def semantic_provider(
    path: str, build_dir: str | None, includer: str | None = None, toolchain: Toolchain | None = None
) -> Callable[[SourceModel], SemanticInfo | None]:
    """A provider for the driver: runs libclang only when the model needs it.

    A header takes the compile database flags of `includer` (the unit of the run that
    includes it) when it has no entry of its own, and that unit's directory is searched
    too (Toolchain.libclang_args)."""
    service = toolchain if isinstance(toolchain, Toolchain) else Toolchain.create(build_dir)
    return provider_for(
        path, service.libclang_args(path, includer), service.system_include_dirs(), bool(service.build_dir)
    )
