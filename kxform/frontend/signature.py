"""A kernel's declared parameters, as the source spells them.

Read by the unit extractor (kxform.build.extract) and carried by every runtime request
(kxform.runtime.base re-exports it): a front-end record, so that the build layer does
not import the runtimes that sit above it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelParam"]


@dataclass(frozen=True)
class KernelParam:
    """One parameter of the kernel as declared in the source: C type text and name."""

    ctype: str
    name: str
